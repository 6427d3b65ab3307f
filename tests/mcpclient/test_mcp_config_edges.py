"""Careless configurations and odd tool lists: names the model APIs accept, a bad schema costs one tool (not the
agent), ``${VAR}`` in ``.mcp.json`` as Claude Code expands it, clashing server names refused when the runtime starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.exceptions import ConfigError
from subagents.mcp import McpServerConfig, load_mcp_json, parse_server
from subagents.mcp.client import McpStartError
from subagents.mcp.config import same_server
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

from .conftest import SERVER
from .test_mcp_edges import HOSTILE, TOOL, call, hostile, hub_for

pytestmark = pytest.mark.timeout(60)


def text_result(text: str) -> dict[str, object]:
    return {"result": {"content": [{"type": "text", "text": text}]}}


async def test_tool_names_are_unique_and_within_64_characters(tmp_path: Path) -> None:
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("a.b", "a_b", "x" * 80, "")]
    cfg = hostile(tmp_path, spec={"tools": tools, "calls": {"a.b": text_result("dot"), "a_b": text_result("line"),
                                                            "x" * 80: text_result("long")}})
    hub = hub_for(tmp_path, cfg)
    try:
        named = {t.name: t for t in await hub.tools_of(cfg)}
        assert len(named) == 3  # the tool without a name is left out
        assert all(len(n) <= 64 and n.startswith("mcp__h__") for n in named)
        assert "mcp__h__a_b" in named  # the tool whose own name needs no change keeps it
        dot = next(n for n in named if n.startswith("mcp__h__a_b_"))
        assert named[dot].description == "a.b (from the MCP server 'h', where it is named 'a.b')"
        long = next(n for n in named if n.startswith("mcp__h__xxx"))
        assert [await call(hub, cfg, n, tmp_path) for n in ("mcp__h__a_b", dot, long)] == [
            ("line", False), ("dot", False), ("long", False)]
        assert sorted(named) == sorted(t.name for t in await hub.tools_of(cfg))  # the same names every time
    finally:
        await hub.aclose()


def results(req: ModelRequest) -> list[tuple[bool, str]]:
    return [(r.is_error, r.content) for m in req.messages for r in m.tool_results]


async def test_a_tool_with_an_invalid_schema_is_left_out_and_the_agent_runs(tmp_path: Path) -> None:
    bad = {"name": "bad", "inputSchema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"tools": [bad, TOOL]}))
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"h": {
        "command": sys.executable, "args": [str(HOSTILE), str(spec)], "sandbox": False}}}))
    seen: list[list[str]] = []

    def script(req: ModelRequest) -> ModelResponse:
        seen.append(sorted(t.name for t in req.tools if t.name.startswith("mcp__")))
        return ModelResponse("done")

    async with Runtime(model=FunctionModel(script), workdir=project, store="memory://", trust_project=True) as rt:
        result = await rt.run("hello")
    assert (result.text, result.error) == ("done", None)
    assert seen == [["mcp__h__t"]]


async def test_mcp_json_expands_environment_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGE_TEST_TOKEN", "s3cret")
    monkeypatch.delenv("EDGE_TEST_UNSET", raising=False)
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "ok": {"command": sys.executable, "args": [str(SERVER)], "sandbox": False,
               "env": {"TOKEN": "${EDGE_TEST_TOKEN}", "MODE": "${EDGE_TEST_UNSET:-fast}"}},
        "missing": {"command": sys.executable, "args": [str(SERVER)], "sandbox": False,
                    "env": {"TOKEN": "${EDGE_TEST_UNSET}"}}}}))
    servers = load_mcp_json(tmp_path / ".mcp.json")
    assert dict(servers["ok"].env) == {"TOKEN": "s3cret", "MODE": "fast"}
    assert servers["missing"].unset == ("EDGE_TEST_UNSET",)
    hub = hub_for(tmp_path, *servers.values())
    try:
        assert await call(hub, servers["ok"], "mcp__ok__echo_env", tmp_path, {"name": "TOKEN"}) == ("s3cret", False)
        with pytest.raises(McpStartError, match=r"names the environment variable EDGE_TEST_UNSET \(as \$\{\.\.\.\}\), "
                                                r"which is not set; set it, or give a default"):
            await hub.tools_of(servers["missing"])
    finally:
        await hub.aclose()


def test_a_server_name_too_long_for_its_tool_names_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^x\.json: MCP server 'n{41}': the name is 41 characters long; use at "
                                          r"most 40 \(its tools are named mcp__<server>__<tool>"):
        parse_server("n" * 41, {"command": "srv"}, source="x.json")


AGENT = """---
name: own
description: Has its own server
mcp_servers: [{{calc: {{command: {python}, args: [{server}{extra}], sandbox: false}}}}]
---
You add.
"""


def project_with(tmp_path: Path, extra: str) -> Path:
    project = tmp_path / "project"
    (project / ".subagents" / "agents").mkdir(parents=True)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"calc": {
        "command": sys.executable, "args": [str(SERVER)], "sandbox": False}}}))
    (project / ".subagents" / "agents" / "own.md").write_text(AGENT.format(
        python=json.dumps(sys.executable), server=json.dumps(str(SERVER)), extra=extra))
    return project


def test_a_definition_configuring_a_configured_server_differently_is_refused_at_start(tmp_path: Path) -> None:
    project = project_with(tmp_path, ", --other")
    clash = r"two different MCP servers are named 'calc' \(.*\.mcp\.json and .*own\.md\)"
    with pytest.raises(ConfigError, match=clash):
        Runtime(model=FunctionModel(lambda req: "x"), workdir=project, store="memory://", trust_project=True)


async def test_a_definition_repeating_a_configured_server_shares_it(tmp_path: Path) -> None:
    project = project_with(tmp_path, "")
    seen: dict[str, list[str]] = {}

    def script(req: ModelRequest) -> ModelResponse:
        seen[req.agent.agent_type] = sorted(t.name for t in req.tools if t.name == "mcp__calc__add")
        if req.agent.depth == 0 and not results(req):
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "own", "prompt": "add",
                                                               "description": "add"})])
        return ModelResponse("done")

    async with Runtime(model=FunctionModel(script), workdir=project, store="memory://", trust_project=True) as rt:
        result = await rt.run("delegate")
    assert result.error is None
    assert seen == {"general-purpose": ["mcp__calc__add"], "own": ["mcp__calc__add"]}


def test_the_same_server_from_two_files_is_the_same_server() -> None:
    a = McpServerConfig(name="s", command="srv", source="a.json")
    assert parse_server("s", {"command": "srv"}, source="b.md") != a  # (the dataclass compares the source too)
    assert same_server(parse_server("s", {"command": "srv"}, source="b.md"), a)
