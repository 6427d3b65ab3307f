"""A small seccomp filter for the Landlock backend: no new sockets when the network is off.

Landlock (up to ABI 7) restricts TCP ``bind``/``connect`` only: UDP, raw and netlink sockets stay
open, ``connect`` to a *pathname* UNIX socket outside the sandbox (``/run/docker.sock``, a git
credential-cache daemon) is not restricted at all, and ``io_uring``'s socket operations bypass
seccomp.  Without a network namespace there is no loopback of its own to keep usable either (TCP to
127.0.0.1 is refused by Landlock like any other), so with the network off the Landlock backend also
installs this filter (in the child, after ``PR_SET_NO_NEW_PRIVS``):

- ``socket(...)`` fails with ``EACCES``, whatever the family (``socketpair``, pipes and the
  descriptors a command inherits keep working);
- ``io_uring_setup`` fails with ``ENOSYS`` (programs fall back to ordinary system calls);
- system calls of another ABI (32-bit ``socketcall``, x32) fail with ``ENOSYS``.

Only x86-64 and aarch64 are described; elsewhere :func:`socket_filter` returns ``None`` and only
Landlock's TCP rules apply.
"""

from __future__ import annotations

import ctypes
import errno
import platform
from collections.abc import Callable

from .landlock import _libc

__all__ = ["command_filters", "socket_filter"]

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_OFF_NR, _OFF_ARCH = 0, 4  # offsets in struct seccomp_data
_X32_BIT = 0x40000000

# machine: (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup, has an x32 range)
_ARCHES = {"x86_64": (0xC000003E, 41, 425, True), "aarch64": (0xC00000B7, 198, 425, False)}


class _Insn(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32))


class _Prog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn)))


def _program(arch: int, nr_socket: int, nr_uring: int, x32: bool) -> list[tuple[int, int, int, int]]:
    """The filter as ``(code, jt, jf, k)`` instructions; a jump lands ``1 + offset`` further on."""
    deny_access, deny_nosys = 7, 8  # indexes of the return instructions
    return [
        (_LD_ABS_W, 0, 0, _OFF_ARCH),
        (_JEQ_K, 0, deny_nosys - 2, arch),                               # 1: another ABI -> ENOSYS
        (_LD_ABS_W, 0, 0, _OFF_NR),
        (_JGE_K, deny_nosys - 4, 0, _X32_BIT if x32 else 0xFFFFFFFF),    # 3: x32 numbers -> ENOSYS
        (_JEQ_K, deny_access - 5, 0, nr_socket),                         # 4: socket -> EACCES
        (_JEQ_K, deny_nosys - 6, 0, nr_uring),                           # 5: io_uring_setup -> ENOSYS
        (_RET_K, 0, 0, _RET_ALLOW),                                      # 6
        (_RET_K, 0, 0, _RET_ERRNO | errno.EACCES),                       # 7
        (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),                       # 8
    ]


def socket_filter() -> Callable[[], None] | None:
    """A function that installs the filter in the calling process (for a ``preexec_fn``), or ``None``.

    Everything is allocated here, in the parent; the returned function makes one ``prctl`` call.
    """
    spec = _ARCHES.get(platform.machine())
    if spec is None:
        return None
    insns = _program(*spec)
    array = (_Insn * len(insns))(*(_Insn(*i) for i in insns))
    prog = _Prog(len(insns), ctypes.cast(array, ctypes.POINTER(_Insn)))
    prctl = _libc().prctl

    def install() -> None:
        keep = array  # the filter must stay alive until the call
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0 or keep is None:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")

    return install


def command_filters(*, network: bool) -> Callable[[], None] | None:
    """What a Landlock command gets: :func:`socket_filter` with the network off, and always a filter refusing
    ``prlimit`` on another process (Landlock does not cover it: a command could set the runtime's limits, e.g.
    ``--nofile=0`` or ``--cpu=1``, or end its reaper, :mod:`.supervisor`); ``None`` where neither is known."""
    from .supervisor import no_prlimit_filter

    sockets = None if network else socket_filter()
    data = no_prlimit_filter()
    if data is None:
        return sockets
    n = len(data) // ctypes.sizeof(_Insn)
    array = (_Insn * n).from_buffer_copy(data)
    prog = _Prog(n, ctypes.cast(array, ctypes.POINTER(_Insn)))
    prctl = _libc().prctl

    def install() -> None:
        if sockets is not None:
            sockets()
        keep = array  # the filter must stay alive until the call
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0 or keep is None:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")

    return install
