"""What a connection puts between an MCP server and the SDK: a ``tools/list`` answer with a bad tool loses that
tool, not the server (:func:`tolerant_tools`); a stdio server's stderr keeps only its end (:class:`StderrTail`).

The official SDK validates a ``tools/list`` result whole: one malformed tool among twenty good ones would fail
the server.  :func:`tolerant_tools` wraps a transport (the ``(read, write)`` streams the SDK reads JSON-RPC
messages from) and drops, from the answers to the ``tools/list`` requests it saw go out, each tool that is not
valid MCP, logging a warning that names it; the SDK then sees (and remembers) only the good ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TextIO

import mcp_types
from mcp.shared.message import SessionMessage
from mcp_types import methods
from pydantic import ValidationError

__all__ = ["StderrTail", "tolerant_tools"]

log = logging.getLogger("subagents.mcp")


_VERSIONS = tuple(v for m, v in methods.SERVER_RESULTS if m == "tools/list")


def _versions(result: dict[str, Any], version: str | None) -> list[str]:
    """The protocol versions a ``tools/list`` answer may be checked at by the SDK: the version of the handshake,
    else (``server/discover``) each one whose envelope (the answer without its tools) the answer fits."""
    if version in _VERSIONS:
        return [version]
    fits = []
    for v in _VERSIONS:
        try:
            methods.validate_server_result("tools/list", v, {**result, "tools": []})
        except ValueError:  # (a ValidationError)
            continue
        fits.append(v)
    return fits


def _check_tool(raw: Any, result: dict[str, Any], versions: list[str]) -> None:
    """Raise :class:`ValidationError` if ``raw`` is not a valid MCP tool as the SDK checks it: at each of
    ``versions``, in the answer ``result`` it came in, then as the SDK's own model."""
    for v in versions:
        methods.validate_server_result("tools/list", v, {**result, "tools": [raw]})
    mcp_types.Tool.model_validate(raw, by_name=False)


def _fault(e: Exception) -> str:
    """What is wrong with a tool, in a few words."""
    if not isinstance(e, ValidationError):
        return type(e).__name__
    err = e.errors()[0]
    loc = err["loc"][2:] if tuple(err["loc"][:2]) == ("tools", 0) else err["loc"]
    where = ".".join(str(x) for x in loc)
    return f"{where}: {err['msg']}" if where else err["msg"]


def _good_tools(server: str, result: dict[str, Any], version: str | None) -> list[Any] | None:
    """The tools of a ``tools/list`` answer that are valid MCP (the bad ones logged, in one warning); ``None`` when
    the answer is not MCP apart from its tools (the SDK says so)."""
    tools, versions = result["tools"], _versions(result, version)
    if not versions:
        return None
    kept: list[Any] = []
    bad: list[str] = []
    for i, raw in enumerate(tools):
        try:
            _check_tool(raw, result, versions)
        except Exception as e:  # (a ValidationError; anything else from a tool must not end the connection)
            name = raw.get("name") if isinstance(raw, dict) else None
            what = f"{name[:100]!r}" if isinstance(name, str) else f"number {i + 1} (no valid name)"
            bad.append(f"{what} ({_fault(e)})")
            continue
        kept.append(raw)
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        log.warning("MCP server %r: %d tool%s left out, not valid MCP: %s%s", server, len(bad),
                    "" if len(bad) == 1 else "s", "; ".join(bad[:5]), more)
    return kept


class _Reader:
    """The read stream, with the bad tools of ``tools/list`` answers dropped."""

    def __init__(self, inner: Any, server: str, pending: dict[Any, str]) -> None:
        self._inner, self._server, self._pending = inner, server, pending
        self._version: str | None = None  # the protocol version of the handshake

    def __getattr__(self, name: str) -> Any:  # last_context and anything else the SDK may look at
        return getattr(self._inner, name)

    def _fix(self, item: Any) -> Any:
        msg = getattr(item, "message", None)
        if isinstance(msg, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError) and msg.id in self._pending:
            method = self._pending.pop(msg.id)
            if not isinstance(msg, mcp_types.JSONRPCResponse):
                return item
            if method == "initialize" and isinstance(msg.result.get("protocolVersion"), str):
                self._version = msg.result["protocolVersion"]
            tools = msg.result.get("tools")
            if method == "tools/list" and isinstance(tools, list):
                good = _good_tools(self._server, msg.result, self._version)
                if good is not None and len(good) != len(tools):
                    msg.result = {**msg.result, "tools": good}
        return item

    async def receive(self) -> Any:
        return self._fix(await self._inner.receive())

    def __aiter__(self) -> _Reader:
        return self

    async def __anext__(self) -> Any:
        return self._fix(await self._inner.__anext__())

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Reader:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        return bool(await self._inner.__aexit__(et, e, tb))


class _Writer:
    """The write stream, noting the ids of the ``initialize`` and ``tools/list`` requests that go out."""

    def __init__(self, inner: Any, pending: dict[Any, str]) -> None:
        self._inner, self._pending = inner, pending

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any, /) -> None:
        msg = item.message if isinstance(item, SessionMessage) else None
        if isinstance(msg, mcp_types.JSONRPCRequest) and msg.method in ("initialize", "tools/list"):
            self._pending[msg.id] = msg.method
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Writer:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        return bool(await self._inner.__aexit__(et, e, tb))


@contextlib.asynccontextmanager
async def tolerant_tools(transport: Any, server: str) -> AsyncIterator[tuple[Any, Any]]:
    """``transport`` (an async context manager of ``(read, write)`` streams) whose ``tools/list`` answers lose
    their malformed tools (see the module docstring); ``server``: its name, for the warnings."""
    async with transport as streams:
        pending: dict[Any, str] = {}
        yield _Reader(streams[0], server, pending), _Writer(streams[1], pending)


class StderrTail:
    """A stdio server's stderr: a pipe the event loop drains, keeping only the last :attr:`KEEP` bytes (a server
    that logs forever must not fill the disk or the memory).  :attr:`file` is what the server's stderr is."""

    KEEP = 64 * 1024

    def __init__(self) -> None:
        r, w = os.pipe()
        os.set_blocking(r, False)
        self._r: int | None = r
        self.file: TextIO = open(w, "w", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed by close)
        self._buf = bytearray()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(r, self._drain)

    def _drain(self) -> None:
        """Read what the pipe holds now (called by the loop when it is readable, and before :meth:`tail`)."""
        for _ in range(256):  # (a server that writes without a pause must not hold the loop)
            if self._r is None:
                return
            try:
                data = os.read(self._r, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # every writer closed it
                self._stop_reading()
                return
            self._buf += data
            if len(self._buf) > 2 * self.KEEP:
                del self._buf[:-self.KEEP]

    def _stop_reading(self) -> None:
        if self._r is not None:
            with contextlib.suppress(Exception):  # (the loop may be closed already)
                self._loop.remove_reader(self._r)

    def tail(self, chars: int) -> str:
        """The last ``chars`` characters the server wrote, stripped."""
        self._drain()
        return self._buf[-4 * chars:].decode("utf-8", errors="replace")[-chars:].strip()

    def close(self) -> None:
        self._stop_reading()
        if self._r is not None:
            os.close(self._r)
            self._r = None
        self.file.close()
