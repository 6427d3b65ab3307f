"""Agent files written for Claude Code load as their authors meant: lenient front matter, unknown tool names."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.cli.main import main
from subagents.definitions import load_definitions
from subagents.exceptions import SpawnError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"


@pytest.fixture
def project(workdir: Path) -> Path:
    """A project whose .claude/agents/ holds the look-alike files."""
    agents = workdir / ".claude" / "agents"
    agents.mkdir(parents=True)
    for f in FIXTURES.glob("*.md"):
        shutil.copy(f, agents)
    return workdir


def test_unquoted_colons_load_with_one_warning_naming_file_and_line(project: Path) -> None:
    defs = load_definitions(project, user_dir=project / "none", home=project / "none", extensions=False)
    agents = project / ".claude" / "agents"
    auditor = defs.get("privacy-auditor")
    assert auditor.description == ("Reviews data handling for privacy compliance. Use when: 'GDPR', 'CCPA' or "
                                   "'consent banner' come up, or before a release that touches personal data.")
    # the rest of the file keeps its meaning: tools mapped, model alias, extra keys, body
    assert auditor.tools == ["read_file", "grep", "glob", "web_fetch", "web_search"]
    assert auditor.model == "anthropic:claude-sonnet-4-5"
    assert auditor.extra == {"color": "purple"}
    assert auditor.system_prompt.startswith("You are a privacy auditor.")
    notes = defs.get("release-notes-writer")
    assert notes.description.startswith("Use this agent to draft release notes. Examples: <example>Context: a tag")
    assert notes.tools == ["read_file", "grep", "bash", "mcp__github__list_pull_requests"]  # a '- item' list
    assert defs.get("trend-scout").description == (
        "Finds what is new in a field. Triggers on: \"what's trending\", \"latest releases\"")
    assert defs.get("sprint-lead").tools == ["read_file", "glob", "task_create", "task_list", "task_update",
                                             "send_message"]
    # one warning per leniently read file, naming the file and the line; valid files warn nothing
    assert sorted(defs.warnings) == [
        f"{agents / name}: front matter line 3 is not valid YAML (an unquoted ': ' inside a value?) and was "
        "read as plain 'key: value' text; quote the value to silence this warning"
        for name in ("privacy-auditor.md", "release-notes-writer.md", "trend-scout.md")]


def test_lenient_reading_keeps_yaml_values_and_still_refuses_what_is_broken(workdir: Path) -> None:
    agents = workdir / ".subagents" / "agents"
    agents.mkdir(parents=True)
    (agents / "mixed.md").write_text(
        "---\nname: mixed\ndescription: Note: two colons: here\nmax_turns: 4\nbackground: true\n"
        "nickname_candidates: [ann, bea]\n# a comment\ntools:\n  - Read\n  - Grep\n---\nBody.\n")
    (agents / "broken.md").write_text("---\nname: broken\ndescription: ok: fine\ntools: [Read, Grep\n---\nB.\n")
    (agents / "noise.md").write_text("---\nname: noise\njust some words: here: too\n  - stray\nnot a key line\n---\n")
    defs = load_definitions(workdir, user_dir=workdir / "none", home=workdir / "none", extensions=False)
    d = defs.get("mixed")
    assert (d.description, d.max_turns, d.background, d.nickname_candidates, d.tools) == (
        "Note: two colons: here", 4, True, ["ann", "bea"], ["read_file", "grep"])
    assert "broken" not in defs
    assert "noise" not in defs
    skipped = [w for w in defs.warnings if w.startswith("skipped")]
    assert skipped[0].startswith(f"skipped agent definition {agents / 'broken.md'}: invalid YAML front matter: "
                              "line 4: mapping values are not allowed ")  # "here" (PyYAML), "in this context" (libyaml)
    assert skipped[1].startswith(f"skipped agent definition {agents / 'noise.md'}: invalid YAML front matter: "
                                 "line 3 is not a 'key: value' line ('just some words: here: too'); strict YAML said: "
                                 "mapping values are not allowed ")
    assert [w for w in defs.warnings if "mixed.md: front matter line 3 is not valid YAML" in w]


def test_agents_list_and_show_warn_once_per_definition_about_tools_it_cannot_have(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "list", "--cwd", str(project)]) == 0
    err = capsys.readouterr().err
    auditor = [ln for ln in err.splitlines() if "'privacy-auditor'" in ln]
    assert len(auditor) == 1
    assert "web_search: no provider-native web search here" in auditor[0]
    assert "(they are left out)" in auditor[0]
    scout = next(ln for ln in err.splitlines() if "'trend-scout'" in ln)
    assert "mcp__notion__search: no MCP server 'notion' is configured" in scout
    assert "no usable tool left, so spawning it fails" in scout
    assert "'sprint-lead'" not in err  # Claude Code's team tools map to ours
    assert "'code-reviewer'" not in err

    assert main(["agents", "show", "trend-scout", "--cwd", str(project)]) == 0
    out, err = capsys.readouterr()
    assert "tools: ['web_search', 'mcp__notion__search']" in out
    assert [ln for ln in err.splitlines() if "lists tools it cannot have" in ln] == [
        f"warning: agent type 'trend-scout' (project:{project / '.claude/agents/trend-scout.md'}) lists tools it "
        "cannot have: web_search: no provider-native web search here; mcp__notion__search: no MCP server 'notion' "
        "is configured — it has no usable tool left, so spawning it fails; fix its 'tools:' line"]


async def test_a_definition_with_no_usable_tool_is_refused_at_spawn(project: Path) -> None:
    (project / ".claude/agents/searcher.md").write_text(
        "---\nname: searcher\ndescription: Searches: the web\ntools: WebSearch, NotebookEdit\n---\nSearch.\n")
    async with Runtime(FunctionModel(lambda req: ModelResponse("hi")), workdir=project, store="memory://") as rt:
        with pytest.raises(SpawnError) as e:
            await rt.run("what is new?", agent="searcher")
        assert (await rt.run("review", agent="code-reviewer")).text == "hi"  # the others still run
    msg = str(e.value)
    assert "agent type 'searcher'" in msg
    assert "has no usable tool: its definition lists web_search, NotebookEdit, and none of them exists" in msg
    assert "read_file" in msg  # which tools exist
    assert "Fix its 'tools:' line" in msg


async def test_unknown_tools_warn_once_at_start_and_the_known_ones_work(
        workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    agents = workdir / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "scout.md").write_text("---\nname: scout\ndescription: x\ntools: Read, WebSearch, NotebookEdit\n"
                                     "---\nScout.\n")
    seen: list[list[str]] = []
    results: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 and len(req.messages) == 1:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "scout", "prompt": "look"})])
        if req.agent.depth == 0:
            results.append(repr(req.messages[-1]))
        if req.agent.depth == 1:
            seen.append([t.name for t in req.tools])
        return ModelResponse("done")

    with caplog.at_level(logging.WARNING, logger="subagents.runtime"):
        async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://") as rt:
            await rt.run("go")
            await rt.run("go")
    warnings = [r.getMessage() for r in caplog.records if "'scout'" in r.getMessage()]
    assert warnings == [f"agent type 'scout' (project:{agents / 'scout.md'}) lists tools it cannot have: web_search: "
                        "no provider-native web search here; NotebookEdit: notebooks are not supported here "
                        "(they are left out)"]
    assert seen == [["read_file"], ["read_file"]]
    assert len(results) == 2  # the spawn results tell the parent what was left out
    assert all("tools its definition lists that do not exist here were left out: web_search, NotebookEdit" in r
               for r in results)
