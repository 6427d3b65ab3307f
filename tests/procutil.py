"""Process-table helpers for tests that check no process outlives its tool call.

Inside the shell sandbox (bubblewrap) ``$$`` and ``$!`` are PIDs of the sandbox's own namespace:
tests find a command's processes on the host by a unique marker in their command line instead
(:func:`marker`, :func:`marked`, :func:`none_marked`).
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

_MARKS = itertools.count(1)


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def all_dead(pids: list[int], timeout: float = 5.0) -> bool:
    """True once no pid is alive; polls the process table for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def marker() -> str:
    """A unique ``sleep`` duration to put in a command, to find its processes with :func:`marked`."""
    return f"{5000 + next(_MARKS) + os.getpid() % 1000 / 1000:.3f}"


def marked(mark: str) -> list[int]:
    """The live (not zombie) processes whose command line holds ``mark``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if mark.encode() in cmdline and alive(int(name)):
                out.append(int(name))
    return out


def none_marked(mark: str, timeout: float = 5.0) -> bool:
    """True once no live process holds ``mark`` in its command line; polls for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while marked(mark):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


SANDBOX_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
"""A Python that commands inside the shell sandbox can run: the base interpreter, not the virtualenv's, which may
live under the host's /tmp (a CI clone) that the sandbox replaces with a private one.  Standard library only."""
