"""``McpConnection``: one MCP server, started on first use, shared by every agent of a runtime.

The connection is owned by one asyncio task (the official SDK's ``mcp.Client`` holds anyio cancel
scopes, which must be entered and left by the same task); agents' calls go through the client's
session from their own tasks.  The lifecycle:

1. :meth:`McpConnection.start` (once, under a lock): the owner task opens the transport (a stdio
   command, confined by :mod:`.launch`, or a streamable HTTP URL), handshakes, lists the tools;
   ``startup_timeout_s`` bounds it.  A failure is a :class:`McpStartError` naming the server.
2. :meth:`McpConnection.call`: one ``tools/call`` bounded by the server's ``timeout_s`` (a slow call is a
   :class:`~subagents.exceptions.ToolError`, the server keeps running).
3. A lost connection (the process died, the HTTP server went away): the server is restarted once and the
   call is a tool error saying so; after a second loss every call is a tool error.
4. :meth:`McpConnection.aclose`: the owner task leaves the client (stdin closed, then the process tree
   killed by the SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

import anyio
import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from ..exceptions import SubagentsError, ToolError
from .config import McpServerConfig

__all__ = ["McpConnection", "McpStartError"]

log = logging.getLogger("subagents.mcp")

_LOST = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError)


class McpStartError(SubagentsError):
    """An MCP server could not be started or did not answer its handshake."""


def _why(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_why(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


class McpConnection:
    """A lazily started, shared connection to one MCP server (see the module docstring)."""

    def __init__(self, cfg: McpServerConfig, stdio: Callable[[], StdioServerParameters] | None = None) -> None:
        self.cfg = cfg
        self._stdio = stdio  # builds the (confined) command line; None for an HTTP server
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._generation = 0
        self.restarts = 0
        self.dead: str | None = None  # why the server is given up on
        self.tools: list[mcp_types.Tool] = []
        self._stderr: IO[str] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> list[mcp_types.Tool]:
        """Start the server if it is not running and return its tools; :class:`McpStartError` if it cannot."""
        async with self._lock:
            if self.dead is not None:
                raise McpStartError(self.dead)
            if self._client is None:
                await self._open()
            return self.tools

    def _transport(self) -> Any:
        if self.cfg.url is not None:
            http = create_mcp_http_client(headers=dict(self.cfg.headers) or None)
            return _http(self.cfg.url, http)
        assert self._stdio is not None
        if self._stderr is not None:
            self._stderr.close()
        # kept open while the server runs (its stderr), closed by aclose
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        return stdio_client(self._stdio(), errlog=self._stderr)

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[list[mcp_types.Tool]] = loop.create_future()
        self._stop = asyncio.Event()
        try:
            transport = self._transport()
        except (OSError, ValueError) as e:
            raise McpStartError(self._failed(f"it cannot be started ({_why(e)})")) from None
        self._owner = loop.create_task(self._own(transport, ready), name=f"mcp:{self.cfg.name}")
        try:
            async with asyncio.timeout(self.cfg.startup_timeout_s):
                self.tools = await asyncio.shield(ready)
        except TimeoutError:
            await self._close_owner()
            raise McpStartError(self._failed(
                f"it did not answer within startup_timeout_s={self.cfg.startup_timeout_s:g}")) from None
        except McpStartError as e:
            await self._close_owner()
            raise McpStartError(self._failed(str(e))) from None
        self._generation += 1

    async def _own(self, transport: Any, ready: asyncio.Future[list[mcp_types.Tool]]) -> None:
        """The owner task: enter the client, list the tools, hold the connection until told to stop."""
        try:
            async with Client(transport) as client:
                tools = await _list_tools(client)
                self._client = client
                if not ready.done():
                    ready.set_result(tools)
                await self._stop.wait()
        except (Exception, BaseExceptionGroup) as e:  # the SDK reports a dead peer in many shapes
            if not ready.done():
                ready.set_exception(McpStartError(_why(e)))
            else:
                log.debug("MCP server %r: connection ended: %s", self.cfg.name, _why(e))
        finally:
            self._client = None
            if not ready.done():
                ready.set_exception(McpStartError("the connection ended during the start"))

    def _failed(self, what: str) -> str:
        tail = self.stderr_tail()
        where = f"{self.cfg.command} {' '.join(self.cfg.args)}".strip() if self.cfg.url is None else self.cfg.url
        return (f"MCP server {self.cfg.name!r} ({where}, from {self.cfg.source or 'the API'}): {what}"
                + (f"; its stderr ends with: {tail}" if tail else "")
                + ". Check its configuration (command, args, env or url)")

    def stderr_tail(self, chars: int = 400) -> str:
        """The last characters the server wrote to stderr (stdio servers), stripped."""
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            return self._stderr.read()[-chars:].strip()
        except (OSError, ValueError):
            return ""

    async def _close_owner(self) -> None:
        owner, self._owner = self._owner, None
        self._stop.set()
        if owner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(owner), timeout=10)
            except TimeoutError:
                owner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await owner
        self._client = None

    async def aclose(self) -> None:
        """Stop the server (idempotent)."""
        async with self._lock:
            await self._close_owner()
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None

    # -- calls ---------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], *, shown_as: str) -> mcp_types.CallToolResult:
        """Call ``tool``; every failure is a :class:`ToolError` for the model (``shown_as``: the model's name)."""
        try:
            await self.start()
        except McpStartError as e:
            raise ToolError(f"{shown_as} cannot run: {e}") from None
        client, generation = self._client, self._generation
        if client is None:  # lost between the start and here
            raise ToolError(await self._lost(generation, shown_as, "the connection closed"))
        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                return await client.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(f"{shown_as} did not answer within timeout_s={self.cfg.timeout_s:g} (the MCP server "
                            f"{self.cfg.name!r} may be stuck or the task too big); try a smaller request, or raise "
                            f"timeout_s for this server") from None
        except MCPError as e:
            if e.error.code != mcp_types.CONNECTION_CLOSED:
                raise ToolError(f"{shown_as} failed: the MCP server answered with error {e.error.code}: "
                                f"{e.error.message}") from None
            raise ToolError(await self._lost(generation, shown_as, "the connection closed")) from None
        except _LOST as e:
            raise ToolError(await self._lost(generation, shown_as, _why(e))) from None

    async def _lost(self, generation: int, shown_as: str, how: str) -> str:
        """The connection of ``generation`` was lost during a call: restart once, and say what happened."""
        async with self._lock:
            tail = self.stderr_tail()
            what = (f"the MCP server {self.cfg.name!r} stopped during the call of {shown_as} ({how}"
                    + (f"; its stderr ends with: {tail}" if tail else "") + ")")
            if self.dead is not None:
                return f"{shown_as} cannot run: {self.dead}"
            if generation != self._generation and self._client is not None:
                return f"{what}; it was restarted since: call the tool again"
            await self._close_owner()
            if self.restarts >= 1:
                self.dead = (f"{what} after it had already been restarted once; its tools are unavailable for "
                             "the rest of this run: do the work without them")
                return self.dead
            self.restarts += 1
            try:
                await self._open()
            except McpStartError as e:
                self.dead = f"{what}, and restarting it failed: {e}"
                return self.dead
            return f"{what}; it was restarted: call the tool again if the call was safe to repeat"


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@contextlib.asynccontextmanager
async def _http(url: str, http: Any) -> AsyncIterator[Any]:
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams
