"""MCP tools in agents: a Runtime's agent calls them under the permission rules; which agents get which tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.mcp import McpServerConfig
from subagents.mcp.hub import McpTools
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.sandbox.policy import SandboxPolicy
from subagents.sandbox.workspace import Workspace
from subagents.tools.base import ToolRegistry, tool

from .conftest import SERVER

pytestmark = pytest.mark.timeout(120)


def cfg(name: str = "srv") -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=(str(SERVER),), source="test")


async def test_an_agent_calls_mcp_tools_and_the_rules_deny_one(tmp_path: Path) -> None:
    hub = McpTools({"srv": cfg()}, workspace=Workspace(tmp_path, SandboxPolicy()))
    seen: list[list[str]] = []

    def script(req: ModelRequest) -> ModelResponse:
        seen.append([s.name for s in req.tools if s.name.startswith("mcp__")])
        results = [b for m in req.messages for b in m.tool_results]
        if not results:
            return ModelResponse("", [ToolCall("mcp__srv__add", {"a": 20, "b": 22}),
                                      ToolCall("mcp__srv__danger", {"target": "prod"})])
        return ModelResponse(" | ".join(f"{r.is_error}:{r.content}" for r in results))

    try:
        tools = await hub.tools_of(cfg())
        async with Runtime(model=FunctionModel(script), workdir=tmp_path, store="memory://", tools=tools,
                           permission_mode="yolo", deny=["mcp__srv__danger"]) as rt:
            result = await rt.run("use the server")
        assert "mcp__srv__add" in seen[0]
        assert "mcp__srv__danger" in seen[0]
        ok, denied = result.text.split(" | ")
        assert ok == "False:42"
        assert denied.startswith("True:")
        assert "mcp__srv__danger" in denied
        assert "denied" in denied
    finally:
        await hub.aclose()


async def test_the_rules_match_mcp_tools_by_glob() -> None:
    from subagents.authority.rules import parse_rule

    r = parse_rule("mcp__github__*")
    assert r.matches_tool("mcp__github__create_issue")
    assert not r.matches_tool("mcp__gitlab__create_issue")


@tool(category="read")
def local(x: str) -> str:
    """A local tool."""
    return x


async def test_grant_picks_the_servers_an_agent_may_use(tmp_path: Path) -> None:
    a, b = cfg("a"), cfg("b")
    hub = McpTools({"a": a, "b": b}, workspace=Workspace(tmp_path, SandboxPolicy()))
    base = ToolRegistry([local])
    try:
        root = await hub.grant(base)  # no allowlist: every configured server
        assert {n for n in root.names if n.startswith("mcp__")} == {
            f"mcp__{s}__{t}" for s in "ab" for t in ("add", "crash", "danger", "echo_env", "slow", "starts",
                                                      "try_write")}
        only = await hub.grant(base, tools=["local", "mcp__a__add", "mcp__b"], disallowed=["mcp__b__crash"])
        assert sorted(n for n in only.names if n.startswith("mcp__a")) == ["mcp__a__add"]
        assert "mcp__b__slow" in only
        assert "mcp__b__crash" not in only
        none = await hub.grant(base, tools=["local"])
        assert none is base
        # a child: never a configured server's tool its parent lacks
        parent = await hub.grant(base, tools=["mcp__a__add", "mcp__a__slow"])
        child = await hub.grant(base, parent=parent)
        assert sorted(n for n in child.names if n.startswith("mcp__")) == ["mcp__a__add", "mcp__a__slow"]
        # ... but its definition's own mcp_servers (a name, or inline) are its own grant
        own = await hub.grant(base, tools=None, parent=parent, extra={"mcpServers": ["b"]}, source="x.md")
        assert "mcp__b__add" in own
        inline = await hub.grant(base, tools=["mcp__c__add"], parent=parent, source="y.md", extra={
            "mcp_servers": [{"c": {"command": sys.executable, "args": [str(SERVER)]}}]})
        assert sorted(n for n in inline.names if n.startswith("mcp__")) == ["mcp__c__add"]
        from subagents.exceptions import ConfigError

        with pytest.raises(ConfigError, match=r"^z\.md: mcp_servers names the MCP server 'nope', which is not "):
            await hub.grant(base, extra={"mcp_servers": "nope"}, source="z.md")
    finally:
        await hub.aclose()


async def test_a_server_starts_only_when_an_agent_may_use_it(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    lazy = McpServerConfig(name="lazy", command=sys.executable, args=(str(SERVER),), source="t",
                           env={"START_FILE": str(starts)}, sandbox=False)
    hub = McpTools({"lazy": lazy}, workspace=Workspace(tmp_path, SandboxPolicy()))
    try:
        await hub.grant(ToolRegistry([local]), tools=["local"])
        assert not starts.exists()
        await hub.grant(ToolRegistry([local]))
        await hub.grant(ToolRegistry([local]))  # shared: started once
        assert len(starts.read_text().splitlines()) == 1
    finally:
        await hub.aclose()
