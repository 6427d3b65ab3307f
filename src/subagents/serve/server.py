"""``subagents serve``: the runtime as an MCP server, over stdio or streamable HTTP on loopback.

One :class:`~subagents.Runtime` lives as long as the server: background agents keep running between
tool calls and their records are in the project's run store, as with ``subagents run``.  The tools are
those of :class:`~subagents.serve.service.AgentService`, served by the official ``mcp`` SDK's
``MCPServer``.  When the server stops (the client closes stdin, or a signal), agents still running are
closed and recorded as ``interrupted``: ``resume_agent`` (or ``subagents runs resume``) goes on with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import uvicorn
from mcp.server.mcpserver import MCPServer
from sse_starlette.sse import AppStatus
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..exceptions import SubagentsError, UserError
from ..runtime.runtime import Runtime
from .service import MAX_AGENTS, AgentService
from .stdio import run_stdio

__all__ = ["INSTRUCTIONS", "TOKEN_ENV", "ServeOptions", "build_server", "serve"]

INSTRUCTIONS = """\
subagents runs LLM agents for you. spawn_agent hands one task to an agent with a fresh conversation \
(agent types: general-purpose, explore, plan, verify, coordinator, or the project's own) and returns its \
answer; with background=true it returns an id at once and the agent keeps running: collect the result \
with wait (or result), steer it with send_input, stop it with close_agent, give a finished one more work \
with resume_agent. list_agents and status show where they stand."""

DISCONNECTED = "the MCP client disconnected"
HOST = "127.0.0.1"
MCP_PATH = "/mcp"
TOKEN_ENV = "SUBAGENTS_SERVE_TOKEN"


@dataclass(slots=True)
class ServeOptions:
    """How to serve: ``http_port`` None for stdio, else streamable HTTP on 127.0.0.1 (0: any free port)."""

    http_port: int | None = None
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    """Where the server tells where it listens (stderr: stdout carries the stdio protocol)."""
    token: str | None = None
    """HTTP: every request must carry ``Authorization: Bearer <token>`` (the port is open to every local user)."""
    max_agents: int = MAX_AGENTS
    """Agents the clients may have running at once (started or resumed by ``spawn_agent``/``resume_agent``)."""


def build_server(rt: Runtime, max_agents: int = MAX_AGENTS) -> MCPServer:
    """An ``MCPServer`` whose tools act on ``rt`` (which must stay open while it serves); at most ``max_agents`` of
    the agents its clients start run at once."""
    server: MCPServer = MCPServer("subagents", instructions=INSTRUCTIONS, version=_version(),
                                  log_level="WARNING")
    for fn in AgentService(rt, max_agents=max_agents).tools():
        server.add_tool(fn, structured_output=True)
    return server


async def serve(rt: Runtime, options: ServeOptions) -> None:
    """Serve ``rt`` until the client goes away or SIGTERM, SIGINT or SIGHUP arrives; then close ``rt``."""
    server = build_server(rt, options.max_agents)
    task = asyncio.current_task()
    assert task is not None
    http: list[_Uvicorn] = []
    stopped: list[str] = []
    ending: list[asyncio.Future[None]] = []

    def stop(sig: signal.Signals) -> None:
        if stopped:
            return
        stopped.append(sig.name)
        rt.interrupting(sig.name)
        if http:  # close the agents: foreground calls answer (interrupted); then the server stops
            ending.append(asyncio.ensure_future(_end_http(rt, http[0], sig)))
        else:  # stdio: the serving task is cancelled, its stdin reader with it (see stdio.py)
            task.cancel()

    async with rt:
        with _signals(stop):
            try:
                if options.http_port is None:  # the client leaving ends it: its agents are interrupted, not cancelled
                    await run_stdio(server, on_eof=lambda: None if stopped else rt.interrupting(DISCONNECTED))
                else:
                    await _serve_http(server, options, http)
            except asyncio.CancelledError:
                if not stopped:
                    raise
                task.uncancel()
            if not stopped:  # the client left: agents still running are recorded as interrupted, resumable
                rt.interrupting(DISCONNECTED)


async def _serve_http(server: MCPServer, options: ServeOptions, holder: list[_Uvicorn]) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, options.http_port or 0))
        sock.listen(2048)  # now, not when uvicorn is up: a client told the address below may connect at once
    except OSError as e:
        sock.close()
        raise UserError(f"cannot listen on {HOST}:{options.http_port} ({e.strerror or e}); pick another port "
                        "with --http PORT (0 picks a free one)") from None
    # the SDK's app refuses a foreign Host or Origin header (a web page cannot use it); any local process could
    app: ASGIApp = server.streamable_http_app(streamable_http_path=MCP_PATH, host=HOST)
    if options.token:
        app = _Bearer(app, options.token)
    holder.append(_Uvicorn(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5, lifespan="on")))
    port = sock.getsockname()[1]
    options.say(f"subagents serve: MCP over streamable HTTP at http://{HOST}:{port}{MCP_PATH}")
    try:
        with sock:
            await holder[0].serve(sockets=[sock])
    finally:
        AppStatus.should_exit = False  # set by handle_exit() for the whole process: a later server's streams live


async def _end_http(rt: Runtime, server: _Uvicorn, sig: signal.Signals) -> None:
    """Close the running agents (a foreground call answers with its interrupted result), then stop ``server`` as
    uvicorn's own signal handler does, which also ends the clients' open event streams (else awaited for 5 s)."""
    try:
        for agent in rt.agents():
            if agent.parent_id is None and not agent.status.is_final():
                with contextlib.suppress(SubagentsError):  # it ended meanwhile
                    await rt.close(agent.id)
    finally:
        server.handle_exit(sig, None)


class _Bearer:
    """The HTTP requests without ``Authorization: Bearer <token>`` are refused (401)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        if scope["type"] == "http" and not hmac.compare_digest(given, self.expected):
            refusal = PlainTextResponse(f"missing or wrong bearer token: send the header 'Authorization: Bearer "
                                        f"<the value of {TOKEN_ENV}>'", 401, headers={"WWW-Authenticate": "Bearer"})
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: :func:`serve` has them (and closes the runtime after it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.contextmanager
def _signals(stop: Callable[[signal.Signals], None]) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    for sig in sigs:
        loop.add_signal_handler(sig, stop, sig)
    try:
        yield
    finally:
        for sig in sigs:
            loop.remove_signal_handler(sig)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("subagents")
    except PackageNotFoundError:
        return "unknown"
