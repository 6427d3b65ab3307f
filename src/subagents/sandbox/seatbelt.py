"""macOS Seatbelt: a ``sandbox-exec`` profile for the same policy as the Linux backends.

:func:`seatbelt_profile` writes the profile (SBPL; the last matching rule wins):

- ``(deny default)``, then what programs need to run at all: exec, fork, signals to processes of
  the same sandbox only, sysctl and Mach look-ups, reading its own process info, pseudo-terminals;
- read everywhere but a private home (:mod:`.home`: the workspace and what commands need read back), then deny
  reading each hidden path (``subpath`` for directories, ``literal``
  and the ``-wal``/``-shm`` names for the store files), so a hidden file created later stays hidden;
- write in the workspace (unless read-only mode), the temp dir and ``/dev/null``-like devices,
  then deny writing each protected path (``subpath``: a protected path that does not exist yet
  cannot be created either, unlike with bubblewrap), and each directory between the workspace and
  a protected or hidden path itself (``literal``: what it holds stays writable; it cannot be renamed,
  removed or replaced by a symlink to a directory of the command's, whose files the rules, checked
  on resolved paths, would not cover: bubblewrap pins these directories the same way);
- network: ``(allow network*)`` only with ``network``; UNIX sockets outside the sandbox are
  denied with the rest (``network-outbound`` covers ``connect`` to a socket path).

This module has only been unit-tested for its text: no macOS machine runs this project's tests.
The runner therefore uses it only after a probe (``sandbox-exec`` with a profile of the same shape
must run ``/usr/bin/true``); when the probe fails it refuses to run commands, with a message, rather
than run them unconfined.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["SANDBOX_EXEC", "seatbelt_argv", "seatbelt_profile"]

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
_DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper")


def _q(path: Path | str) -> str:
    """A path as an SBPL string literal."""
    text = os.fspath(path)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _filters(paths: Iterable[Path]) -> list[str]:
    # ``subpath`` matches the path itself and all it holds, whether it exists yet or not.
    return [f"(subpath {_q(p)})" for p in dict.fromkeys(paths)]


def _parents(root: Path, paths: Iterable[Path]) -> list[str]:
    """The directories strictly between ``root`` and each of ``paths`` that lies beneath it."""
    base = os.fspath(root)
    prefix = base if base.endswith("/") else base + "/"
    out: dict[str, None] = {}
    for p in paths:
        d = os.path.dirname(os.fspath(p))
        while d.startswith(prefix):
            out[d] = None
            d = os.path.dirname(d)
    return sorted(out)


def seatbelt_profile(*, root: Path, writable: bool, readonly: Iterable[Path], hidden: Iterable[Path],
                     temp_dir: Path, network: bool, home: Path | None = None, home_read: Iterable[Path] = ()) -> str:
    """The ``sandbox-exec`` profile text confining a command to the workspace ``root``; ``home``: a private home
    directory, of which only the workspace and ``home_read`` may be read (:mod:`.home`)."""
    lines = [
        "(version 1)",
        "(deny default)",
        "(allow process-exec)",
        "(allow process-fork)",
        "(allow process-info* (target self))",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        "(allow mach-lookup)",
        "(allow ipc-posix-shm-read-data)",
        "(allow pseudo-tty)",
        "(allow file-ioctl (literal \"/dev/tty\") (regex #\"^/dev/ttys[0-9]+$\"))",
        "(allow file-read*)",
    ]
    if home is not None:  # (rules see resolved paths: what a link read back leads to)
        back = _filters([root, *(Path(os.path.realpath(r)) for r in home_read)])
        lines += [f"(deny file-read* (subpath {_q(home)}))", "(allow file-read* " + " ".join(back) + ")"]
    hide = _filters(hidden)
    if hide:
        lines.append("(deny file-read* " + " ".join(hide) + ")")
    writes = [f"(subpath {_q(temp_dir)})", *(f"(literal {_q(d)})" for d in _DEVICES)]
    if writable:
        writes.insert(0, f"(subpath {_q(root)})")
    lines.append("(allow file-write* " + " ".join(writes) + ")")
    readonly, hidden = list(readonly), list(hidden)
    deny_write = _filters([*readonly, *hidden])
    if deny_write:
        lines.append("(deny file-write* " + " ".join(deny_write) + ")")
    pins = [f"(literal {_q(d)})" for d in _parents(root, [*readonly, *hidden])]
    if writable and pins:
        lines.append("(deny file-write* " + " ".join(pins) + ")")
    if network:
        lines.append("(allow network*)")
        lines.append("(allow system-socket)")
    return "\n".join(lines) + "\n"


def seatbelt_argv(profile: str) -> list[str]:
    """The command-line prefix that runs a command under ``profile``."""
    return [SANDBOX_EXEC, "-p", profile]
