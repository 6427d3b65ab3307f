"""A real MCP server (the official SDK's MCPServer) over stdio and HTTP: tools, calls, crashes, timeouts, sandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from subagents.mcp import McpServerConfig
from subagents.mcp.hub import McpTools
from subagents.sandbox.policy import SandboxPolicy
from subagents.sandbox.workspace import Workspace
from subagents.tools.base import ToolContext, ToolRegistry

from .conftest import SERVER

pytestmark = pytest.mark.timeout(120)


def stdio(name: str = "t", **kw: Any) -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=(str(SERVER),), source="test", **kw)


def hub_for(tmp_path: Path, *servers: McpServerConfig, mode: str = "auto") -> McpTools:
    ws = Workspace(tmp_path, SandboxPolicy(mode=mode))
    return McpTools({s.name: s for s in servers}, workspace=ws)


def ctx(tmp_path: Path) -> ToolContext:
    from subagents.models.base import AgentInfo

    return ToolContext(agent=AgentInfo("a1", "a", "general-purpose", 0, None), workspace=Workspace(tmp_path))


async def call(hub: McpTools, cfg: McpServerConfig, tool: str, args: dict[str, Any], tmp_path: Path
               ) -> tuple[str, bool]:
    tools = {t.name: t for t in await hub.tools_of(cfg)}
    reg = ToolRegistry(tools.values())
    from subagents.messages import ToolUseBlock

    res = await reg.execute(ToolUseBlock("c1", f"mcp__{cfg.name}__{tool}", args), ctx(tmp_path))
    return res.content, res.is_error


async def test_stdio_server_lists_its_tools_with_their_schemas_and_answers(tmp_path: Path) -> None:
    cfg = stdio()
    hub = hub_for(tmp_path, cfg)
    try:
        tools = {t.name: t for t in await hub.tools_of(cfg)}
        assert sorted(tools) == ["mcp__t__add", "mcp__t__crash", "mcp__t__danger", "mcp__t__echo_env",
                                 "mcp__t__slow", "mcp__t__starts", "mcp__t__try_write"]
        add = tools["mcp__t__add"]
        assert add.parameters["required"] == ["a", "b"]
        assert add.parameters["properties"]["a"]["type"] == "integer"
        assert add.description == "Add two numbers. (from the MCP server 't')"
        assert await call(hub, cfg, "add", {"a": 2, "b": 40}, tmp_path) == ("42", False)
        # the schema is enforced before the server is asked
        text, err = await call(hub, cfg, "add", {"a": "x", "b": 1}, tmp_path)
        assert err
        assert "invalid arguments for tool 'mcp__t__add'" in text
    finally:
        await hub.aclose()


async def test_http_server_on_loopback(tmp_path: Path, http_url: str) -> None:
    cfg = McpServerConfig(name="web", url=http_url, source="test")
    hub = hub_for(tmp_path, cfg)
    try:
        assert await call(hub, cfg, "add", {"a": 1, "b": 2}, tmp_path) == ("3", False)
        assert "mcp__web__slow" in {t.name for t in await hub.tools_of(cfg)}
    finally:
        await hub.aclose()


async def test_a_crashing_server_is_restarted_once_then_every_call_is_a_tool_error(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    cfg = stdio(env={"START_FILE": str(starts)}, sandbox=False)
    hub = hub_for(tmp_path, cfg)
    try:
        text, err = await call(hub, cfg, "crash", {}, tmp_path)
        assert err
        assert text.startswith("the MCP server 't' stopped during the call of mcp__t__crash (the connection closed")
        assert text.endswith("it was restarted: call the tool again if the call was safe to repeat")
        assert await call(hub, cfg, "starts", {}, tmp_path) == ("2", False)  # the restarted process answers
        text, err = await call(hub, cfg, "crash", {}, tmp_path)
        assert err
        assert "after it had already been restarted once; its tools are unavailable" in text
        text, err = await call(hub, cfg, "add", {"a": 1, "b": 1}, tmp_path)
        assert err
        assert text.startswith("mcp__t__add cannot run: the MCP server 't' stopped during the call of "
                                       "mcp__t__crash")
        assert len(starts.read_text().splitlines()) == 2  # no third start
    finally:
        await hub.aclose()


async def test_a_slow_call_hits_the_tool_timeout_and_the_server_keeps_serving(tmp_path: Path) -> None:
    cfg = stdio(timeout_s=0.5)
    hub = hub_for(tmp_path, cfg)
    try:
        text, err = await call(hub, cfg, "slow", {"seconds": 30}, tmp_path)
        assert err
        assert text.startswith("mcp__t__slow did not answer within timeout_s=0.5")
        assert await call(hub, cfg, "add", {"a": 1, "b": 1}, tmp_path) == ("2", False)
    finally:
        await hub.aclose()


async def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    cfg = McpServerConfig(name="gone", command=sys.executable, args=("-c", "import sys; sys.exit('no way')"),
                          source="cfg.toml", sandbox=False, startup_timeout_s=20)
    hub = hub_for(tmp_path, cfg)
    try:
        from subagents.mcp.client import McpStartError

        with pytest.raises(McpStartError) as e:
            await hub.tools_of(cfg)
        assert str(e.value).startswith(f"MCP server 'gone' ({sys.executable} -c import sys; sys.exit('no way'), "
                                       "from cfg.toml): ")
        assert "its stderr ends with: no way" in str(e.value)
    finally:
        await hub.aclose()


async def test_the_server_gets_the_scrubbed_environment_plus_its_own(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", "sk-secret")
    monkeypatch.setenv("ACME_PLAIN", "plain")
    cfg = stdio(env={"GREETING": "hi"})
    hub = hub_for(tmp_path, cfg)
    try:
        assert await call(hub, cfg, "echo_env", {"name": "ACME_API_KEY"}, tmp_path) == ("<unset>", False)
        assert await call(hub, cfg, "echo_env", {"name": "ACME_PLAIN"}, tmp_path) == ("<unset>", False)
        assert await call(hub, cfg, "echo_env", {"name": "GREETING"}, tmp_path) == ("hi", False)
    finally:
        await hub.aclose()


async def test_the_server_runs_in_the_sandbox_unless_configured_otherwise(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    confined, free = stdio("box"), stdio("free", sandbox=False)
    hub = hub_for(work, confined, free)
    try:
        assert await call(hub, confined, "try_write", {"path": str(work / "in.txt")}, work) == ("written", False)
        text, err = await call(hub, confined, "try_write", {"path": str(outside / "x.txt")}, work)
        assert text.startswith("refused: ")
        assert not err
        assert not (outside / "x.txt").exists()
        assert await call(hub, free, "try_write", {"path": str(outside / "y.txt")}, work) == ("written", False)
    finally:
        await hub.aclose()
    assert not (work / ".claude").exists()  # the empty mount points bubblewrap needed are gone
