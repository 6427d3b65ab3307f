"""Small seccomp filters for the Landlock backend: sockets, ``prlimit``, and ``truncate`` before ABI 3.

Landlock (up to ABI 7) restricts TCP ``bind``/``connect`` only: UDP, raw and netlink sockets stay
open, ``connect`` to a *pathname* UNIX socket outside the sandbox (``/run/docker.sock``, a git
credential-cache daemon, the user's D-Bus session bus, whose systemd runs any command outside the sandbox:
``systemd-run --user``) is not restricted at all, and ``io_uring``'s socket operations bypass
seccomp.  Without a network namespace there is no loopback of its own to keep usable either (TCP to
127.0.0.1 is refused by Landlock like any other), so the Landlock backend also installs this filter (in the
child, after ``PR_SET_NO_NEW_PRIVS``):

- with the network off, ``socket(...)`` fails with ``EACCES``, whatever the family; with it on, a UNIX socket's
  (``AF_UNIX``: ``socketpair``, pipes and the descriptors a command inherits keep working either way);
- ``io_uring_setup`` fails with ``ENOSYS`` (programs fall back to ordinary system calls);
- system calls of another ABI (32-bit ``socketcall``, x32) fail with ``ENOSYS``.

Only x86-64 and aarch64 are described; elsewhere :func:`socket_filter` returns ``None`` and only
Landlock's TCP rules apply."""

from __future__ import annotations

import ctypes
import errno
import platform
from collections.abc import Callable

from .landlock import _libc

__all__ = ["command_filters", "no_truncate_filter", "socket_filter"]

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # offsets in struct seccomp_data (the low half of args[0])
_AF_UNIX = 1
_X32_BIT = 0x40000000

# machine: (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup, has an x32 range)
_ARCHES = {"x86_64": (0xC000003E, 41, 425, True), "aarch64": (0xC00000B7, 198, 425, False)}


class _Insn(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32))


class _Prog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn)))


def _program(arch: int, nr_socket: int, nr_uring: int, x32: bool, *, unix_only: bool = False) -> bytes:
    """The filter (``struct sock_filter`` s): ``socket`` refused (``unix_only``: an ``AF_UNIX`` one only)."""
    from .signals import assemble

    prog: list[tuple[int, str | None, str | None, int] | str] = [
        (_LD_ABS_W, None, None, _OFF_ARCH), (_JEQ_K, None, "nosys", arch),  # another ABI -> ENOSYS
        (_LD_ABS_W, None, None, _OFF_NR), (_JGE_K, "nosys", None, _X32_BIT if x32 else 0xFFFFFFFF),  # x32 -> ENOSYS
        (_JEQ_K, "socket", None, nr_socket), (_JEQ_K, "nosys", "allow", nr_uring),  # io_uring_setup -> ENOSYS
        "socket"]
    if unix_only:
        prog += [(_LD_ABS_W, None, None, _OFF_ARG0), (_JEQ_K, "access", "allow", _AF_UNIX)]
    prog += ["access", (_RET_K, None, None, _RET_ERRNO | errno.EACCES), "allow", (_RET_K, None, None, _RET_ALLOW),
             "nosys", (_RET_K, None, None, _RET_ERRNO | errno.ENOSYS)]
    return bytes.fromhex(assemble(prog))


def socket_filter(*, unix_only: bool = False) -> Callable[[], None] | None:
    """A function that installs the filter in the calling process (for a ``preexec_fn``), or ``None``;
    ``unix_only``: the network is on, only new UNIX sockets are refused.

    Everything is allocated here, in the parent; the returned function makes one ``prctl`` call.
    """
    spec = _ARCHES.get(platform.machine())
    return None if spec is None else _installer(_program(*spec, unix_only=unix_only))


_TRUNCATE: dict[str, tuple[tuple[int, tuple[int, ...]], ...]] = {
    "x86_64": ((0xC000003E, (76, _X32_BIT | 76)), (0x40000003, (92, 193))),
    "aarch64": ((0xC00000B7, (45,)), (0x40000028, (92, 193))),
    "riscv64": ((0xC00000F3, (45,)), (0x400000F3, (45,))),
}
"""Machine: ``(AUDIT_ARCH_*, the numbers of truncate (and truncate64))`` for each ABI a process can use there."""


def no_truncate_filter(machine: str | None = None) -> bytes | None:
    """A filter (``struct sock_filter`` s) under which ``truncate(path)`` fails with ``EPERM``, ``None`` elsewhere.

    Landlock handles truncation only from ABI 3 (Linux 6.2): before, ``truncate(2)`` by path was never checked, and
    a command could empty any file of the user's — the run store, ``.git``, ``~/.bashrc`` — with
    ``os.truncate(path, 0)``.  Opening a file with ``O_TRUNC`` and ``ftruncate`` on a descriptor opened for writing
    are checked as writes (``truncate -s``, ``> file`` keep working where a command may write); what calls
    ``truncate(2)`` itself (Go's ``os.Truncate``, Python's ``os.truncate`` of a path) gets ``EPERM`` there.
    """
    from .signals import assemble

    abis = _TRUNCATE.get((machine or platform.machine()).lower())
    if abis is None:
        return None
    prog: list[tuple[int, str | None, str | None, int] | str] = []
    for i, (arch, nrs) in enumerate(abis):
        nxt = f"abi{i + 1}" if i + 1 < len(abis) else "allow"
        prog += [f"abi{i}", (_LD_ABS_W, None, None, _OFF_ARCH), (_JEQ_K, None, nxt, arch),
                 (_LD_ABS_W, None, None, _OFF_NR), *((_JEQ_K, "eperm", None, nr) for nr in nrs),
                 (_JEQ_K, "allow", "allow", 0)]
    prog += ["allow", (_RET_K, None, None, _RET_ALLOW), "eperm", (_RET_K, None, None, _RET_ERRNO | errno.EPERM)]
    return bytes.fromhex(assemble(prog))


def _installer(data: bytes) -> Callable[[], None]:
    """A function that installs the filter ``data`` in the calling process (everything allocated here)."""
    n = len(data) // ctypes.sizeof(_Insn)
    array = (_Insn * n).from_buffer_copy(data)
    prog = _Prog(n, ctypes.cast(array, ctypes.POINTER(_Insn)))
    prctl = _libc().prctl

    def install() -> None:
        keep = array  # the filter must stay alive until the call
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0 or keep is None:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")

    return install


def command_filters(*, network: bool, handles_truncate: bool = True) -> Callable[[], None] | None:
    """What a Landlock command gets: :func:`socket_filter` (all new sockets refused with the network off, UNIX ones
    with it on), a filter refusing ``prlimit`` on another process (Landlock does not cover it: a command could set
    the runtime's limits, e.g. ``--nofile=0`` or ``--cpu=1``, or end its reaper, :mod:`.supervisor`), and
    :func:`no_truncate_filter` unless Landlock ``handles_truncate`` (ABI 3 and later); ``None`` where none is
    known."""
    from .supervisor import no_prlimit_filter

    parts = [socket_filter(unix_only=network)]
    parts += [_installer(d) for d in (no_prlimit_filter(), None if handles_truncate else no_truncate_filter()) if d]
    steps = [p for p in parts if p is not None]
    if not steps:
        return None

    def install() -> None:
        for step in steps:
            step()

    return install
