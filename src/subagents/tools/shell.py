"""The ``bash`` tool: one shell command in the workspace, in its own process group.

The command runs as ``/bin/bash -c COMMAND`` with the workspace root as working directory, stdin
closed, stdout and stderr merged into one pipe that this module owns.  It is started with
``start_new_session=True``, so it and everything it spawns share one process group, and that group
is what gets killed:

1. on timeout (``timeout_s``, default ``ctx.bash_timeout_s``): SIGTERM to the group, a short grace,
   SIGKILL to whatever is left; the model gets a tool error with the output so far;
2. on cancellation of the awaiting task (a run's timeout, ``close_agent``): the same, then the
   :class:`asyncio.CancelledError` is re-raised;
3. after a normal exit, if background processes still hold the output pipe open (``server &``),
   so that waiting for the end of the output would hang: the group is killed and the result says so.

Background processes that let go of the pipe (``server > log 2>&1 &``) are left running.
Output is capped at :data:`OUTPUT_CAP` characters, keeping the head and the tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from ..exceptions import ToolError
from .base import ToolCategory, ToolContext, tool

__all__ = ["KILL_GRACE_S", "OUTPUT_CAP", "bash"]

OUTPUT_CAP = 30_000
"""Most characters of output a result shows: the first and last half of it, with a marker between."""
KILL_GRACE_S = 1.0
"""How long a process group gets between SIGTERM and SIGKILL."""
PIPE_GRACE_S = 0.5
"""After the shell exits, how long to wait for the end of its output before killing leftovers."""
_POLL_S = 0.01
_PROC = Path("/proc")


class _Output(asyncio.Protocol):
    """Collects a pipe's bytes, keeping only the head and a rolling tail of ``cap`` bytes in all."""

    def __init__(self, cap: int) -> None:
        self.half = cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if self.total <= len(self.head) + len(self.tail):
            return head + self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        return (
            head
            + f"\n\n[... {cut:,} bytes of output omitted from the middle ({self.total:,} in all); redirect the "
            "output to a file and use grep or read_file on it to see everything ...]\n\n"
            + self.tail.decode("utf-8", errors="replace")
        )


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies waiting for a reaper do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not _PROC.is_dir():
        return True
    with os.scandir(_PROC) as it:
        for entry in it:
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp ...
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
    return False


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, wait up to :data:`KILL_GRACE_S` for it to go, SIGKILL the rest, reap."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + KILL_GRACE_S
    try:
        # No event tells when a whole process group is gone; poll briefly, bounded by the grace.
        while _group_alive(pgid) and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(_POLL_S)
    finally:
        _signal_group(pgid, signal.SIGKILL)  # also when cancelled again during the grace
        await _reap(proc)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Wait for the killed shell to be reaped even if the caller is cancelled again meanwhile.

    A reap abandoned halfway leaves a ``Popen`` that believes its process still runs; after SIGKILL
    the wait is short, so it is finished first and the cancellation re-raised after.
    """
    waiter = asyncio.ensure_future(proc.wait())
    cancelled = False
    while not waiter.done():
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


def _exit_line(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"exit code {code} (the shell was killed by {name})"
    return f"exit code {code}"


# ``tool(...)`` is typed ``Any``; name the decorator's real type so the tool stays typed.
@tool(category=ToolCategory.EXECUTE)
async def bash(ctx: ToolContext, command: str, timeout_s: float | None = None) -> str:
    """Run a shell command with /bin/bash in the workspace root and return its output and exit code.

    stdout and stderr are merged; stdin is closed. Long output keeps its head and tail. The command
    and every process it starts are killed when it runs past its timeout. To keep a server running,
    start it in the background with its output redirected to a file (`cmd > log 2>&1 &`).

    Args:
        command: the shell command (bash syntax: pipes, &&, redirections and so on work).
        timeout_s: seconds before the command is killed; the agent's default applies when omitted.
    """
    if not command.strip():
        raise ToolError("command is empty; pass the shell command to run.")
    limit = ctx.bash_timeout_s if timeout_s is None else timeout_s
    if limit <= 0:
        raise ToolError(f"timeout_s must be a positive number of seconds, got {timeout_s}.")
    loop = asyncio.get_running_loop()
    rfd, wfd = os.pipe()
    pipe = os.fdopen(rfd, "rb", buffering=0)
    try:
        proc = await asyncio.create_subprocess_exec(
            "/bin/bash", "-c", command,
            cwd=ctx.workspace.root, stdin=asyncio.subprocess.DEVNULL, stdout=wfd, stderr=wfd,
            start_new_session=True,
        )  # fmt: skip
    except BaseException:
        pipe.close()
        raise
    finally:
        os.close(wfd)
    out = _Output(OUTPUT_CAP)
    transport: asyncio.ReadTransport | None = None
    note = ""
    try:
        transport, _ = await loop.connect_read_pipe(lambda: out, pipe)
        try:
            async with asyncio.timeout(limit):
                code = await proc.wait()
        except TimeoutError:
            await _kill_group(proc)
            await asyncio.wait([out.closed], timeout=PIPE_GRACE_S)
            raise ToolError(
                f"The command was killed after {limit:g} s because it ran past its timeout; output so far:\n"
                f"{out.text().rstrip() or '(no output)'}\n\nPass a larger timeout_s, or run long jobs in the "
                "background with their output redirected to a file."
            ) from None
        done, _ = await asyncio.wait([out.closed], timeout=PIPE_GRACE_S)
        if not done:
            await _kill_group(proc)
            await asyncio.wait([out.closed], timeout=PIPE_GRACE_S)
            note = (
                "\n[background processes that kept the output open were stopped; to keep one running, "
                "redirect its output: `cmd > log 2>&1 &`]"
            )
    except asyncio.CancelledError:
        await _kill_group(proc)
        raise
    finally:
        if transport is not None:
            transport.close()
        else:
            pipe.close()
    text = out.text().rstrip("\n") or "(no output)"
    return f"{text}{note}\n{_exit_line(code)}"
