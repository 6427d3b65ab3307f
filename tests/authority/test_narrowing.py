"""Children can only narrow: every built-in type under every mode, custom definitions, grandchildren."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents import AgentDefinition, Runtime, SpawnError
from subagents.definitions.loader import load_definitions
from subagents.messages import ToolUseBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.factory import AgentFactory
from subagents.tools.agents import AGENT_TOOLS
from subagents.tools.builtin import builtin_tools

MODES = ["plan", "default", "autoEdit", "yolo"]
FILE_TOOLS = [t.name for t in builtin_tools()]  # every built-in tool (reading, editing, shell, web, todo, skill)
AGENT = ["spawn_agent", "send_input", "wait", "close_agent", "resume_agent", "list_agents"]
# what each built-in type gets as the child of a general-purpose root (which has every tool)
EXPECTED_TOOLS = {
    "general-purpose": FILE_TOOLS + AGENT,
    "explore": ["read_file", "list_dir", "glob", "grep", "repo_map"],
    "plan": ["read_file", "list_dir", "glob", "grep", "todo_write", "todo_read", "notepad_write"],
    "verify": ["read_file", "list_dir", "glob", "grep", "bash"],
    "coordinator": AGENT,
}


def factory(tmp_path: Path, mode: str, max_depth: int = 2) -> AgentFactory:
    return AgentFactory([*builtin_tools(), *AGENT_TOOLS], max_depth=max_depth, runtime_mode=mode,
                        workdir=str(tmp_path))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("agent_type", list(EXPECTED_TOOLS))
def test_every_builtin_type_under_every_mode(tmp_path: Path, mode: str, agent_type: str) -> None:
    defs = load_definitions(tmp_path)
    f = factory(tmp_path, mode)
    root = f.authority(defs.get("general-purpose"), None, None, 0)
    assert root.mode == mode
    if mode == "plan" and agent_type == "general-purpose":
        with pytest.raises(SpawnError) as e:
            f.authority(defs.get(agent_type), root.mode, root.registry, 1)
        assert str(e.value) == (
            "agent type 'general-purpose' can edit files (write_file, edit_file), and an agent in permission "
            "mode 'plan' may spawn only read-only agent types (such as explore or plan); pick one of those, "
            "or do the reading yourself")
        return
    child = f.authority(defs.get(agent_type), root.mode, root.registry, 1)
    assert child.mode == mode
    assert sorted(child.registry.names) == sorted(EXPECTED_TOOLS[agent_type])
    assert set(child.registry.names) <= set(root.registry.names)
    assert child.notes == []


@pytest.mark.parametrize("mode", MODES)
def test_grandchildren_narrow_further_and_lose_spawning_at_max_depth(tmp_path: Path, mode: str) -> None:
    defs = load_definitions(tmp_path)
    f = factory(tmp_path, mode)
    root = f.authority(defs.get("general-purpose"), None, None, 0)
    child = f.authority(defs.get("coordinator"), root.mode, root.registry, 1)
    grand = f.authority(defs.get("general-purpose"), child.mode, child.registry, 2)
    # a coordinator calls only the agent tools but holds the file tools for its sub-agents: its general-purpose
    # child gets those (no editing tool in plan mode), and no spawning at max_depth
    held = [t for t in FILE_TOOLS if not (mode == "plan" and t in ("write_file", "edit_file"))]
    assert sorted(child.registry.held) == sorted(held)
    assert sorted(grand.registry.names) == sorted(held)
    assert grand.registry.held == []
    assert grand.mode == mode


def test_a_delegator_calls_none_of_the_tools_it_holds(tmp_path: Path) -> None:
    defs = load_definitions(tmp_path)
    f = factory(tmp_path, "default")
    coord = f.authority(defs.get("coordinator"), None, None, 0)
    assert sorted(coord.registry.names) == sorted(AGENT)
    assert {s.name for s in coord.registry.specs()} == set(AGENT)  # the model is never shown them
    _, error = coord.registry.check(ToolUseBlock("1", "write_file", {"path": "x", "content": "y"}))
    assert error is not None
    assert "outside this agent's tool fence" in error
    assert coord.registry.clone().held == coord.registry.held


def test_a_delegator_holds_no_more_than_its_parent(tmp_path: Path) -> None:
    reader = AgentDefinition("reader", tools=["read_file", "grep", "spawn_agent"])
    defs = load_definitions(tmp_path, session=[reader])
    f = factory(tmp_path, "yolo")
    root = f.authority(defs.get("reader"), None, None, 0)
    coord = f.authority(defs.get("coordinator"), root.mode, root.registry, 1)
    assert sorted(coord.registry.held) == ["grep", "read_file"]
    assert coord.registry.names == ["spawn_agent"]
    grand = f.authority(defs.get("general-purpose"), coord.mode, coord.registry, 2)
    assert sorted(grand.registry.names) == ["grep", "read_file"]
    named = AgentDefinition("picky", tools=["spawn_agent"], delegate_tools=["read_file", "bash", "nope"])
    defs = load_definitions(tmp_path, session=[named])
    root = f.authority(defs.get("general-purpose"), None, None, 0)
    assert f.authority(defs.get("picky"), root.mode, root.registry, 1).registry.held == ["read_file", "bash"]
    limited = f.authority(defs.get("picky"), coord.mode, coord.registry, 1)  # bash: not the coordinator's
    assert limited.registry.held == ["read_file"]


def test_delegate_tools_in_an_agent_file(tmp_path: Path) -> None:
    agents = tmp_path / ".subagents" / "agents"
    agents.mkdir(parents=True)
    (agents / "boss.md").write_text("---\nname: boss\ntools: [Task]\ndelegateTools: Read, Edit, Bash\n---\nDelegate.\n")
    d = load_definitions(tmp_path).get("boss")
    assert d.tools == ["spawn_agent"]
    assert d.delegate_tools == ["read_file", "edit_file", "bash"]
    assert d.to_dict()["delegate_tools"] == ["read_file", "edit_file", "bash"]


def test_a_read_only_parent_cannot_get_a_writer(tmp_path: Path) -> None:
    reader = AgentDefinition("reader", tools=["read_file", "grep", "spawn_agent"])
    writer = AgentDefinition("writer", tools=["read_file", "write_file", "edit_file", "bash"])
    defs = load_definitions(tmp_path, session=[reader, writer])
    f = factory(tmp_path, "yolo")
    root = f.authority(defs.get("reader"), None, None, 0)
    for t in ("writer", "general-purpose"):
        child = f.authority(defs.get(t), root.mode, root.registry, 1)
        assert not {"write_file", "edit_file", "bash"} & set(child.registry.names), t
    child = f.authority(defs.get("writer"), root.mode, root.registry, 1)
    assert child.registry.names == ["read_file"]
    assert child.notes == ["tools its definition lists but its parent does not have were left out: "
                           "write_file, edit_file, bash"]


@pytest.mark.parametrize(("runtime_mode", "def_mode", "effective"), [
    ("default", "yolo", "default"), ("default", "plan", "plan"), ("yolo", "plan", "yolo"),
    ("autoEdit", "acceptEdits", "autoEdit"), ("plan", "bypassPermissions", "plan"),
])
def test_a_definitions_mode_narrows_but_never_widens(tmp_path: Path, runtime_mode: str, def_mode: str,
                                                     effective: str) -> None:
    d = AgentDefinition("x", tools=["read_file"], permission_mode=def_mode)
    defs = load_definitions(tmp_path, session=[d])
    f = factory(tmp_path, runtime_mode)
    root = f.authority(defs.get("general-purpose"), None, None, 0)
    assert f.authority(defs.get("x"), root.mode, root.registry, 1).mode == effective
    assert f.authority(defs.get("x"), None, None, 0).mode == effective  # as a root too


def spawn(agent_type: str, background: bool = False) -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": agent_type, "prompt": "do it", "description": "x",
                                    "background": background})


async def test_the_spawn_result_tells_the_model_what_was_narrowed(workdir: Path) -> None:
    seen: dict[str, Any] = {}
    writer = AgentDefinition("writer", tools=["read_file", "write_file"], permission_mode="yolo")
    reader = AgentDefinition("reader", tools=["read_file", "spawn_agent", "wait"])

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            seen["child_tools"] = req.tool_names
            seen["child_system"] = req.system
            return ModelResponse("child done")
        results = [r.content for m in req.messages for r in m.tool_results]
        if not results:
            return ModelResponse("", [spawn("writer"), spawn("writer", background=True)])
        seen["results"] = results
        return ModelResponse("root done")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", agents=[writer, reader]) as rt:
        await rt.run("go", agent="reader")
    fg, bg = seen["results"]
    assert fg.startswith("[narrowed: its definition asks for permission mode 'yolo', wider than the parent's "
                         "'default': it runs in 'default'; tools its definition lists but its parent does not have "
                         "were left out: write_file]\n[agent writer-")
    data = json.loads(bg)
    assert data["permission_mode"] == "default"
    assert "write_file" in data["narrowed"]
    assert seen["child_tools"] == ["read_file"]
    assert "Permission mode: default." in seen["child_system"]


async def test_a_plan_mode_agent_can_spawn_only_read_only_types(workdir: Path) -> None:
    results: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse("looked")
        done = [r.content for m in req.messages for r in m.tool_results]
        if not done:
            return ModelResponse("", [spawn("general-purpose"), spawn("explore")])
        results.extend(done)
        return ModelResponse("ok")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", permission_mode="plan") as rt:
        await rt.run("go")
        modes = {n.info.agent_type: n.mode for n in rt.manager.nodes.values()}
    assert results[0].startswith("agent type 'general-purpose' can edit files")
    assert "[agent explore-" in results[1]
    assert modes == {"general-purpose": "plan", "explore": "plan"}
