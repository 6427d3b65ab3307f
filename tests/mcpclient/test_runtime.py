"""MCP servers end to end in a Runtime: configured in a project, used by its agents, stopped with the runtime.

Each test builds a project directory the way a user would (``.subagents/config.toml`` ``[mcp.servers.NAME]``,
``.mcp.json``, ``.subagents/agents/*.md`` with ``mcp_servers:``) and drives ``Runtime(model=FunctionModel(...),
workdir=project)``; the servers are the real test server (tests/mcpclient/server.py) over stdio, sandboxed as
configured by default.  Every server's command line carries a marker, so a test can find its processes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.cli.main import main
from subagents.config import user_config_dir
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.trust import add_trusted

from .conftest import SERVER

pytestmark = pytest.mark.timeout(120)


def processes_with(marker: str) -> list[int]:
    """The pids of live processes whose command line holds ``marker`` (zombies have none, so they don't count)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:  # gone meanwhile
                continue
    return out


def make_project(tmp_path: Path, *, config: str = "", mcp_json: bool = True) -> tuple[Path, dict[str, str]]:
    """A project with the server ``calc`` in .subagents/config.toml and ``notes`` in .mcp.json (both the test
    server, each with its own marker argument); returns the project and ``{server: marker}``."""
    project = tmp_path / "project"
    (project / ".subagents").mkdir(parents=True)
    markers = {name: f"{name}-{uuid.uuid4().hex}" for name in ("calc", "notes")}
    (project / ".subagents" / "config.toml").write_text(
        f"[mcp.servers.calc]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}, {json.dumps(markers['calc'])}]\n{config}")
    if mcp_json:
        (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"notes": {
            "command": sys.executable, "args": [str(SERVER), markers["notes"]]}}}))
    return project, markers


def results(req: ModelRequest) -> list[tuple[bool, str]]:
    return [(r.is_error, r.content) for m in req.messages for r in m.tool_results]


async def test_servers_from_config_and_mcp_json_serve_an_agent_and_stop_with_the_runtime(tmp_path: Path) -> None:
    project, markers = make_project(tmp_path, config='[permissions]\nallow = ["mcp__calc__*", "mcp__notes__add"]\n')
    seen: list[list[str]] = []
    alive: list[list[int]] = []

    def script(req: ModelRequest) -> ModelResponse:
        if not results(req):
            seen.append(sorted(t.name for t in req.tools if t.name.startswith("mcp__")))
            alive.append([p for m in markers.values() for p in processes_with(m)])
            return ModelResponse("", [ToolCall("mcp__calc__add", {"a": 20, "b": 22}),
                                      ToolCall("mcp__notes__add", {"a": 1, "b": 2})])
        return ModelResponse(" ".join(f"{err}:{text}" for err, text in results(req)))

    async with Runtime(model=FunctionModel(script), workdir=project, store="memory://", trust_project=True) as rt:
        result = await rt.run("add with both servers")
        assert result.text == "False:42 False:3"
        assert {"mcp__calc__add", "mcp__calc__danger", "mcp__notes__add", "mcp__notes__echo_env"} <= set(seen[0])
        assert alive[0]  # the servers run while the agent does
        assert all(processes_with(m) for m in markers.values())  # ... and stay up for the next agent
    assert [p for m in markers.values() for p in processes_with(m)] == []  # rt.aclose stopped them


async def test_no_server_starts_for_a_runtime_whose_agents_do_not_run(tmp_path: Path) -> None:
    project, markers = make_project(tmp_path)
    async with Runtime(model=FunctionModel(lambda req: "unused"), workdir=project, store="memory://",
                       trust_project=True) as rt:
        assert rt.mcp is not None
        assert [p for m in markers.values() for p in processes_with(m)] == []


async def test_a_deny_rule_in_the_config_file_refuses_an_mcp_tool(tmp_path: Path) -> None:
    project, _ = make_project(tmp_path, mcp_json=False, config=(
        '[permissions]\nallow = ["mcp__calc__*"]\ndeny = ["mcp__calc__danger"]\n'))

    def script(req: ModelRequest) -> ModelResponse:
        if not results(req):
            return ModelResponse("", [ToolCall("mcp__calc__danger", {"target": "prod"}),
                                      ToolCall("mcp__calc__add", {"a": 2, "b": 3})])
        return ModelResponse(json.dumps(results(req)))

    async with Runtime(model=FunctionModel(script), workdir=project, store="memory://", trust_project=True) as rt:
        result = await rt.run("try everything")
    (denied_err, denied), (add_err, added) = json.loads(result.text)
    assert (add_err, added) == (False, "5")
    assert denied_err
    assert "mcp__calc__danger" in denied
    assert "denied" in denied
    assert "config.toml" in denied  # the refusal names where the rule came from
    assert "destroyed" not in denied  # the server was never asked


async def test_without_an_allow_rule_an_mcp_tool_asks_and_nobody_can_answer(tmp_path: Path) -> None:
    project, _ = make_project(tmp_path, mcp_json=False)

    def script(req: ModelRequest) -> ModelResponse:
        if not results(req):
            return ModelResponse("", [ToolCall("mcp__calc__add", {"a": 2, "b": 3})])
        return ModelResponse(json.dumps(results(req)))

    async with Runtime(model=FunctionModel(script), workdir=project, store="memory://", trust_project=True) as rt:
        result = await rt.run("add")
    [(err, text)] = json.loads(result.text)
    assert err
    assert text.startswith("mcp__calc__add was not run: permission mode 'default' asks")
    assert "an allow rule such as 'mcp__calc__add'" in text  # ... and says how to allow it


DEFINITION = """---
name: adder
description: Adds numbers with its own MCP server
tools: mcp__mine__add
mcp_servers: [{{mine: {{command: {python}, args: [{server}]}}}}]
---
You add numbers with the add tool.
"""


async def test_a_definitions_own_mcp_servers_reach_its_agents_only(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".subagents" / "agents").mkdir(parents=True)
    (project / ".subagents" / "agents" / "adder.md").write_text(
        DEFINITION.format(python=json.dumps(sys.executable), server=json.dumps(str(SERVER))))
    seen: dict[str, list[str]] = {}

    def script(req: ModelRequest) -> ModelResponse:
        kind = req.agent.agent_type
        seen.setdefault(kind, sorted(t.name for t in req.tools if t.name.startswith("mcp__")))
        done = results(req)
        if kind == "adder":
            if not done:
                return ModelResponse("", [ToolCall("mcp__mine__add", {"a": 40, "b": 2})])
            return ModelResponse(f"the sum is {done[0][1]}")
        if not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "adder", "prompt": "add 40 and 2",
                                                               "description": "sum"})])
        return ModelResponse(f"child said: {done[0][1]}")

    async with Runtime(model=FunctionModel(script), workdir=project, store="memory://",
                       allow=["mcp__mine__*"], trust_project=True) as rt:
        result = await rt.run("delegate the sum")
    assert seen["general-purpose"] == []  # no configured server: the root has no MCP tools
    assert seen["adder"] == ["mcp__mine__add"]  # its own server, fenced by its tools: line
    assert "the sum is 42" in result.text


def test_run_sync_twice_restarts_the_servers_it_stopped(tmp_path: Path) -> None:
    project, markers = make_project(tmp_path, mcp_json=False, config='[permissions]\nallow = ["mcp__calc__add"]\n')

    def script(req: ModelRequest) -> ModelResponse:
        if not results(req):
            return ModelResponse("", [ToolCall("mcp__calc__add", {"a": 1, "b": len(req.last_user_text)})])
        return ModelResponse(results(req)[0][1])

    rt = Runtime(model=FunctionModel(script), workdir=project, store="memory://", trust_project=True)
    try:
        assert rt.run_sync("ab").text == "3"
        assert processes_with(markers["calc"]) == []  # its event loop ended, and the server with it
        assert rt.run_sync("abcd").text == "5"
    finally:
        asyncio.run(rt.aclose())
    assert processes_with(markers["calc"]) == []


def test_config_show_lists_the_configured_servers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project, _ = make_project(tmp_path, config='[mcp.servers.calc.env]\nGITHUB_TOKEN = "ghp_secret123456"\n')
    add_trusted(project, user_config_dir())
    assert main(["config", "show", "--cwd", str(project)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("mcp.servers.calc"))
    assert str(project / ".subagents" / "config.toml") in line
    assert "ghp_secret123456" not in out  # a server's env values are masked like API keys
    assert main(["config", "show", "--json", "--cwd", str(project)]) == 0
    assert any(k.startswith("mcp.servers.calc") for k in json.loads(capsys.readouterr().out)["settings"])
