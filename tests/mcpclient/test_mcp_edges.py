"""Hostile and careless MCP servers (tests/mcpclient/hostile_server.py): what a connection makes of them.

An error a server answers is a tool error and the server keeps serving; a server that hangs in its
handshake is given up within ``startup_timeout_s`` and stopped, and not started again by every agent (but
tried again after a while: an HTTP server that was down is used again once it is back); a start whose agent
was closed goes on for the next agent; a malformed result is a short tool error; a banner on stdout is one
warning line; a huge stderr is not read whole; servers stop all at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from subagents.mcp import McpServerConfig
from subagents.mcp.client import McpConnection, McpStartError
from subagents.mcp.hub import McpTools
from subagents.messages import ToolUseBlock
from subagents.models.base import AgentInfo
from subagents.sandbox.policy import SandboxPolicy
from subagents.sandbox.workspace import Workspace
from subagents.tools.base import ToolContext, ToolRegistry

from .conftest import SERVER, free_port

HOSTILE = Path(__file__).with_name("hostile_server.py")
TOOL = {"name": "t", "inputSchema": {"type": "object", "properties": {}}}
OTHER = {"name": "u", "inputSchema": {"type": "object", "properties": {}}}

pytestmark = pytest.mark.timeout(60)


def hostile(tmp_path: Path, name: str = "h", *, spec: dict[str, Any], **kw: Any) -> McpServerConfig:
    """The hostile server with ``spec``, unconfined (its misbehaviour is the test, not the sandbox)."""
    path = tmp_path / f"{name}-spec.json"
    path.write_text(json.dumps(spec))
    kw.setdefault("sandbox", False)
    kw.setdefault("startup_timeout_s", 10)
    return McpServerConfig(name=name, command=sys.executable, args=(str(HOSTILE), str(path)), source="test", **kw)


def hub_for(tmp_path: Path, *servers: McpServerConfig) -> McpTools:
    return McpTools({s.name: s for s in servers}, workspace=Workspace(tmp_path, SandboxPolicy()))


async def call(hub: McpTools, cfg: McpServerConfig, tool: str, tmp_path: Path,
               args: dict[str, Any] | None = None) -> tuple[str, bool]:
    """Call ``tool`` as an agent would (schema checked, errors as results): its text and whether it failed."""
    reg = ToolRegistry(await hub.tools_of(cfg))
    ctx = ToolContext(agent=AgentInfo("a1", "a", "general-purpose", 0, None), workspace=Workspace(tmp_path))
    res = await reg.execute(ToolUseBlock("c1", tool, args or {}), ctx)
    return res.content, res.is_error


def pids(pidfile: Path) -> list[int]:
    return [int(p) for p in pidfile.read_text().split()] if pidfile.exists() else []


def http_server(port: int) -> subprocess.Popen[bytes]:
    """The test server (tests/mcpclient/server.py) over streamable HTTP on ``port``, once it listens."""
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    stop(proc)
    raise RuntimeError("the HTTP MCP server did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def test_an_error_the_server_answers_is_a_tool_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    # -32000 is the code servers use for their own errors; it is also the code of the SDK's "connection closed"
    pidfile = tmp_path / "pids"
    cfg = hostile(tmp_path, spec={"tools": [TOOL, OTHER], "pidfile": str(pidfile), "calls": {
        "t": {"error": {"code": -32000, "message": "rate limited, try again later"}}}})
    hub = hub_for(tmp_path, cfg)
    try:
        for _ in range(3):  # not a crash: never restarted, never given up on
            assert await call(hub, cfg, "mcp__h__t", tmp_path) == (
                "mcp__h__t failed: the MCP server answered with error -32000: rate limited, try again later", True)
        assert await call(hub, cfg, "mcp__h__u", tmp_path) == ("ok", False)
        assert len(pids(pidfile)) == 1
    finally:
        await hub.aclose()


async def test_a_server_that_hangs_in_its_handshake_is_given_up_in_time_and_stopped(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    cfg = hostile(tmp_path, spec={"init": "hang", "pidfile": str(pidfile)}, startup_timeout_s=1)
    hub = hub_for(tmp_path, cfg)
    try:
        started = time.monotonic()
        with pytest.raises(McpStartError, match=r"it did not answer within startup_timeout_s=1"):
            await hub.tools_of(cfg)
        assert time.monotonic() - started < 6  # the timeout, and the few seconds the SDK takes to stop it
        [pid] = pids(pidfile)
        assert not alive(pid)
    finally:
        await hub.aclose()


async def test_a_server_that_cannot_start_is_not_started_again_by_every_agent(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    cfg = hostile(tmp_path, spec={"init": "hang", "pidfile": str(pidfile)}, startup_timeout_s=1)
    hub = hub_for(tmp_path, cfg)
    try:
        with pytest.raises(McpStartError):
            await hub.tools_of(cfg)
        started = time.monotonic()
        for _ in range(3):  # three more agents start: none waits startup_timeout_s again
            with pytest.raises(McpStartError, match=r"it is not started again for 60 s$"):
                await hub.tools_of(cfg)
        assert time.monotonic() - started < 0.5
        assert len(pids(pidfile)) == 1
    finally:
        await hub.aclose()


async def test_a_server_that_could_not_start_is_tried_again_after_a_while(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(McpConnection, "RETRY_AFTER_S", 1.0)
    pidfile = tmp_path / "pids"
    cfg = hostile(tmp_path, spec={"init": "hang", "pidfile": str(pidfile)}, startup_timeout_s=0.5)
    hub = hub_for(tmp_path, cfg)
    try:
        with pytest.raises(McpStartError):
            await hub.tools_of(cfg)
        hostile(tmp_path, spec={"tools": [TOOL], "pidfile": str(pidfile)})  # fixed (its spec is read at each start)
        with pytest.raises(McpStartError, match=r"it is not started again for 1 s$"):
            await hub.tools_of(cfg)
        await asyncio.sleep(1.2)
        assert [t.name for t in await hub.tools_of(cfg)] == ["mcp__h__t"]
        assert len(pids(pidfile)) == 2
    finally:
        await hub.aclose()


async def test_an_http_server_that_was_down_is_used_again_once_it_is_back(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(McpConnection, "RETRY_AFTER_S", 1.0)
    port = free_port()
    cfg = McpServerConfig(name="web", url=f"http://127.0.0.1:{port}/mcp", source="test", startup_timeout_s=10)
    hub = hub_for(tmp_path, cfg)
    server = http_server(port)
    try:
        assert await call(hub, cfg, "mcp__web__add", tmp_path, {"a": 1, "b": 2}) == ("3", False)
        stop(server)  # a deploy, a network blip: the reconnection fails too
        text, err = await call(hub, cfg, "mcp__web__add", tmp_path, {"a": 1, "b": 2})
        assert err
        assert "and restarting it failed" in text
        assert text.endswith("it is not started again for 1 s")
        server = http_server(port)
        await asyncio.sleep(1.2)
        assert await call(hub, cfg, "mcp__web__add", tmp_path, {"a": 2, "b": 2}) == ("4", False)
    finally:
        await hub.aclose()
        stop(server)


async def test_an_agent_closed_while_its_server_starts_leaves_the_start_to_the_next_one(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    cfg = hostile(tmp_path, spec={"tools": [TOOL], "pidfile": str(pidfile), "start_delay": 1})
    hub = hub_for(tmp_path, cfg)
    try:
        first = asyncio.create_task(hub.tools_of(cfg))
        await asyncio.sleep(0.3)
        first.cancel()  # its agent was closed
        with pytest.raises(asyncio.CancelledError):
            await first
        assert [t.name for t in await hub.tools_of(cfg)] == ["mcp__h__t"]  # joins the start under way
        assert len(pids(pidfile)) == 1
    finally:
        await hub.aclose()


async def test_a_start_finished_after_its_agent_was_closed_serves_the_next_agent(tmp_path: Path) -> None:
    cfg = hostile(tmp_path, spec={"tools": [TOOL], "start_delay": 0.5})
    hub = hub_for(tmp_path, cfg)
    try:
        first = asyncio.create_task(hub.tools_of(cfg))
        await asyncio.sleep(0.2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.sleep(2)  # the server is up by now, with nobody waiting for it
        assert [t.name for t in await hub.tools_of(cfg)] == ["mcp__h__t"]
        assert await call(hub, cfg, "mcp__h__t", tmp_path) == ("ok", False)
    finally:
        await hub.aclose()


async def test_a_malformed_result_is_a_short_tool_error(tmp_path: Path) -> None:
    cfg = hostile(tmp_path, spec={"tools": [TOOL, OTHER], "calls": {"t": {"result": {"content": "not a list"}}}})
    hub = hub_for(tmp_path, cfg)
    try:
        assert await call(hub, cfg, "mcp__h__t", tmp_path) == (
            "mcp__h__t failed: the MCP server 'h' answered with a result that is not valid MCP (CallToolResult "
            "content: Input should be a valid list); the server may be faulty or of an unsupported version", True)
        assert await call(hub, cfg, "mcp__h__u", tmp_path) == ("ok", False)
    finally:
        await hub.aclose()


async def test_a_tool_list_that_is_not_mcp_says_so(tmp_path: Path) -> None:
    # (one bad tool in a list costs that tool only: test_mcp_gaps.py)
    cfg = hostile(tmp_path, spec={"tools": {"bad": {"name": "bad"}}})
    hub = hub_for(tmp_path, cfg)
    try:
        with pytest.raises(McpStartError) as e:
            await hub.tools_of(cfg)
        assert "its answer is not valid MCP (ListToolsResult tools: Input should be a valid list" in str(e.value)
        assert "Traceback" not in str(e.value)
    finally:
        await hub.aclose()


async def test_a_banner_on_stdout_is_one_warning_line_not_a_traceback(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    cfg = hostile(tmp_path, spec={"tools": [TOOL], "banner": "Server started! Listening on stdio"})
    hub = hub_for(tmp_path, cfg)
    try:
        with caplog.at_level(logging.WARNING, logger="mcp.client.stdio"):
            assert await call(hub, cfg, "mcp__h__t", tmp_path) == ("ok", False)
        [record] = [r for r in caplog.records if r.name == "mcp.client.stdio"]
        assert record.levelno == logging.WARNING
        assert record.exc_info is None
        assert record.getMessage() == ("an MCP server wrote a line to its stdout that is not JSON-RPC (ignored): "
                                       "'Server started! Listening on stdio'")
    finally:
        await hub.aclose()


async def test_the_end_of_a_huge_stderr_is_read_without_reading_it_all(tmp_path: Path) -> None:
    cfg = hostile(tmp_path, spec={"tools": [TOOL], "calls": {"t": {"stderr_mb": 32}}})
    hub = hub_for(tmp_path, cfg)
    try:
        assert await call(hub, cfg, "mcp__h__t", tmp_path) == ("ok", False)
        tracemalloc.start()
        try:
            tail = hub.connection(cfg).stderr_tail()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert tail.endswith("THE LAST LINE")
        assert len(tail) <= 400
        assert peak < 1_000_000
    finally:
        await hub.aclose()


async def test_servers_stop_all_at_once(tmp_path: Path) -> None:
    # each ignores the end of its stdin and SIGTERM: the SDK gives it a few seconds, then kills it
    pidfile = tmp_path / "pids"
    cfgs = [hostile(tmp_path, f"s{i}", spec={"tools": [TOOL], "stubborn": True, "pidfile": str(pidfile)})
            for i in range(3)]
    hub = hub_for(tmp_path, *cfgs)
    for cfg in cfgs:
        await hub.tools_of(cfg)
    started = time.monotonic()
    await hub.aclose()
    assert time.monotonic() - started < 8  # one after the other: 3 times as long
    assert not any(alive(p) for p in pids(pidfile))
