"""``McpConnection``: one MCP server, started on first use, shared by every agent of a runtime.

The connection is owned by one asyncio task (the official SDK's ``mcp.Client`` holds anyio cancel
scopes, which must be entered and left by the same task); agents' calls go through the client's
session from their own tasks.  The lifecycle:

1. :meth:`McpConnection.start` (once, under a lock): the owner task opens the transport (a stdio
   command, confined by :mod:`.launch`, or a streamable HTTP URL), handshakes, lists the tools;
   ``startup_timeout_s`` bounds it.  A failure is a :class:`McpStartError` naming the server, and it is
   remembered for :attr:`McpConnection.RETRY_AFTER_S`: agents starting meanwhile do not each wait
   ``startup_timeout_s`` again; the first one after it tries again (the server may be back: a runtime may
   live for days under ``subagents serve``).  A start whose waiter is cancelled (its agent was closed)
   goes on for the next one.
2. :meth:`McpConnection.call`: one ``tools/call`` bounded by the server's ``timeout_s`` (a slow call is a
   :class:`~subagents.exceptions.ToolError`, the server keeps running; so is an error the server answers).
3. A lost connection (the process died, the HTTP server went away): the server is restarted once and the
   call is a tool error saying so; after a second loss every call is a tool error (if restarting fails, it
   is tried again after :attr:`McpConnection.RETRY_AFTER_S`, as a failed start).
4. :meth:`McpConnection.aclose`: the owner task leaves the client (stdin closed, then the process tree
   killed by the SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..exceptions import SubagentsError, ToolError
from .config import McpServerConfig
from .streams import StderrTail, tolerant_tools

__all__ = ["McpConnection", "McpStartError"]

log = logging.getLogger("subagents.mcp")

_LOST = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError)


class McpStartError(SubagentsError):
    """An MCP server could not be started or did not answer its handshake."""


def _why(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_why(x) for x in e.exceptions)
    if isinstance(e, ValidationError):
        return f"its answer is not valid MCP ({_invalid(e)})"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _invalid(e: ValidationError) -> str:
    """The first fault of a message that is not valid MCP, in one line."""
    err = e.errors()[0]
    where = ".".join(str(x) for x in err["loc"])
    return f"{e.title}{f' {where}' if where else ''}: {err['msg']}"


def _lost_connection(e: MCPError) -> bool:
    """Whether ``e`` is the SDK saying the connection closed (not an error answer of a server that is fine:
    servers answer with the same code, -32000, for their own errors)."""
    return e.error.code == mcp_types.CONNECTION_CLOSED and e.error.message == "Connection closed"


class _StdoutNoise(logging.Filter):
    """The SDK logs a whole traceback for each line a stdio server prints that is not JSON-RPC (a banner, a
    stray ``print``): make it one warning line that shows the start of the line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and str(record.msg).startswith("Failed to parse JSONRPC message"):
            errors = exc.errors() if isinstance(exc, ValidationError) else []
            line = errors[0].get("input") if errors else None
            record.msg = "an MCP server wrote a line to its stdout that is not JSON-RPC (ignored): %.200r"
            record.args = (line if isinstance(line, str) else str(exc).splitlines()[0],)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


logging.getLogger("mcp.client.stdio").addFilter(_StdoutNoise())


class McpConnection:
    """A lazily started, shared connection to one MCP server (see the module docstring)."""

    RETRY_AFTER_S = 60.0
    """How long a server that could not start (or restart) is left alone before an agent tries it again."""

    def __init__(self, cfg: McpServerConfig, stdio: Callable[[], StdioServerParameters] | None = None) -> None:
        self.cfg = cfg
        self._stdio = stdio  # builds the (confined) command line; None for an HTTP server
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[list[mcp_types.Tool]] | None = None  # the start under way
        self._deadline = 0.0  # when the start under way gives up (loop time)
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._generation = 0
        self.restarts = 0
        self.dead: str | None = None  # why the server is given up on
        self._retry_at: float | None = None  # when a server given up on may be tried again (None: never)
        self.tools: list[mcp_types.Tool] = []
        self.tools_changed = False  # the server said its tool list changed (notifications/tools/list_changed)
        self._stderr: StderrTail | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> list[mcp_types.Tool]:
        """Start the server if it is not running and return its tools; :class:`McpStartError` if it cannot."""
        async with self._lock:
            now = asyncio.get_running_loop().time()
            if self.dead is not None and self._retry_at is not None and now >= self._retry_at:
                self.dead, self._retry_at, self.restarts = None, None, 0  # it may be back
            if self.dead is not None:
                raise McpStartError(self.dead)
            if self._client is None:
                try:
                    await self._open()
                except McpStartError as e:  # remembered: agents starting meanwhile must not wait for it again
                    raise McpStartError(self._give_up(str(e))) from None
            return self.tools

    def _give_up(self, why: str) -> str:
        """Leave the server alone for :attr:`RETRY_AFTER_S` (it could not start); returns the reason."""
        self._retry_at = asyncio.get_running_loop().time() + self.RETRY_AFTER_S
        self.dead = f"{why}; it is not started again for {self.RETRY_AFTER_S:g} s"
        return self.dead

    def _transport(self) -> Any:
        if self.cfg.url is not None:
            http = create_mcp_http_client(headers=dict(self.cfg.headers) or None)
            return tolerant_tools(_http(self.cfg.url, http), self.cfg.name)
        assert self._stdio is not None
        params = self._stdio()
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = StderrTail()  # kept while the server runs (its stderr), closed by aclose
        return tolerant_tools(stdio_client(params, errlog=self._stderr.file), self.cfg.name)

    async def _open(self) -> None:
        """Start the server, or join the start under way (its waiter may have been cancelled), until it is listed."""
        loop = asyncio.get_running_loop()
        if self._owner is not None and self._owner.done():  # it ended on its own: start afresh
            await self._close_owner(graceful=False)
        if self._owner is None or self._ready is None:
            if self.cfg.unset:
                names = ", ".join(self.cfg.unset)
                raise McpStartError(self._failed(
                    f"its configuration names the environment variable {names} (as ${{...}}), which is not set; "
                    f"set it, or give a default with ${{{self.cfg.unset[0]}:-value}}"))
            try:
                transport = self._transport()
            except (OSError, ValueError) as e:
                raise McpStartError(self._failed(f"it cannot be started ({_why(e)})")) from None
            self._stop = asyncio.Event()
            self._ready = ready = loop.create_future()
            ready.add_done_callback(_retrieved)  # a start nobody waits for any more is no "unretrieved" error
            self._deadline = loop.time() + self.cfg.startup_timeout_s
            self._owner = loop.create_task(self._own(transport, ready, self._stop), name=f"mcp:{self.cfg.name}")
        try:
            async with asyncio.timeout_at(self._deadline):
                await asyncio.shield(self._ready)
        except TimeoutError:
            await self._close_owner(graceful=False)
            raise McpStartError(self._failed(
                f"it did not answer within startup_timeout_s={self.cfg.startup_timeout_s:g}")) from None
        except McpStartError as e:
            await self._close_owner(graceful=False)
            raise McpStartError(self._failed(str(e))) from None

    async def _own(self, transport: Any, ready: asyncio.Future[list[mcp_types.Tool]], stop: asyncio.Event) -> None:
        """The owner task: enter the client, list the tools, hold the connection until told to stop."""
        mine: Client | None = None
        try:
            async with Client(transport, message_handler=self._notified) as client:
                self.tools_changed = False
                tools = await _list_tools(client)
                mine = client
                self.tools, self._client = tools, client  # set here: its waiter may have been cancelled
                self._generation += 1
                if not ready.done():
                    ready.set_result(tools)
                await stop.wait()
        except (Exception, BaseExceptionGroup) as e:  # the SDK reports a dead peer in many shapes
            if not ready.done():
                ready.set_exception(McpStartError(_why(e)))
            else:
                log.debug("MCP server %r: connection ended: %s", self.cfg.name, _why(e))
        finally:
            if self._client is mine:  # (not a newer owner's)
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
        """The last characters the server wrote to stderr (stdio servers), stripped (only the last
        :attr:`StderrTail.KEEP` bytes are kept: a chatty server's log may be endless)."""
        return "" if self._stderr is None else self._stderr.tail(chars)

    async def _notified(self, message: Any) -> None:
        """The SDK's message handler: note ``notifications/tools/list_changed`` (see :meth:`relist`)."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tools_changed = True

    async def relist(self) -> list[mcp_types.Tool]:
        """List the tools again after the server said they changed; the tools known so far if that fails (the
        failure is logged: the server keeps serving the tools it had)."""
        async with self._lock:
            client, changed, self.tools_changed = self._client, self.tools_changed, False
            if client is None or not changed:  # (a restart lists them afresh)
                return self.tools
            try:
                async with asyncio.timeout(self.cfg.timeout_s):
                    self.tools = await _list_tools(client)
            except (Exception, BaseExceptionGroup) as e:
                log.warning("MCP server %r said its tools changed, but listing them again failed (%s); its agents "
                            "keep the tools listed before", self.cfg.name, _why(e))
            return self.tools

    async def _close_owner(self, *, graceful: bool = True) -> None:
        """Stop the owner task: ``graceful``, it leaves the client (which stops the process) within 10 s, else it
        is cancelled now (a start given up: the server may hang in its handshake); the SDK's own shutdown is
        shielded and stops the process either way."""
        owner, self._owner, self._ready = self._owner, None, None
        self._stop.set()
        if owner is not None and not owner.done():
            if graceful and self._client is not None:
                await asyncio.wait([owner], timeout=10)
            if not owner.done():
                owner.cancel()
                await asyncio.wait([owner], timeout=10)
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
            if not _lost_connection(e):
                raise ToolError(f"{shown_as} failed: the MCP server answered with error {e.error.code}: "
                                f"{e.error.message}") from None
            raise ToolError(await self._lost(generation, shown_as, "the connection closed")) from None
        except ValidationError as e:
            raise ToolError(f"{shown_as} failed: the MCP server {self.cfg.name!r} answered with a result that is not "
                            f"valid MCP ({_invalid(e)}); the server may be faulty or of an unsupported "
                            "version") from None
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
                return self._give_up(f"{what}, and restarting it failed: {e}")
            return f"{what}; it was restarted: call the tool again if the call was safe to repeat"


def _retrieved(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


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
