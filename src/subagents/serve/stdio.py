"""The stdio transport of ``subagents serve``: the SDK's, fed by a stdin reader that a signal can stop.

The SDK reads stdin in an anyio worker thread, which a cancellation waits for (and the interpreter joins at exit):
a server sent SIGTERM while its client kept the pipe open went on until the client closed it.  Here a daemon
thread reads the lines and hands them over through the event loop, so a cancelled server stops at once (the
thread ends with the process).  As the SDK does, fd 0 points at the null device while serving: a child process
reads end of file, never the protocol (the SDK claims fd 1 itself).  ``on_eof`` runs when the client closes the
pipe, before the SDK cancels the calls still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

__all__ = ["StdinLines", "run_stdio"]


async def run_stdio(server: MCPServer, on_eof: Callable[[], None]) -> None:
    """``server.run_stdio_async()``, with :class:`StdinLines` as its stdin."""
    low = server._lowlevel_server  # what run_stdio_async() runs, which takes no stdin
    with _claim_stdin() as wire:
        lines = cast("anyio.AsyncFile[str]", StdinLines(wire, on_eof))  # stdio_server iterates over its lines
        async with stdio_server(stdin=lines) as (read, write):
            await low.run(read, write, low.create_initialization_options())


class StdinLines:
    """The lines of ``wire`` as text (UTF-8, undecodable bytes replaced, as the SDK reads them), read by a daemon
    thread at most one line ahead; ``on_eof`` is called once, at the end of the input."""

    def __init__(self, wire: IO[bytes], on_eof: Callable[[], None]) -> None:
        self._wire = wire
        self._on_eof = on_eof
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[bytes] = asyncio.Queue()
        self._room = threading.Semaphore(1)
        self._eof = False
        threading.Thread(target=self._read, name="subagents-serve-stdin", daemon=True).start()

    def _read(self) -> None:
        while True:
            self._room.acquire()
            try:
                line = self._wire.readline()
            except (OSError, ValueError):  # a broken or closed pipe: the end of the input
                line = b""
            try:
                self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
            except RuntimeError:  # the event loop is closed: nobody reads any more
                return
            if not line:
                return

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        if self._eof:
            raise StopAsyncIteration
        line = await self._lines.get()
        if not line:
            self._eof = True
            self._on_eof()
            raise StopAsyncIteration
        self._room.release()
        return line.decode("utf-8", errors="replace")


@contextlib.contextmanager
def _claim_stdin() -> Iterator[IO[bytes]]:
    """The protocol's input on a private descriptor, with fd 0 on the null device until the block ends."""
    try:
        wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # no fd 0: read what sys.stdin reads
        yield sys.stdin.buffer
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(wire, "rb", closefd=False)  # never closed: the reader thread may still be blocked on it
    finally:
        os.dup2(wire, 0)
