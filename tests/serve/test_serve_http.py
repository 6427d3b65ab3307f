"""``subagents serve --http 0`` as a real process: streamable HTTP on loopback, driven by the mcp SDK's client."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from subagents.store import open_store

from .mcp_calls import call, error, serve_command, serve_env


async def _url(proc: asyncio.subprocess.Process) -> str:
    """The URL the server says it listens at (its first line on stderr)."""
    assert proc.stderr is not None
    line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
    m = re.fullmatch(r"subagents serve: MCP over streamable HTTP at (http://127\.0\.0\.1:\d+/mcp)\n", line)
    assert m, line + (await proc.stderr.read()).decode()
    return m.group(1)


async def test_spawn_wait_result_cancel_over_http_then_sigterm(workdir: Path) -> None:
    cmd = serve_command(workdir, "--http", "0")
    proc = await asyncio.create_subprocess_exec(*cmd, env=serve_env(), stdin=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        url = await _url(proc)
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            _, echo = await call(s, "spawn_agent", prompt="echo over http", background=True)
            _, hang = await call(s, "spawn_agent", prompt="hang", background=True)
            _, w = await call(s, "wait", agent_ids=[echo["nickname"]], timeout_s=30)
            assert w["results"][0]["text"] == "echo: over http"
            said, _ = await call(s, "result", agent_id=echo["agent_id"])
            assert said.splitlines()[1] == "echo: over http"
            _, closed = await call(s, "close_agent", agent_id=hang["agent_id"])
            assert closed["outcome"] == "cancelled"
            assert "no agent with id or nickname 'ghost'" in await error(s, "wait", agent_ids=["ghost"])
            _, left = await call(s, "spawn_agent", prompt="hang", background=True)
        # that client is gone, the server (and its agent) are not: HTTP clients come and go
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            _, st = await call(s, "status", agent_id=left["agent_id"])
            assert st["status"] == "running"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert proc.stderr is not None
        assert (await proc.stderr.read()).decode() == ""  # nothing more said: no traceback
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    store = open_store(f"sqlite:///{workdir / 'state.db'}", workdir)
    try:
        rec = store.get_run(left["agent_id"])
    finally:
        store.close()
    assert rec is not None
    assert (rec.status, rec.outcome) == ("errored", "interrupted")
    assert rec.error is not None
    assert rec.error.startswith("interrupted: the process was stopped (SIGTERM)")
