"""Seed 001's shared state handles, through Runtime + FunctionModel: one todo store per tree with a list per
agent (``todo_write`` / ``todo_read``), the notepad (``notepad_write``, injected into later children's
prompts), the briefing built at spawn time, and the context fields tools and hooks see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.authority.hooks import HookInput
from subagents.definitions.model import AgentDefinition
from subagents.exceptions import UnconfinedShellWarning
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.base import ToolCategory, ToolContext, tool
from subagents.tools.builtin import builtin_tools
from subagents.tools.notepad import notepad_write
from subagents.tools.todo import todo_read

BUILTIN = {t.name for t in builtin_tools()}
EXTRA = [t for t in (todo_read, notepad_write) if t.name not in BUILTIN]  # until builtin.py registers them


@tool(category=ToolCategory.READ)
def context_fields(ctx: ToolContext) -> str:
    """Report the seed's context fields of the calling agent."""
    return json.dumps(ctx.shared_fields(), sort_keys=True)


def runtime(workdir: Path, fn: Any, *, tools: tuple[Any, ...] = (), **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", tools=[*EXTRA, *tools], **kw)


def turns(req: ModelRequest) -> int:
    return sum(1 for m in req.messages if m.role == "assistant")


def results(req: ModelRequest) -> list[str]:
    return [r.content for r in req.messages[-1].tool_results]


def todos(*items: tuple[str, str]) -> ToolCall:
    return ToolCall("todo_write", {"todos": [{"content": c, "status": s} for c, s in items]})


def spawn(prompt: str, agent_type: str = "general-purpose") -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": agent_type, "prompt": prompt, "description": prompt[:20]})


async def test_a_childs_todo_write_keeps_its_parents_list_and_the_parent_reads_the_childs(workdir: Path) -> None:
    seen: dict[str, list[str]] = {}
    nick: dict[str, str] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = req.agent, turns(req)
        if me.depth == 1:
            nick["child"] = me.nickname
            if n == 0:
                return ModelResponse(tool_calls=[todos(("child step", "in_progress"))])
            if n == 1:
                return ModelResponse(tool_calls=[ToolCall("todo_read", {"agent_id": me.parent_id}),
                                                 ToolCall("todo_read", {"agent_id": "nobody-here"})])
            seen["child"] = results(req)
            return ModelResponse(text="child done")
        nick["root"] = me.nickname
        script = [[todos(("plan it", "completed"), ("delegate it", "in_progress"))], [spawn("do the part")],
                  [ToolCall("todo_read", {}), ToolCall("todo_read", {"agent_id": nick.get("child", "")})]]
        if n < len(script):
            return ModelResponse(tool_calls=script[n])
        seen["root"] = results(req)
        return ModelResponse(text="root done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("the whole task")
    assert r.text == "root done"
    own, childs = seen["root"]
    assert own.startswith("Your todo list (2 items: 1 completed, 1 in progress, 0 pending):\n[x] 1. plan it\n"
                          "[~] 2. delegate it")  # the child's todo_write did not overwrite it
    assert own.endswith(f"Sub-agents of yours with a todo list (read one with todo_read(agent_id=...)): "
                        f"{nick['child']} (1 items)")
    assert childs.startswith(f"The todo list of {nick['child']} (general-purpose, id ")
    assert childs.endswith("(1 items: 0 completed, 1 in progress, 0 pending):\n[~] 1. child step")
    up, unknown = seen["child"]
    assert f"agent {nick['root']} (general-purpose, id " in up
    assert up.endswith("is not one of your sub-agents: you may read your own todo list and those of the agents "
                       "you spawned (directly or through them), not a parent's or a sibling's")
    assert unknown == ("no agent 'nobody-here' in your agent tree; give the id or nickname of one of your "
                       "sub-agents (yours: none), or leave agent_id out to read your own list")


async def test_a_finished_child_without_todos_keeps_no_list_and_stays_readable(workdir: Path) -> None:
    """A child that never wrote a todo keeps no (empty) list once it is done; its parent can still read both."""
    seen: list[str] = []
    ids: dict[str, tuple[str, str]] = {}  # task -> (id, nickname)

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = req.agent, turns(req)
        if me.depth == 1:
            task = req.messages[0].text
            ids[task] = (me.id, me.nickname)
            if task == "busy one" and n == 0:
                return ModelResponse(tool_calls=[todos(("look around", "in_progress"))])
            return ModelResponse(text="child done")
        if n == 0:
            return ModelResponse(tool_calls=[spawn("quiet one"), spawn("busy one")])
        if n == 1:
            return ModelResponse(tool_calls=[ToolCall("todo_read", {"agent_id": ids[t][1]})
                                             for t in ("quiet one", "busy one")])
        seen.extend(results(req))
        return ModelResponse(text="root done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("the whole task")
        lists = rt.manager.todos[r.id]._lists
        assert ids["quiet one"][0] not in lists  # the empty list was dropped as the child finished
        assert lists[ids["busy one"][0]] == [{"id": "1", "content": "look around", "status": "in_progress"}]
    assert r.text == "root done"
    quiet, busy = seen
    assert quiet.startswith(f"The todo list of {ids['quiet one'][1]} (general-purpose, id "), quiet
    assert busy.endswith("[~] 1. look around"), busy


async def test_a_grandchilds_list_by_id_and_a_siblings_list_refused(workdir: Path) -> None:
    ids: dict[str, str] = {}
    seen: dict[str, list[str]] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = req.agent, turns(req)
        task = req.messages[0].text
        if me.depth == 2:
            ids["grandchild"] = me.id
            return ModelResponse(tool_calls=[todos(("deep work", "pending"))]) if n == 0 else ModelResponse("gc")
        if me.depth == 1 and task == "first":
            ids["first"] = me.nickname
            return ModelResponse(tool_calls=[spawn("deeper")]) if n == 0 else ModelResponse("first done")
        if me.depth == 1:  # the second child tries to read its sibling's list
            if n == 0:
                return ModelResponse(tool_calls=[ToolCall("todo_read", {"agent_id": ids["first"]})])
            seen["second"] = results(req)
            return ModelResponse("second done")
        script = [[spawn("first")], [ToolCall("todo_read", {"agent_id": ids.get("grandchild", "")})],
                  [spawn("second")]]
        if n < len(script):
            if n == 2:
                seen["root"] = results(req)
            return ModelResponse(tool_calls=script[n])
        return ModelResponse("root done")

    async with runtime(workdir, fn) as rt:
        await rt.run("go")
    assert seen["root"][0].endswith("(1 items: 0 completed, 0 in progress, 1 pending):\n[ ] 1. deep work")
    assert f"id {ids['grandchild']})" in seen["root"][0]
    assert "is not one of your sub-agents" in seen["second"][0]


async def test_notepad_entries_reach_later_children_not_running_ones(workdir: Path) -> None:
    systems: dict[str, str] = {}
    seen: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = req.agent, turns(req)
        if me.depth == 1:
            systems.setdefault(req.messages[0].text, req.system)
            if req.messages[0].text == "first" and n == 0:
                return ModelResponse(tool_calls=[ToolCall("notepad_write", {"text": "the API  is\nv2"})])
            return ModelResponse("ok")
        script = [[ToolCall("notepad_write", {"text": "tests run with make check"}),
                   ToolCall("notepad_write", {"text": "   "}), ToolCall("notepad_write", {"text": "x" * 1001})],
                  [spawn("first")], [spawn("second")]]
        if n == 1:
            seen.extend(results(req))
        if n < len(script):
            return ModelResponse(tool_calls=script[n])
        return ModelResponse("root done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
        root = r.nickname
    assert seen[0] == ("Noted (entry 1 of the notepad). Sub-agents spawned from now on see the latest 10 entries "
                       "in their prompt.")
    assert seen[1] == "the note is empty; write the fact, decision or pitfall to share"
    assert seen[2].startswith("the note is 1,001 characters long, over the limit of 1,000;")
    assert systems["first"].endswith(f"# Shared notepad (latest entries)\n- {root}: tests run with make check")
    first = [n for n in systems["second"].splitlines() if n.startswith("- ") and ": the API is v2" in n]
    assert systems["second"].endswith(f"- {root}: tests run with make check\n{first[0]}")
    assert first[0].endswith(": the API is v2")  # whitespace folded: one line per entry


async def test_the_briefing_is_built_from_the_parents_task_and_todos_at_spawn_time(workdir: Path) -> None:
    systems: dict[str, str] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = req.agent, turns(req)
        if me.depth == 1:
            systems[req.messages[0].text] = req.system
            return ModelResponse("ok")
        script = [[todos(("read the code", "in_progress"), ("fix the bug", "pending"))], [spawn("first")],
                  [todos(("read the code", "completed"), ("fix the bug", "in_progress"))], [spawn("second")]]
        return ModelResponse(tool_calls=script[n]) if n < len(script) else ModelResponse("done")

    async with runtime(workdir, fn) as rt:
        rt.brief("Answer in English.")
        r = await rt.run("Fix issue 7:\nthe parser drops comments")
    head = (f"# Briefing from the parent\nAnswer in English.\n\nYour parent agent, {r.nickname} (general-purpose), "
            "is working on this task:\n> Fix issue 7:\n> the parser drops comments\n\n")
    assert head + ("Its plan (todo list) (2 items: 0 completed, 1 in progress, 1 pending):\n"
                   "[~] 1. read the code\n[ ] 2. fix the bug") in systems["first"]
    assert head + ("Its plan (todo list) (2 items: 1 completed, 1 in progress, 0 pending):\n"
                   "[x] 1. read the code\n[~] 2. fix the bug") in systems["second"]


async def test_context_fields_are_visible_to_tools_and_hooks(workdir: Path) -> None:
    seen: dict[int, dict[str, Any]] = {}
    hooked: list[HookInput] = []

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = req.agent, turns(req)
        if n == 0:
            return ModelResponse(tool_calls=[ToolCall("context_fields", {})])
        if n == 1:
            seen[me.depth] = json.loads(results(req)[0])
            if me.depth == 0:
                return ModelResponse(tool_calls=[spawn("look", "reader")])
        return ModelResponse("done")

    def pre(inp: HookInput) -> None:
        if inp.tool == "context_fields":
            hooked.append(inp)

    reader = AgentDefinition("reader", "reads", "Read.", tools=["read_file", "context_fields"])
    async with runtime(workdir, fn, tools=(context_fields,), permission_mode="plan", agents=[reader],
                       hooks={"PreToolUse": [pre]}) as rt:
        rt.set_model_override("plan", FunctionModel(fn, name="cheap-planner"))
        await rt.run("go")
    base = {"team_name": None, "is_team_lead": False, "sandbox_level": "read-only",
            "model_overrides": {"plan": "cheap-planner"}}
    assert seen[0] == {**base, "depth": 0, "agent_name": "general-purpose"}
    assert seen[1] == {**base, "depth": 1, "agent_name": "reader"}
    assert [i.to_dict()["depth"] for i in hooked] == [0, 1]
    assert {k: hooked[1].to_dict()[k] for k in seen[1]} == seen[1]


async def test_sandbox_level_and_team_fields(workdir: Path) -> None:
    seen: list[dict[str, Any]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        n = turns(req)
        if n == 0:
            return ModelResponse(tool_calls=[ToolCall("context_fields", {}, id="a")])
        if n == 1:
            seen.append(json.loads(results(req)[0]))
            return ModelResponse(tool_calls=[ToolCall("team_create", {"name": "t"})])
        if n == 2:
            return ModelResponse(tool_calls=[ToolCall("context_fields", {}, id="b")])
        if n == 3:
            seen.append(json.loads(results(req)[0]))
        return ModelResponse("done")

    lead = AgentDefinition("lead", "leads a team", "Lead.", tools=["team_create", "context_fields"])
    with pytest.warns(UnconfinedShellWarning):
        rt = runtime(workdir, fn, tools=(context_fields,), sandbox="off", agents=[lead])
    async with rt:
        await rt.run("lead", agent="lead")
    assert seen[0]["sandbox_level"] == "danger-full-access"
    assert (seen[0]["team_name"], seen[0]["is_team_lead"]) == (None, False)
    assert (seen[1]["team_name"], seen[1]["is_team_lead"], seen[1]["agent_name"]) == ("t", True, "lead")


def test_a_childs_briefing_caps_a_todo_list_set_from_python() -> None:
    # todo_write bounds a list; one set from Python (ctx.todos) is not, and every child's prompt carried it whole.
    from types import SimpleNamespace

    from subagents.runtime.shared import spawn_briefing

    todos = [{"id": str(i), "content": f"step {i} " + "x" * 50, "status": "pending"} for i in range(50_000)]
    parent = SimpleNamespace(task_text="t", nickname="Ann", info=SimpleNamespace(agent_type="general-purpose"),
                             core=SimpleNamespace(ctx=SimpleNamespace(todos=todos)))
    text = spawn_briefing("", parent)  # type: ignore[arg-type]
    assert len(text) < 25_000
    assert text.endswith("[... 49,800 more items]")
    assert "[ ] 0. step 0 " in text
