"""What a Landlock command may do to other processes (signals before Landlock's scope, ABI < 6; scheduling), and
where it may change modes, owners, times and attributes (``chmod``, ``chown``, ``utimensat``, ``setxattr``...).

Landlock scopes signals only from ABI 6 (Linux 6.12): before that a command could signal every process of the user
(``kill -9 -1`` or ``pkill python`` ended the runtime, ``kill -9 $PPID`` its reaper, then nothing stopped what it
left behind).  And no ABI covers scheduling: ``renice -n 19 -p <runtime>`` or ``-u $USER`` (every process of the
user), ``taskset -p 1 <runtime>``, ``chrt --idle -p 0 <runtime>``, ``ionice -c3 -p <runtime>`` all worked (an
unprivileged process may lower, never raise back, the priority of another of its user's).  So a Landlock command
gets a seccomp filter whose calls on another process the command's **reaper** decides on
(``SECCOMP_RET_USER_NOTIF``; :data:`~.supervisor.REAPER_SCRIPT`; the reaper is outside the filter):

- ``setpriority``, ``ioprio_set``, ``sched_setparam``, ``sched_setscheduler``, ``sched_setaffinity`` and
  ``sched_setattr`` on the caller (pid 0, its own process group) pass in the filter (``nice``, ``taskset cmd``,
  ``chrt``, ``ionice cmd``); on the user (``PRIO_USER``, ``IOPRIO_WHO_USER``: every process of the user) they fail
  with ``EPERM``; on another process or group they go to the reaper;
- before ABI 6, ``kill``, ``tkill``, ``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo`` go to the reaper too,
  and ``fcntl(F_SETOWN, pid)`` (the owner of a file gets ``SIGIO``, or with ``F_SETSIG`` any signal, when I/O is
  possible on it: ``F_SETOWN`` to the runtime's pid, then a write, was a ``kill``); ``F_SETOWN_EX`` and the
  ``ioctl`` s ``FIOSETOWN`` and ``SIOCSPGRP``, whose pid the filter cannot see, fail with ``EPERM``;
  ``pidfd_send_signal`` fails with ``ENOSYS`` (a pidfd, or a ``/proc/<pid>`` directory, names any process; the
  programs that use it fall back to ``kill``);
- the ``ioctl`` s that set a file's flags (``FS_IOC_SETFLAGS``, ``FS_IOC_FSSETXATTR``: ``chattr``) fail with
  ``EPERM``: Landlock does not check them, and an owner may set most flags on a file it may only read (``chattr
  +d`` keeps a file out of ``dump`` backups, ``+S`` slows every write to it) — the filter cannot tell where the
  file is, so ``chattr`` fails in the workspace too;
- a ``userfaultfd`` that would handle the kernel's faults too (without ``UFFD_USER_MODE_ONLY``, or from
  ``/dev/userfaultfd``) fails with ``EPERM``: the reaper reads the paths of the calls it carries out from the
  command's memory, and a page whose fault the command never answers would hold the reaper for good (the kernel
  allows one only to a privileged process, or where ``vm.unprivileged_userfaultfd`` is 1, or, before Landlock ABI 5,
  to a root runtime's command through ``/dev/userfaultfd``);
- ``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``, the ``chown`` calls, ``utimensat`` and the
  ``setxattr``/``removexattr`` calls always go to the reaper (Landlock has no right for them: ``chmod 000 ~``
  worked, an ACL, an attribute, is a ``chmod``, and ``chown`` gives a file to another of the user's groups), which
  carries each out itself (``utime``, ``utimes``, ``futimesat``, ``setxattrat``, ``removexattrat``, which C
  libraries do not use, 16-bit ``chown`` and those of 32-bit programs get ``ENOSYS``): it reads the path from the
  caller's memory, opens it (``O_PATH``; relative to the caller's working directory or directory descriptor,
  ``/proc/self`` being the caller's), checks the real path of *what it opened* against the areas the command may
  write (:attr:`.landlock.Ruleset.write_areas`), then acts on that: a path rewritten or a symlink swapped meanwhile
  changes nothing (let through after a check, the call could find another file). Elsewhere ``EPERM``.

The reaper lets a call proceed only when its target is the command's own: a process (or thread) descending from
the reaper (every process the command starts does, however it detaches: the reaper is their subreaper), the
command's own process group, or a group whose members all are; ``kill(-1)`` (every process) is refused, a target
that does not exist is ``ESRCH``, anything else ``EPERM``.  The command makes the filter before it runs anything
and sends the listener to the reaper (``SCM_RIGHTS``); once the command's first process has ended the reaper
closes it, and what the command left (swept within the second) gets ``ENOSYS`` for every such call: the filter
fails closed.  Described for x86-64 (and its x32 and i386 ABIs), aarch64 (and 32-bit ARM) and riscv64; elsewhere
:func:`signal_filter` returns ``None``.
"""

from __future__ import annotations

import errno
import platform
import struct
from functools import cache
from typing import NamedTuple

__all__ = ["LISTENER_CALLS", "assemble", "carried_calls", "handled_calls", "signal_filter"]

_X32 = 0x40000000


class _Abi(NamedTuple):
    arch: int  # AUDIT_ARCH_*
    signals: tuple[int, ...]  # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo: to the reaper
    pidfd: tuple[int, ...]  # pidfd_send_signal: ENOSYS
    fcntl: tuple[int, ...]  # F_SETOWN to the reaper, F_SETOWN_EX refused
    ioctl: tuple[int, ...]  # FIOSETOWN, SIOCSPGRP refused
    prio: tuple[int, ...]  # setpriority: on the user refused, on another process or group to the reaper
    ioprio: tuple[int, ...]  # ioprio_set: the same
    sched: tuple[int, ...]  # sched_setparam, _setscheduler, _setaffinity, _setattr: another process's to the reaper
    # chmod, fchmod, fchmodat, fchmodat2: the reaper does them where the command may write, refuses them elsewhere
    chmod: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]] = ((), (), (), ())
    # utimensat, setxattr, lsetxattr, fsetxattr, removexattr, lremovexattr, fremovexattr: the same (an ACL set with
    # setxattr is a chmod); only in a machine's first (native) block, whose pointers the reaper reads
    meta: tuple[int, ...] = ()
    no_meta: tuple[int, ...] = ()  # the others (utime, utimes, futimesat, setxattrat...; other ABIs'): ENOSYS
    uffd: tuple[int, ...] = ()  # userfaultfd: only UFFD_USER_MODE_ONLY (the reaper reads the command's memory)
    # chown, lchown, fchown, fchownat (32-bit ids; the 16-bit ones of 32-bit ABIs are in no_meta): the reaper's too
    chown: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]] = ((), (), (), ())


_GENERIC = _Abi(0, (129, 130, 131, 138, 240), (424,), (25,), (29,), (140,), (30,), (118, 119, 122, 274),
                ((), (52,), (53,), (452,)), (88, 5, 6, 7, 14, 15, 16), (463, 466), (282,), ((), (), (55,), (54,)))
_META32 = (226, 227, 228, 235, 236, 237, 412, 463, 466)  # i386 and 32-bit ARM: xattrs, utimensat_time64...
_ARM32 = _Abi(0x40000028, (37, 238, 268, 178, 363), (424,), (55, 221), (54,), (97,), (314,), (154, 156, 241, 380),
              ((15,), (94,), (333,), (452,)), (), (*_META32, 269, 326, 348, 182, 95, 16), (388,),
              ((212,), (198,), (207,), (325,)))
_ABIS: dict[str, tuple[_Abi, ...]] = {
    "x86_64": (_Abi(0xC000003E, (62, 200, 234, 129, 297, *(_X32 | n for n in (62, 200, 234, 524, 536))),
                    (424, _X32 | 424), (72, _X32 | 72), (16, _X32 | 514), (141, _X32 | 141), (251, _X32 | 251),
                    (142, 144, 203, 314, *(_X32 | n for n in (142, 144, 203, 314))),
                    ((90, _X32 | 90), (91, _X32 | 91), (268, _X32 | 268), (452, _X32 | 452)),
                    (280, 188, 189, 190, 197, 198, 199),
                    (132, 235, 261, 463, 466, *(_X32 | n for n in (280, 188, 189, 190, 197, 198, 199, 132, 235, 261,
                                                                   463, 466))), (323, _X32 | 323),
                    ((92, _X32 | 92), (94, _X32 | 94), (93, _X32 | 93), (260, _X32 | 260))),
               _Abi(0x40000003, (37, 238, 270, 178, 335), (424,), (55, 221), (54,), (97,), (289,),
                    (154, 156, 241, 351), ((15,), (94,), (306,), (452,)), (), (*_META32, 30, 271, 299, 320, 182, 95,
                                                                                  16), (374,),
                    ((212,), (198,), (207,), (298,)))),
    "aarch64": (_GENERIC._replace(arch=0xC00000B7), _ARM32),
    "riscv64": (_GENERIC._replace(arch=0xC00000F3),
                _GENERIC._replace(arch=0x400000F3, meta=(), no_meta=(5, 6, 7, 14, 15, 16, 412, 463, 466))),
}
_ABIS["amd64"], _ABIS["arm64"] = _ABIS["x86_64"], _ABIS["aarch64"]
LISTENER_CALLS = {"x86_64": "317,46,47,3", "amd64": "317,46,47,3", "aarch64": "277,211,212,57",
                  "arm64": "277,211,212,57", "riscv64": "277,211,212,57"}
"""The numbers of ``seccomp`` (the command makes its filter with ``SECCOMP_FILTER_FLAG_NEW_LISTENER``), ``sendmsg``
and ``recvmsg`` (it sends the listener to the reaper, ``SCM_RIGHTS``) and ``close`` (Perl does not close a descriptor
0-2 it did not open, and the reaper's are free)."""

_LD, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_RETS = {"allow": 0x7FFF0000, "notify": 0x7FC00000, "enosys": 0x00050000 | errno.ENOSYS,
         "eperm": 0x00050000 | errno.EPERM}
_F_SETOWN, _F_SETOWN_EX, _FIOSETOWN, _SIOCSPGRP = 8, 15, 0x8901, 0x8902
_PRIO_USER, _IOPRIO_WHO_USER = 2, 3
_NO_IOCTLS = (0x40086602, 0x40046602, 0x401C5820,  # FS_IOC_SETFLAGS (and 32-bit), FS_IOC_FSSETXATTR: chattr;
              0xAA00)  # USERFAULTFD_IOC_NEW (/dev/userfaultfd): a userfaultfd that handles the kernel's faults too
_UFFD_USER_MODE_ONLY = 1
_ARG0, _ARG1 = 16, 24  # offsets of the low halves of args[0] and args[1] in struct seccomp_data (little-endian)


def _machine(machine: str | None) -> tuple[_Abi, ...] | None:
    return _ABIS.get((machine or platform.machine()).lower())


@cache
def handled_calls(machine: str | None = None) -> str:
    """The calls whose target the reaper reads from somewhere else than the first argument, as ``arch/nr:kind,...``
    (decimal): ``f`` ``fcntl`` (``F_SETOWN``'s pid, the third), ``p`` ``setpriority`` and ``i`` ``ioprio_set``
    (which kind of target, then its id); and the calls it carries out itself: ``m`` ``chmod``, ``d`` ``fchmod``,
    ``a`` ``fchmodat``, ``M`` ``fchmodat2``, ``u`` ``utimensat``, ``x`` ``setxattr``, ``X`` ``lsetxattr``, ``y``
    ``fsetxattr``, ``r`` ``removexattr``, ``R`` ``lremovexattr``, ``z`` ``fremovexattr``, ``o`` ``chown``, ``O``
    ``lchown``, ``q`` ``fchown``, ``Q`` ``fchownat``."""
    return ",".join(f"{abi.arch}/{nr}:{kind}" for abi in _machine(machine) or ()
                    for kind, nrs in (("f", abi.fcntl), ("p", abi.prio), ("i", abi.ioprio),
                                      *zip("mdaM", abi.chmod, strict=True), *zip("uxXyrRz", abi.meta, strict=False),
                                      *zip("oOqQ", abi.chown, strict=True))
                    for nr in (nrs if isinstance(nrs, tuple) else (nrs,)))


def carried_calls(machine: str | None = None) -> str:
    """The native numbers of ``utimensat``, ``setxattr``, ``removexattr`` and ``fchownat``, which the reaper makes
    (``0,0,0,0``: none)."""
    abis = _machine(machine)
    meta = abis[0].meta if abis else ()
    return f"{meta[0]},{meta[1]},{meta[4]},{abis[0].chown[3][0]}" if abis and meta else "0,0,0,0"


@cache
def signal_filter(machine: str | None = None, *, signals: bool = True) -> str | None:
    """The filter (``struct sock_filter`` s, in hex) for ``machine`` (this one by default), or ``None``; ``signals``:
    the signal calls too (no Landlock scope for them: ABI < 6).  Cached: one per command otherwise, ~20 µs."""
    abis = _machine(machine)
    if abis is None:
        return None
    # (code, jump if true, jump if false, k) with labels; a block per ABI, then the shared ends
    prog: list[tuple[int, str | None, str | None, int] | str] = []
    for i, abi in enumerate(abis):
        nxt = f"abi{i + 1}" if i + 1 < len(abis) else "allow"
        prog += [f"abi{i}", (_LD, None, None, 4), (_JEQ, None, nxt, abi.arch), (_LD, None, None, 0)]
        calls = [("prio", abi.prio), ("ioprio", abi.ioprio), ("pid", abi.sched),
                 ("notify", (*(nr for nrs in (*abi.chmod, *abi.chown) for nr in nrs), *abi.meta)),
                 ("enosys", abi.no_meta),
                 ("ioctl", abi.ioctl), ("uffd", abi.uffd)]
        if signals:
            calls += [("notify", abi.signals), ("enosys", abi.pidfd), ("fcntl", abi.fcntl)]
        for label, nrs in calls:
            prog += [(_JEQ, label, None, nr) for nr in nrs]
        prog.append((_JEQ, "allow", "allow", 0))  # a jump either way: the ABI matched, no other block applies
    prog += ["prio", (_LD, None, None, _ARG0), (_JEQ, "eperm", "who", _PRIO_USER),
             "ioprio", (_LD, None, None, _ARG0), (_JEQ, "eperm", "who", _IOPRIO_WHO_USER),
             "who", (_LD, None, None, _ARG1), (_JEQ, "allow", "notify", 0),  # 0: the caller (its process, group)
             "pid", (_LD, None, None, _ARG0), (_JEQ, "allow", "notify", 0)]
    prog += ["uffd", (_LD, None, None, _ARG0), (_JSET, "allow", "eperm", _UFFD_USER_MODE_ONLY),
             "ioctl", (_LD, None, None, _ARG1), *((_JEQ, "eperm", None, req) for req in _NO_IOCTLS),
             *((_JEQ, "eperm", None, req) for req in (_FIOSETOWN, _SIOCSPGRP) if signals), (_JEQ, "allow", "allow", 0)]
    if signals:
        prog += ["fcntl", (_LD, None, None, _ARG1), (_JEQ, "notify", None, _F_SETOWN),
                 (_JEQ, "eperm", "allow", _F_SETOWN_EX)]
    for name, value in _RETS.items():
        prog += [name, (_RET, None, None, value)]
    return assemble(prog)


def assemble(prog: list[tuple[int, str | None, str | None, int] | str]) -> str:
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
