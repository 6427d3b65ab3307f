"""Agent definitions: parsing, the five-level precedence, .claude/.qwen files, broken files."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from subagents import AgentDefinition, Runtime
from subagents.definitions import load_definitions, parse_definition_file
from subagents.definitions import loader as loader_mod
from subagents.exceptions import DefinitionError
from subagents.models import FunctionModel, ModelRequest, ModelResponse


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def agent_md(name: str, body: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: {body} agent\n{extra}---\n{body}\n"


@pytest.fixture
def levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    project = tmp_path / "proj"
    user = tmp_path / "userconf"
    home = tmp_path / "home"
    for p in (project, user, home):
        p.mkdir()
    ext_mod = tmp_path / "extmod"
    write(ext_mod / "myext_agents.py",
          "from subagents import AgentDefinition\n"
          "AGENTS = [AgentDefinition('shared', 'ext', 'from extension'), AgentDefinition('explore', 'ext', 'x')]\n")
    monkeypatch.syspath_prepend(str(ext_mod))
    ep = metadata.EntryPoint("myext", "myext_agents:AGENTS", "subagents.agents")
    monkeypatch.setattr(loader_mod, "_entry_points", lambda group: [ep] if group == "subagents.agents" else [])
    yield project, user, home
    sys.modules.pop("myext_agents", None)


def test_precedence_across_all_five_levels(levels: tuple[Path, Path, Path]) -> None:
    project, user, home = levels
    session = [AgentDefinition("shared", "s", "from session")]
    write(project / ".subagents/agents/shared.md", agent_md("shared", "from project"))
    write(project / ".subagents/agents/projonly.md", agent_md("projonly", "from project"))
    write(user / "agents/shared.md", agent_md("shared", "from user"))
    write(user / "agents/useronly.md", agent_md("useronly", "from user"))
    write(user / "agents/projonly.md", agent_md("projonly", "from user"))
    defs = load_definitions(project, session=session, user_dir=user, home=home)
    assert defs.get("shared").system_prompt == "from session"
    assert [d.system_prompt for d in defs.shadowed["shared"]] == ["from project", "from user", "from extension"]
    assert defs.get("projonly").system_prompt == "from project"
    assert defs.get("useronly").system_prompt == "from user"
    assert defs.get("explore").source == "extension:myext"  # extension shadows the built-in
    assert defs.shadowed["explore"][0].source == "builtin"
    assert defs.get("plan").source == "builtin"
    assert defs.warnings == []


def test_claude_and_qwen_files_rank_just_below_our_folder(levels: tuple[Path, Path, Path]) -> None:
    project, user, home = levels
    write(project / ".claude/agents/reviewer.md",
          "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep, Glob, Bash\n"
          "disallowedTools: Write\nmaxTurns: 7\npermissionMode: plan\nmodel: haiku\ncolor: blue\n---\n"
          "You review code.\n")
    write(project / ".qwen/agents/reviewer.md", agent_md("reviewer", "qwen version"))
    write(project / ".qwen/agents/qonly.md", agent_md("qonly", "qwen only", "maxTurns: 3\n"))
    write(home / ".claude/agents/reviewer.md", agent_md("reviewer", "home claude"))
    defs = load_definitions(project, user_dir=user, home=home)
    r = defs.get("reviewer")
    assert r.source.startswith("project:")
    assert r.source.endswith(".claude/agents/reviewer.md")
    assert (r.tools, r.disallowed_tools, r.max_turns, r.permission_mode, r.model) == (
        ["read_file", "grep", "glob", "bash"], ["write_file"], 7, "plan", "anthropic:claude-haiku-4-5")
    assert r.extra == {"color": "blue"}
    assert [d.system_prompt for d in defs.shadowed["reviewer"]] == ["qwen version", "home claude"]
    assert defs.get("qonly").max_turns == 3

    write(project / ".subagents/agents/reviewer.md", agent_md("reviewer", "ours"))
    assert load_definitions(project, user_dir=user, home=home).get("reviewer").system_prompt == "ours"


def test_a_broken_file_warns_and_the_others_load(levels: tuple[Path, Path, Path]) -> None:
    project, user, home = levels
    d = project / ".subagents/agents"
    write(d / "good.md", agent_md("good", "fine", "tools: [read_file]\n"))
    bad_yaml = write(d / "bad.md", "---\nname: [unclosed\n---\nbody\n")
    no_front = write(d / "plain.md", "just text\n")
    bad_turns = write(d / "turns.md", agent_md("turns", "x", "max_turns: many\n"))
    defs = load_definitions(project, user_dir=user, home=home)
    assert defs.get("good").tools == ["read_file"]
    assert len(defs.warnings) == 3
    assert defs.warnings[0].startswith(f"skipped agent definition {bad_yaml}: invalid YAML front matter:")
    assert defs.warnings[1] == (f"skipped agent definition {no_front}: no YAML front matter; start the file with "
                                "'---', the keys, and '---'")
    assert defs.warnings[2] == (f"skipped agent definition project:{bad_turns}: 'max_turns' must be a positive "
                                "whole number, got 'many'")


def test_parse_all_keys(tmp_path: Path) -> None:
    p = write(tmp_path / "full.md", (
        "---\nname: full\ndescription: Everything\ntools: [read_file, bash]\ndisallowed_tools: bash\n"
        "model: openai:gpt-4.1\nmax_turns: 5\nmax_tokens: 1000\ntimeout_s: 30\nmax_cost_usd: 0.5\n"
        "background: true\nnickname_candidates: [ann, bea]\npermission_mode: autoEdit\nisolation: worktree\n"
        "---\nBody text.\n"))
    d = parse_definition_file(p)
    assert (d.name, d.tools, d.disallowed_tools, d.model, d.max_turns, d.max_tokens, d.timeout_s, d.max_cost_usd,
            d.background, d.nickname_candidates, d.permission_mode, d.isolation, d.system_prompt) == (
        "full", ["read_file", "bash"], ["bash"], "openai:gpt-4.1", 5, 1000, 30.0, 0.5, True, ["ann", "bea"],
        "autoEdit", "worktree", "Body text.")


def test_invalid_name_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path / "x.md", "---\nname: 'bad name!'\n---\nbody\n")
    with pytest.raises(DefinitionError, match="agent name 'bad name!' is missing or invalid"):
        parse_definition_file(p)


def test_builtins_have_the_promised_fences(tmp_path: Path) -> None:
    defs = load_definitions(tmp_path, user_dir=tmp_path / "u", home=tmp_path / "h", extensions=False)
    assert defs.names() == ["coordinator", "explore", "general-purpose", "plan", "verify"]
    assert defs.get("general-purpose").tools is None
    assert defs.get("explore").tools == ["read_file", "list_dir", "glob", "grep", "repo_map"]
    plan = defs.get("plan")
    assert not {"write_file", "edit_file", "bash"} & set(plan.tools or [])
    assert "skill" in plan.disallowed_tools
    assert defs.get("verify").tools == ["read_file", "list_dir", "glob", "grep", "bash"]
    assert set(defs.get("coordinator").tools or []) == {"spawn_agent", "send_input", "wait", "close_agent",
                                                        "resume_agent", "list_agents", "team_create"}


async def test_project_definition_used_by_the_runtime(tmp_path: Path) -> None:
    write(tmp_path / ".subagents/agents/counter.md",
          agent_md("counter", "You count things.", "tools: list_dir\nmax_turns: 2\nnickname_candidates: [tally]\n"))
    seen: list[tuple[str, list[str], str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append((req.agent.nickname, req.tool_names, req.system))
        return ModelResponse(text="3")

    async with Runtime(model=FunctionModel(fn), workdir=tmp_path, store="memory://") as rt:
        r = await rt.run("count", agent="counter")
    assert r.text == "3"
    nick, tools, system = seen[0]
    assert (nick, tools) == ("tally", ["list_dir"])
    assert "You count things." in system
