"""Signals of a Landlock command on a kernel without Landlock's signal scope (ABI < 6, Linux < 6.12).

There a command could signal any process of the user: ``kill -9 -1`` or ``pkill python`` ended the runtime (and
the user's other programs), ``kill -9 $PPID`` its reaper (then nothing stopped what it left behind).  So, on such
kernels, the command gets a seccomp filter whose signal calls a process of its own decides on
(``SECCOMP_RET_USER_NOTIF``; the handler is part of :data:`~.supervisor.REAPER_SCRIPT`):

- ``kill``, ``tkill``, ``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo`` go to the handler, which lets the
  call proceed only when its target is the command's own: a process (or thread) descending from the command's
  reaper (every process the command starts does, however it detaches: the reaper is their subreaper), the
  command's own process group (``kill 0``), or a group whose members all are; ``kill(-1)`` (every process) is
  refused, a target that does not exist is ``ESRCH``, anything else ``EPERM``;
- ``fcntl(F_SETOWN, pid)`` goes to the handler as well (the owner of a file gets ``SIGIO``, or with ``F_SETSIG``
  any signal, when I/O is possible on it: ``F_SETOWN`` to the runtime's pid, then a write, was a ``kill``);
  ``F_SETOWN_EX`` and the ``ioctl`` s ``FIOSETOWN`` and ``SIOCSPGRP``, whose pid the filter cannot see, fail with
  ``EPERM``;
- ``pidfd_send_signal`` fails with ``ENOSYS`` (a pidfd, or a ``/proc/<pid>`` directory, names any process; the
  programs that use it fall back to ``kill``).

Should the handler be gone (the command may signal it: it is the command's own), every such call fails
(``ENOSYS``): the filter fails closed.  Described for x86-64 (and its x32 and i386 ABIs), aarch64 (and 32-bit
ARM) and riscv64; elsewhere :func:`signal_filter` returns ``None``.
"""

from __future__ import annotations

import errno
import platform
import struct
from functools import cache
from typing import NamedTuple

__all__ = ["SECCOMP_NR", "fcntl_calls", "signal_filter"]

_X32 = 0x40000000


class _Abi(NamedTuple):
    arch: int  # AUDIT_ARCH_*
    signals: tuple[int, ...]  # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo: to the handler
    pidfd: tuple[int, ...]  # pidfd_send_signal: ENOSYS
    fcntl: tuple[int, ...]  # F_SETOWN to the handler, F_SETOWN_EX refused
    ioctl: tuple[int, ...]  # FIOSETOWN, SIOCSPGRP refused


_GENERIC = _Abi(0, (129, 130, 131, 138, 240), (424,), (25,), (29,))
_ARM32 = _Abi(0x40000028, (37, 238, 268, 178, 363), (424,), (55, 221), (54,))
_ABIS: dict[str, tuple[_Abi, ...]] = {
    "x86_64": (_Abi(0xC000003E, (62, 200, 234, 129, 297, *(_X32 | n for n in (62, 200, 234, 524, 536))),
                    (424, _X32 | 424), (72, _X32 | 72), (16, _X32 | 514)),
               _Abi(0x40000003, (37, 238, 270, 178, 335), (424,), (55, 221), (54,))),
    "aarch64": (_GENERIC._replace(arch=0xC00000B7), _ARM32),
    "riscv64": (_GENERIC._replace(arch=0xC00000F3), _GENERIC._replace(arch=0x400000F3)),
}
_ABIS["amd64"], _ABIS["arm64"] = _ABIS["x86_64"], _ABIS["aarch64"]
SECCOMP_NR = {"x86_64": 317, "amd64": 317, "aarch64": 277, "arm64": 277, "riscv64": 277}
"""The ``seccomp`` system call's number (the handler needs ``SECCOMP_FILTER_FLAG_NEW_LISTENER``)."""

_LD, _JEQ, _RET = 0x20, 0x15, 0x06
_RETS = {"allow": 0x7FFF0000, "notify": 0x7FC00000, "enosys": 0x00050000 | errno.ENOSYS,
         "eperm": 0x00050000 | errno.EPERM}
_F_SETOWN, _F_SETOWN_EX, _FIOSETOWN, _SIOCSPGRP = 8, 15, 0x8901, 0x8902
_ARG1 = 24  # offset of the low half of args[1] in struct seccomp_data (little-endian)


def _machine(machine: str | None) -> tuple[_Abi, ...] | None:
    return _ABIS.get((machine or platform.machine()).lower())


@cache
def fcntl_calls(machine: str | None = None) -> str:
    """The ``fcntl`` system calls of ``machine`` as ``arch/nr,...`` (decimal): the handler reads their target from
    the third argument (``F_SETOWN``'s pid), every other call's from the first."""
    return ",".join(f"{abi.arch}/{nr}" for abi in _machine(machine) or () for nr in abi.fcntl)


@cache
def signal_filter(machine: str | None = None) -> str | None:
    """The filter (``struct sock_filter`` s, in hex) for ``machine`` (this one by default), or ``None`` (cached:
    one per command otherwise, ~20 µs)."""
    abis = _machine(machine)
    if abis is None:
        return None
    # (code, jump if true, jump if false, k) with labels; a block per ABI, then the shared ends
    prog: list[tuple[int, str | None, str | None, int] | str] = []
    for i, abi in enumerate(abis):
        nxt = f"abi{i + 1}" if i + 1 < len(abis) else "allow"
        prog += [f"abi{i}", (_LD, None, None, 4), (_JEQ, None, nxt, abi.arch), (_LD, None, None, 0)]
        for label, calls in (("notify", abi.signals), ("enosys", abi.pidfd), ("fcntl", abi.fcntl),
                             ("ioctl", abi.ioctl)):
            prog += [(_JEQ, label, None, nr) for nr in calls]
        prog.append((_JEQ, "allow", "allow", 0))  # a jump either way: the ABI matched, no other block applies
    prog += ["fcntl", (_LD, None, None, _ARG1), (_JEQ, "notify", None, _F_SETOWN),
             (_JEQ, "eperm", "allow", _F_SETOWN_EX),
             "ioctl", (_LD, None, None, _ARG1), (_JEQ, "eperm", None, _FIOSETOWN),
             (_JEQ, "eperm", "allow", _SIOCSPGRP)]
    for name, value in _RETS.items():
        prog += [name, (_RET, None, None, value)]
    return _assemble(prog)


def _assemble(prog: list[tuple[int, str | None, str | None, int] | str]) -> str:
    """Labels resolved to offsets (a jump lands ``1 + offset`` further on; no label: the next instruction)."""
    at: dict[str, int] = {}
    insns: list[tuple[int, str | None, str | None, int]] = []
    for item in prog:
        if isinstance(item, str):
            at[item] = len(insns)
        else:
            insns.append(item)
    out = b""
    for pc, (code, jt, jf, k) in enumerate(insns):
        t, f = (0 if j is None else at[j] - pc - 1 for j in (jt, jf))
        if not (0 <= t < 256 and 0 <= f < 256):
            raise ValueError("a jump of the signal filter is out of range")
        out += struct.pack("<HBBI", code, t, f, k)
    return out.hex()
