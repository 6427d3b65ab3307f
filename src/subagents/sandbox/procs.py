"""Process helpers: signal a group, tell whether any member still runs, reap a killed leader, and find
the processes of a command that left its group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

__all__ = ["TAG_VAR", "group_alive", "kill_tagged", "reap", "signal_group"]

_PROC = Path("/proc")


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pgid``; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
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


async def reap(proc: asyncio.subprocess.Process) -> None:
    """Wait for a killed process to be reaped even if the caller is cancelled again meanwhile.

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


TAG_VAR = "SUBAGENTS_COMMAND"
"""Set in the environment of commands that run without a PID namespace: how :func:`kill_tagged`
finds the processes that left the command's process group (``setsid``, daemons)."""


def kill_tagged(tag: str, since: int = 0) -> list[int]:
    """SIGKILL every process outside group ``since`` whose environment holds ``TAG_VAR=tag``.

    Best effort: a process that cleared its environment (``env -i``) is not found.  Only PIDs from
    ``since`` on are read (PIDs grow until they wrap around; after a wrap, all are read).  Returns
    the PIDs killed, after waiting briefly for them to go.
    """
    needle = f"\0{TAG_VAR}={tag}\0".encode()
    try:
        last = int(_read(b"/proc/sys/kernel/ns_last_pid") or b"0")
    except ValueError:
        last = 0
    floor = since if since and last >= since else 0
    me = os.getpid()
    killed = []
    for name in os.listdir(b"/proc"):  # bytes and os.* calls: pathlib costs ~10 us per file here
        if not name.isdigit() or int(name) < floor or int(name) in (since, me):
            continue
        data = _read(b"/proc/" + name + b"/environ")
        if data is None or needle not in b"\0" + data + b"\0":
            continue
        pid = int(name)
        try:
            if os.getpgid(pid) == since:
                continue
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        killed.append(pid)
    for _ in range(50):  # a killed process lingers for a moment; do not report it as alive
        if not any(_running(p) for p in killed):
            break
        time.sleep(0.002)
    return killed


def _read(path: bytes) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"
