"""The ``bash`` tool: one shell command in the workspace, confined by the shell sandbox.

The command runs as ``/bin/bash -c COMMAND`` through ``ctx.sandbox`` (a
:class:`~subagents.sandbox.shell.ShellSandbox`; a default one per workspace when the context has
none), with the workspace root as working directory, the allowlisted environment, stdin closed,
stdout and stderr merged into one pipe that this module owns.  ``ctx.shell_writable`` is ``False``
in plan mode: the workspace is then read-only for the command.  The command leads its own process
group, and that group is what gets killed:

1. on timeout (``timeout_s``, default ``ctx.bash_timeout_s``): SIGTERM to the group, a short grace,
   SIGKILL to whatever is left; the model gets a tool error with the output so far;
2. on cancellation of the awaiting task (a run's timeout, ``close_agent``): the same, then the
   :class:`asyncio.CancelledError` is re-raised;
3. after a normal exit, whatever the shell left running is stopped: with bubblewrap the kernel
   ends every process of the sandbox's PID namespace with the shell; with the other backends the
   group is killed here and the result says so.  A process that left the group (``setsid``) and
   still holds the output open is not waited for beyond :data:`PIPE_GRACE_S`.

What the sandbox undid (a protected path the command created, removed again) is appended to the
result.  Output is capped at :data:`OUTPUT_CAP` characters, keeping the head and the tail.
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import signal
from typing import Annotated

from ..exceptions import ToolError
from ..sandbox.procs import group_alive
from ..sandbox.shell import KILL_GRACE_S, ShellSandbox
from ..sandbox.workspace import Workspace
from .base import ToolCategory, ToolContext, tool
from .schema import Range, show_number

__all__ = ["KILL_GRACE_S", "MAX_TIMEOUT_S", "MIN_TIMEOUT_S", "OUTPUT_CAP", "bash", "default_sandbox"]

MIN_TIMEOUT_S = 0.01
MAX_TIMEOUT_S = 86_400
"""The range of ``timeout_s`` a model may pass (a day at most)."""
OUTPUT_CAP = 30_000
"""Most characters of output a result shows: the first and last half of it, with a marker between."""
PIPE_GRACE_S = 0.5
"""After the command's processes are gone, how long to wait for the end of its output."""
_DEFAULT_SANDBOXES: dict[int, tuple[Workspace, ShellSandbox]] = {}
_DEFAULT_KEEP = 64


def default_sandbox(workspace: Workspace) -> ShellSandbox:
    """The sandbox for a context that has none: one per workspace (the last :data:`_DEFAULT_KEEP` kept)."""
    hit = _DEFAULT_SANDBOXES.get(id(workspace))
    if hit is not None and hit[0] is workspace:
        return hit[1]
    box = ShellSandbox(workspace, workspace.policy)
    _DEFAULT_SANDBOXES[id(workspace)] = (workspace, box)
    while len(_DEFAULT_SANDBOXES) > _DEFAULT_KEEP:
        del _DEFAULT_SANDBOXES[next(iter(_DEFAULT_SANDBOXES))]
    return box


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
async def bash(ctx: ToolContext, command: str,
               timeout_s: Annotated[float | None, Range(MIN_TIMEOUT_S, MAX_TIMEOUT_S)] = None) -> str:
    """Run a shell command with /bin/bash in the workspace root and return its output and exit code.

    stdout and stderr are merged; stdin is closed. Long output keeps its head and tail. The command
    runs in a sandbox: it can read the machine's files but not credentials or the run store, it can
    write only inside the workspace (not in .git, .subagents or other protected paths; in plan mode
    not at all) and in $TMPDIR, and it has no network unless the user allowed it. Every process
    the command starts ends with it, background ones too (`server &`): start a server and use it
    in the same command. The command and all it started are killed when it runs past its timeout.

    Args:
        command: the shell command (bash syntax: pipes, &&, redirections and so on work).
        timeout_s: seconds before the command is killed; the agent's default applies when omitted.
    """
    if not command.strip():
        raise ToolError("command is empty; pass the shell command to run.")
    limit = ctx.bash_timeout_s if timeout_s is None else timeout_s
    if not (isinstance(limit, (int, float)) and limit > 0 and (isinstance(limit, int) or math.isfinite(limit))):
        raise ToolError(f"timeout_s must be a positive number of seconds, got {show_number(limit)}.")
    if timeout_s is not None and not MIN_TIMEOUT_S <= timeout_s <= MAX_TIMEOUT_S:
        raise ToolError(f"timeout_s must be from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:,} seconds, got "
                        f"{show_number(timeout_s)}.")
    _check_command(command)
    sandbox: ShellSandbox = ctx.sandbox if ctx.sandbox is not None else default_sandbox(ctx.workspace)
    loop = asyncio.get_running_loop()
    rfd, wfd = os.pipe()
    pipe = os.fdopen(rfd, "rb", buffering=0)
    try:
        proc = await sandbox.spawn(
            ["/bin/bash", "-c", command], writable=ctx.shell_writable, cwd=ctx.workspace.root,
            stdin=asyncio.subprocess.DEVNULL, stdout=wfd, stderr=wfd,
        )  # fmt: skip
    except OSError as e:
        pipe.close()
        if e.errno != errno.E2BIG:
            raise
        raise ToolError(f"the command is too long for the system to run ({len(command):,} characters): write "
                        "the script to a file with write_file and run it with `bash FILE`.") from None
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
            await sandbox.kill(proc)
            await asyncio.wait([out.closed], timeout=PIPE_GRACE_S)
            raise ToolError(
                f"The command was killed after {limit:g} s because it ran past its timeout; output so far:\n"
                f"{out.text().rstrip() or '(no output)'}\n\nPass a larger timeout_s, or run long jobs in the "
                "background with their output redirected to a file."
                + _notes(sandbox.finish(proc))
            ) from None
        if group_alive(proc.pid):  # background processes the shell left (bubblewrap's end with it)
            await sandbox.kill(proc)
            note = ("\n[background processes the command left running were stopped: every process a command "
                    "starts ends with it]")
        done, _ = await asyncio.wait([out.closed], timeout=PIPE_GRACE_S)
        if not done:
            note += ("\n[the output may be incomplete: a process that left the command's process group "
                     "still holds it open]")
    except asyncio.CancelledError:
        await sandbox.kill(proc)
        raise
    finally:
        if transport is not None:
            transport.close()
        else:
            pipe.close()
    text = out.text().rstrip("\n") or "(no output)"
    notes = sandbox.finish(proc)
    hint = sandbox.hint(text) if code != 0 or notes else None
    return f"{text}{note}{_notes([*notes, hint] if hint else notes)}\n{_exit_line(code)}"


def _check_command(command: str) -> None:
    """A :class:`ToolError` for a command no process can be given (a NUL, a character with no bytes)."""
    if "\0" in command:
        raise ToolError("the command contains a NUL character, which no command line can hold; remove it (to "
                        "write a NUL byte, use printf '\\0').")
    try:
        os.fsencode(command)
    except UnicodeEncodeError as e:
        raise ToolError(f"the command contains {command[e.start]!r} at position {e.start}, a character with no "
                        "UTF-8 form (a lone surrogate); remove it.") from None


def _notes(notes: list[str]) -> str:
    return "".join(f"\n[{n}]" for n in notes)
