"""A hostile or careless MCP client (or network neighbour, or project) against ``subagents serve``.

* a signal stops a stdio server at once, even while its client keeps the pipe open;
* a client that leaves in the middle of a foreground call leaves its agent ``interrupted`` (resumable);
* ``wait()`` without ids waits for the agents of the calling HTTP session only;
* a browser page (foreign Host or Origin, a "simple" POST) is refused;
* a signal answers the HTTP calls in flight and stops the server at once;
* with ``SUBAGENTS_SERVE_TOKEN`` set, an HTTP request without it is refused;
* the announced HTTP address takes connections at once;
* resuming an agent another server runs says so;
* a project's config never names Python code for the server to import.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from subagents import Runtime
from subagents.cli.main import main
from subagents.serve import build_server
from subagents.store import open_store

from .mcp_calls import call, error, serve_command, serve_env
from .serve_scripts import model

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUBAGENTS_SERVE_TOKEN", raising=False)  # the servers here take their env from this one

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class RawStdio:
    """``subagents serve`` over stdio, spoken to line by line (to leave, or signal it, mid-call)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.answers: dict[int, dict[str, Any]] = {}

    @classmethod
    async def start(cls, project: Path) -> RawStdio:
        proc = await asyncio.create_subprocess_exec(*serve_command(project), env=serve_env(), cwd=str(project),
                                                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        raw = cls(proc)
        raw.send(INIT)
        await raw.answer(0)
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return raw

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")

    def call(self, n: int, tool: str, **args: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": args}})

    async def answer(self, n: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while n not in self.answers:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
            assert line, "the server ended its output"
            msg = json.loads(line)
            self.answers[msg.get("id")] = msg
        return self.answers[n]

    async def until_running(self, first: int) -> str:
        """The id of the agent a foreground spawn started, once it runs (asked with list_agents from ``first``)."""
        for n in range(first, first + 200):
            self.call(n, "list_agents")
            agents = (await self.answer(n))["result"]["structuredContent"]["agents"]
            if agents and agents[0]["status"] == "running":
                return str(agents[0]["agent_id"])
            await asyncio.sleep(0.05)
        raise AssertionError("the agent never started")

    async def end(self) -> int:
        try:
            return await asyncio.wait_for(self.proc.wait(), 20)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()


def _record(project: Path, agent_id: str) -> tuple[str, str | None, str | None]:
    store = open_store(f"sqlite:///{project / 'state.db'}", project)
    try:
        rec = store.get_run(agent_id)
    finally:
        store.close()
    assert rec is not None
    return rec.status, rec.outcome, rec.error


async def test_sigterm_stops_a_stdio_server_whose_client_keeps_the_pipe_open(workdir: Path) -> None:
    raw = await RawStdio.start(workdir)
    raw.call(1, "spawn_agent", prompt="hang")  # a foreground call in flight
    aid = await raw.until_running(2)
    raw.proc.send_signal(signal.SIGTERM)  # stdin stays open: the server used to wait for the client to close it
    assert await raw.end() == 0
    status, outcome, error = _record(workdir, aid)
    assert (status, outcome) == ("errored", "interrupted")
    assert error is not None
    assert error.startswith("interrupted: the process was stopped (SIGTERM)")


async def test_a_client_that_leaves_mid_call_leaves_its_agent_interrupted(workdir: Path) -> None:
    raw = await RawStdio.start(workdir)
    raw.call(1, "spawn_agent", prompt="hang")
    aid = await raw.until_running(2)
    assert raw.proc.stdin is not None
    raw.proc.stdin.close()  # the client goes away in the middle of the call
    assert await raw.end() == 0
    assert _record(workdir, aid) == (  # it used to be closed as cancelled, as if the client had asked for it
        "errored", "interrupted", "interrupted: the process was stopped (the MCP client disconnected) before this "
        "agent finished; resume it with: subagents runs resume <id> <message>")


@asynccontextmanager
async def http_server(project: Path, **env: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``subagents serve --http 0``: the process and the URL it announces; SIGTERM at the end, if still running."""
    proc = await asyncio.create_subprocess_exec(*serve_command(project, "--http", "0"), env={**serve_env(), **env},
                                                stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        m = re.fullmatch(r"subagents serve: MCP over streamable HTTP at (http://127\.0\.0\.1:\d+/mcp)\n", line)
        assert m, line
        yield proc, m.group(1)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()


async def test_http_clients_wait_for_their_own_agents_and_browsers_are_refused(workdir: Path) -> None:
    async with http_server(workdir) as (_, url):
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as a:
            await a.initialize()
            _, mine = await call(a, "spawn_agent", prompt="hang", background=True)
            async with streamable_http_client(url) as (read2, write2), ClientSession(read2, write2) as b:
                await b.initialize()
                said, w = await call(b, "wait", timeout_s=0.5)  # it used to wait for A's agent
                assert said == "you have started no agents to wait for; start one with spawn_agent"
                assert w == {"results": [], "running": [], "timed_out": False}
            said, w = await call(a, "wait", timeout_s=0.2)
            assert w["running"] == [mine["agent_id"]]
        port = url.split(":")[2].split("/")[0]
        init = {**INIT, "id": 1}
        head = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient(timeout=30) as h:
            rebound = await h.post(url, json=init, headers={**head, "Host": f"attacker.example:{port}"})
            assert rebound.status_code == 421  # DNS rebinding: a foreign Host
            cross = await h.post(url, json=init, headers={**head, "Origin": "https://attacker.example"})
            assert cross.status_code == 403  # a page of another origin
            simple = await h.post(url, content=json.dumps(init), headers={**head, "Content-Type": "text/plain"})
            assert simple.status_code == 400  # a "simple" cross-origin POST, which needs no preflight


async def test_sigterm_answers_a_connected_http_client_and_stops_at_once(workdir: Path) -> None:
    async with http_server(workdir) as (proc, url):
        answers: list[CallToolResult] = []
        try:
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                await s.list_tools()  # (the client checks a result against its tool's output schema, listed once)
                foreground = asyncio.create_task(s.call_tool("spawn_agent", {"prompt": "hang"}))
                for _ in range(200):
                    _, listed = await call(s, "list_agents")
                    if listed["agents"]:
                        break
                    await asyncio.sleep(0.05)
                proc.send_signal(signal.SIGTERM)  # its event stream is open, its call in flight: both used to be
                answers.append(await asyncio.wait_for(foreground, 30))  # waited for 5 s, then cut (a traceback)
        except BaseExceptionGroup:
            if not answers:
                raise
            # else the client's own requests on leaving found the server gone: not what this test is about
        assert answers[0].structured_content is not None
        assert answers[0].structured_content["result"]["outcome"] == "interrupted"
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert proc.stderr is not None
        assert "Traceback" not in (await proc.stderr.read()).decode()


async def test_with_a_token_set_http_requests_without_it_are_refused(workdir: Path) -> None:
    async with http_server(workdir, SUBAGENTS_SERVE_TOKEN="s3cret") as (_, url):
        head = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient(timeout=30) as h:
            anyone = await h.post(url, json=INIT, headers=head)  # any local user or process could, before
            assert anyone.status_code == 401
            assert "Authorization: Bearer <the value of SUBAGENTS_SERVE_TOKEN>" in anyone.text
            wrong = await h.post(url, json=INIT, headers={**head, "Authorization": "Bearer guess"})
            assert wrong.status_code == 401
            auth = {**head, "Authorization": "Bearer s3cret"}
            ok = await h.post(url, json=INIT, headers=auth)
            assert ok.status_code == 200
            session = {**auth, "mcp-session-id": ok.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            await h.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            listed = await h.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                             "params": {"name": "list_agents", "arguments": {}}}, headers=session)
            assert "no agents yet; start one with spawn_agent" in listed.text


async def test_the_announced_address_takes_connections_at_once(workdir: Path) -> None:
    async with http_server(workdir) as (_, url):
        port = int(url.split(":")[2].split("/")[0])
        _, writer = await asyncio.open_connection("127.0.0.1", port)  # it used to be refused for a while
        writer.close()
        await writer.wait_closed()


async def test_resuming_an_agent_another_server_runs_says_so(workdir: Path) -> None:
    store = f"sqlite:///{workdir / 'state.db'}"
    async with Runtime(model, workdir=workdir, store=store) as ra, Client(build_server(ra)) as a:
        _, running = await call(a, "spawn_agent", prompt="hang", background=True)
        assert [r.run_id for r in ra.runs()] == [running["agent_id"]]  # (committed: the other server can see it)
        async with Runtime(model, workdir=workdir, store=store) as rb, Client(build_server(rb)) as b:
            said = await error(b, "resume_agent", agent_id=running["agent_id"], message="more")
    assert said.startswith(f"agent {running['agent_id']} is run by another process (")  # it used to say there was
    assert said.endswith("so this server cannot resume it; use that process, or 'subagents runs cancel "  # no such
                         f"{running['agent_id']}' from a shell")  # agent, which status and list_agents showed


@pytest.mark.parametrize("ref", ["evilmod:model", "evilpkg.sub:model"])
def test_a_project_config_cannot_make_the_server_import_its_code(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str], ref: str) -> None:
    (workdir / ".subagents").mkdir()
    (workdir / ".subagents" / "config.toml").write_text(f'[model]\ndefault = "{ref}"\n')
    marker = workdir / "ran"
    code = f"open({str(marker)!r}, 'w').close()\nmodel = 1\n"
    (workdir / "evilmod.py").write_text(code)
    (workdir / "evilpkg").mkdir()
    (workdir / "evilpkg" / "__init__.py").write_text(code)  # finding evilpkg.sub imports evilpkg
    monkeypatch.syspath_prepend(str(workdir))  # as `python -m subagents.cli.main serve` run in the project
    for name in ("evilmod", "evilpkg"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert main(["serve", "--cwd", str(workdir)]) == 2
    assert not marker.exists()
    assert f"unknown model provider '{ref.split(':')[0]}'" in capsys.readouterr().err
