"""A Landlock command on a kernel without Landlock's signal scope (ABI < 6, Linux < 6.12, as most distributions
ship today) could signal every process of the user: the runtime (``kill -9 -1``, ``pkill python``), its reaper
(``kill -9 $PPID``, then escape), the user's other programs; and on every ABI change their scheduling (``renice``,
``taskset``, ``chrt``, ``ionice``).  Now those calls are decided on by the command's reaper (or, where the kernel
does not let it take the command's listener, a handler the command forks; ``sandbox/signals.py``): only its own
processes.  Here the kernel's ABI is taken as 5 (the outer Landlock domain is then made without the scope too),
and every attack signals with ``0`` or a caught ``USR1`` — never a signal that would hurt the test process should
the defence fail — and changes the scheduling of a process of the test's own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procutil import SANDBOX_PYTHON
from subagents.sandbox import landlock, supervisor
from subagents.sandbox.signals import _ABIS, handled_calls, signal_filter
from subagents.tools.base import ToolContext

from .attacks import OneBackend, eventually, marked, marker, run
from .test_supervisor import ESCAPES, WAIT, _Reaped

linux_with_perl = pytest.mark.skipif(not sys.platform.startswith("linux") or supervisor.perl() is None,
                                     reason="the supervisor runs on Linux, with perl")


@contextlib.contextmanager
def _swept(mark: str) -> Iterator[None]:
    """Whatever happens in the block, no process of ``mark`` is left (the defence may fail)."""
    try:
        yield
    finally:
        for pid in marked(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


TRACE = """
import ctypes, errno, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
for line in subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines():
    pid, name = line.split(None, 1)
    if name.startswith("subagents: "):
        who = name.split()[1]
        attached = libc.ptrace(16, int(pid), 0, 0) == 0
        print(f"{who}=attached" if attached else f"{who}={errno.errorcode[ctypes.get_errno()]}")
        try:
            open(f"/proc/{pid}/mem", "rb").close()
            print(f"{who}_mem=open")
        except OSError as e:
            print(f"{who}_mem={errno.errorcode[e.errno]}")
"""
"""Attaches to the supervisor's processes (``PTRACE_ATTACH``) and opens their memory; prints what happened."""


def _rcs(out: str) -> dict[str, str]:
    """The ``name=value`` lines of a command's output."""
    return dict(line.split("=", 1) for line in out.splitlines() if re.fullmatch(r"[a-z_0-9]+=\S*", line))


# -- the filter, run by a small BPF interpreter -------------------------------------------------------------------
ALLOW, NOTIFY, ENOSYS, EPERM = 0x7FFF0000, 0x7FC00000, 0x00050026, 0x00050001


def _verdict(hexprog: str, arch: int, nr: int, arg1: int = 0, arg0: int = 0) -> int:
    insns = [struct.unpack("<HBBI", bytes.fromhex(hexprog[i:i + 16])) for i in range(0, len(hexprog), 16)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = {4: arch, 0: nr, 16: arg0, 24: arg1}[k]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x45:  # JSET
            pc += jt if acc & k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64", "riscv64"])
def test_the_filter_sends_signal_calls_to_the_handler_and_refuses_what_it_cannot_check(machine: str) -> None:
    prog = signal_filter(machine)
    assert prog is not None
    abis = _ABIS[machine]
    for abi in abis:
        for nr in abi.signals:
            assert _verdict(prog, abi.arch, nr) == NOTIFY, (abi, nr)
        for nr in abi.pidfd:
            assert _verdict(prog, abi.arch, nr) == ENOSYS, (abi, nr)
        for nr in abi.fcntl:  # F_SETOWN: to the handler; F_SETOWN_EX: refused; F_GETFL, F_SETFL, F_SETSIG: allowed
            assert [_verdict(prog, abi.arch, nr, cmd) for cmd in (8, 15, 3, 4, 10)] == [NOTIFY, EPERM] + [ALLOW] * 3
        for nr in abi.ioctl:  # FIOSETOWN, SIOCSPGRP: refused; TCGETS, FIONBIO: allowed
            assert [_verdict(prog, abi.arch, nr, req) for req in (0x8901, 0x8902, 0x5401, 0x5421)] == [EPERM] * 2 + [
                ALLOW] * 2
        _schedules(prog, abi)
        listed = {*abi.signals, *abi.pidfd, *abi.fcntl, *abi.ioctl, *abi.prio, *abi.ioprio, *abi.sched,
                  *(nr for nrs in (*abi.chmod, *abi.chown) for nr in nrs), *abi.meta, *abi.no_meta, *abi.uffd}
        for nr in (0, 1, 59, 221, 435, 0x40000000 | 1):  # read, write, execve...: allowed
            if nr not in listed:
                assert _verdict(prog, abi.arch, nr, 8) == ALLOW, (abi, nr)
    assert _verdict(prog, 0x12345678, 62) == ALLOW  # no such ABI here
    assert len({abi.arch for abi in abis}) == len(abis)
    kinds = handled_calls(machine).split(",")
    assert len(kinds) == sum(len(abi.fcntl) + len(abi.prio) + len(abi.ioprio) + sum(map(len, abi.chmod))
                             + len(abi.meta) + sum(map(len, abi.chown)) for abi in abis)
    by_path = {"m", "o", "O"} if machine != "riscv64" else set()  # (riscv64: no chmod(2) nor chown(2), only the -at)
    assert {k.rsplit(":", 1)[1] for k in kinds} == {"f", "p", "i", "d", "a", "M", *"uxXyrRz", "q", "Q"} | by_path
    assert signal_filter("sparc64") is None


@pytest.mark.parametrize("machine", ["x86_64", "aarch64", "riscv64"])
def test_with_the_scope_only_the_scheduling_calls_are_filtered(machine: str) -> None:
    prog = signal_filter(machine, signals=False)
    assert prog is not None
    assert prog != signal_filter(machine)
    for abi in _ABIS[machine]:
        _schedules(prog, abi)
        for nr in (*abi.signals, *abi.pidfd):  # Landlock's scope decides on signals
            assert _verdict(prog, abi.arch, nr, 8, 5) == ALLOW, (abi, nr)
        for nr in abi.fcntl:
            assert _verdict(prog, abi.arch, nr, 8) == ALLOW, (abi, nr)


def _schedules(prog: str, abi: Any) -> None:
    """Scheduling calls: on the caller (0) allowed, on the user refused, on another process to the handler; every
    chmod call to the handler (it carries them out where the command may write)."""
    assert all(nrs for nrs in (*abi.chmod[1:], *abi.chown[2:])), abi  # fchmod(at(2)), fchown(at) on every ABI
    for nr in (*(nr for nrs in (*abi.chmod, *abi.chown) for nr in nrs), *abi.meta):  # (utimensat, xattrs, chown)
        assert _verdict(prog, abi.arch, nr, 0, 0o755) == NOTIFY, (abi, nr)
    for nr in abi.no_meta:  # utime, utimes, futimesat, setxattrat...; another ABI's (whose pointers it does not read)
        assert _verdict(prog, abi.arch, nr, 0, 0o755) == ENOSYS, (abi, nr)
    for nr in abi.ioctl:  # chattr's FS_IOC_SETFLAGS (64-, 32-bit), FS_IOC_FSSETXATTR, USERFAULTFD_IOC_NEW: refused;
        assert [_verdict(prog, abi.arch, nr, req)  # TCGETS, FIONBIO: allowed
                for req in (0x40086602, 0x40046602, 0x401C5820, 0xAA00, 0x5401, 0x5421)] == [EPERM] * 4 + [ALLOW] * 2
    assert abi.uffd, abi
    for nr in abi.uffd:  # userfaultfd: with UFFD_USER_MODE_ONLY (1) allowed, else refused
        assert [_verdict(prog, abi.arch, nr, 0, flags) for flags in (1, 1 | 0o4000, 0, 0o4000)] == [ALLOW] * 2 + [
            EPERM] * 2, (abi, nr)
    for nr in (*abi.prio, *abi.ioprio):
        user = 2 if nr in abi.prio else 3  # PRIO_USER, IOPRIO_WHO_USER
        for which in (0, 1, 2) if nr in abi.prio else (1, 2, 3):
            assert _verdict(prog, abi.arch, nr, 0, which) == (EPERM if which == user else ALLOW), (abi, nr, which)
            assert _verdict(prog, abi.arch, nr, 4321, which) == (EPERM if which == user else NOTIFY), (abi, nr)
    for nr in abi.sched:
        assert [_verdict(prog, abi.arch, nr, 0, pid) for pid in (0, 4321)] == [ALLOW, NOTIFY], (abi, nr)


def old_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Landlock's ABI taken as 5: no signal scope."""
    monkeypatch.setattr(landlock, "abi_version", lambda: 5)


@linux_with_perl
class TestOldKernelReaper(_Reaped):
    """The reaper's escapes, with the reaper deciding on the command's signals in place of Landlock's scope."""

    mode = "landlock"

    @pytest.fixture(autouse=True)
    def abi_5(self, monkeypatch: pytest.MonkeyPatch) -> None:
        old_kernel(monkeypatch)

    async def test_the_command_cannot_signal_the_runtime_or_its_reaper(self, ctx: ToolContext) -> None:
        got: list[int] = []
        old = signal.signal(signal.SIGUSR1, lambda s, frame: got.append(s))
        try:
            me, group = os.getpid(), os.getpgrp()
            out = await run(ctx, f"kill -0 {me}; echo runtime=$?; kill -USR1 {me}; echo usr1=$?; "
                                 f"kill -0 -- -{group}; echo its_group=$?; kill -0 -1; echo all=$?; "
                                 "kill -0 $PPID; echo reaper=$?; kill -0 $(ps -o ppid= -p $PPID); echo leader=$?; "
                                 "pkill -0 -f '^subagents: (reaper|command)'; echo pkill=$?; "
                                 f"{SANDBOX_PYTHON} -c 'import os; os.kill({me}, 0)' 2>&1 | tail -n 1")
            await asyncio.sleep(0.1)
        finally:
            signal.signal(signal.SIGUSR1, old)
        assert _rcs(out) == {"runtime": "1", "usr1": "1", "its_group": "1", "all": "1", "reaper": "1", "leader": "1",
                             "pkill": "1"}, out
        assert out.count("Operation not permitted") >= 9, out  # six kills, pkill's (two here), Python's
        assert "PermissionError: [Errno 1] Operation not permitted" in out, out
        assert not got, "the command's SIGUSR1 reached the runtime"

    async def test_the_command_cannot_kill_its_reaper_then_escape(self, ctx: ToolContext) -> None:
        mark = marker()
        with _swept(mark):
            out = await run(ctx, "kill -9 $PPID; echo kill=$?; kill -STOP $PPID; echo stop=$?; "
                                 + ESCAPES["env-i-double-fork"].format(mark=mark) + WAIT.format(mark=mark))
            assert _rcs(out) == {"kill": "1", "stop": "1"}, out
            assert "started" in out, out
            await eventually(lambda: not marked(mark), timeout=3.0)

    async def test_the_command_still_signals_its_own_processes(self, ctx: ToolContext) -> None:
        mark = marker()
        with _swept(mark):
            out = await run(ctx, "kill -0 $$; echo self=$?; kill -0 0; echo group=$?; "
                                 "sleep 30 & p=$!; kill $p; wait $p; echo child=$?; f=${TMPDIR:-/tmp}/gone.pid; "
                                 f"setsid sh -c \"echo \\$\\$ > $f; exec sleep {mark}\" & "
                                 "until [ -s $f ]; do sleep 0.01; done; g=$(cat $f); "
                                 "kill -0 -- -$g; echo its_group=$?; kill -9 $g; echo detached=$?; "
                                 "kill -0 999999; echo none=$?; "
                                 f"{SANDBOX_PYTHON} -c 'import signal; signal.signal(signal.SIGUSR1, lambda *a: "
                                 "print(\"raised=0\")); signal.raise_signal(signal.SIGUSR1)'")
            assert _rcs(out) == {"self": "0", "group": "0", "child": "143", "its_group": "0", "detached": "0",
                                 "none": "1", "raised": "0"}, out
            assert "No such process" in out, out
            await eventually(lambda: not marked(mark), timeout=3.0)

    async def test_the_runtime_cannot_be_made_the_owner_of_a_file(self, ctx: ToolContext) -> None:
        # The owner of a file gets SIGIO (or, with F_SETSIG, any signal) when I/O is possible on it.
        got: list[int] = []
        old = signal.signal(signal.SIGUSR1, lambda s, frame: got.append(s))
        me = os.getpid()
        try:
            out = await run(ctx, f"{SANDBOX_PYTHON} -c 'import fcntl, os, signal, socket, struct, time\n"
                                 "seen = []\nsignal.signal(signal.SIGUSR1, lambda *a: seen.append(1))\n"
                                 "def owner(name, pid, call):\n"
                                 "    r, w = os.pipe()\n"
                                 "    try: call(r, pid)\n"
                                 "    except OSError as e: print(f\"{name}={e.errno}\"); return\n"
                                 "    fcntl.fcntl(r, 10, signal.SIGUSR1); fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC)\n"
                                 "    os.write(w, b\"x\"); time.sleep(0.05); print(f\"{name}=0/{len(seen)}\")\n"
                                 "setown = lambda fd, pid: fcntl.fcntl(fd, fcntl.F_SETOWN, pid)\n"
                                 "setown_ex = lambda fd, pid: fcntl.fcntl(fd, 15, struct.pack(\"ii\", 1, pid))\n"
                                 f"owner(\"runtime\", {me}, setown)\n"
                                 f"owner(\"runtime_group\", -{os.getpgrp()}, setown)\n"
                                 f"owner(\"runtime_ex\", {me}, setown_ex)\n"
                                 "owner(\"itself\", os.getpid(), setown)\n"
                                 "s, _ = socket.socketpair()\n"
                                 "try: fcntl.ioctl(s, 0x8902, struct.pack(\"i\", os.getpid()))\n"
                                 "except OSError as e: print(f\"siocspgrp={e.errno}\")\n'")
            await asyncio.sleep(0.1)
        finally:
            signal.signal(signal.SIGUSR1, old)
        assert _rcs(out) == {"runtime": "1", "runtime_group": "1", "runtime_ex": "1", "itself": "0/1",
                             "siocspgrp": "1"}, out
        assert not got, "the command made the runtime the owner of a file and signalled it"

    async def test_the_reaper_decides_no_process_of_the_command(self, ctx: ToolContext) -> None:
        # (A handler forked by the command was the command's own: it could kill it, and a command could trace it.)
        out = await run(ctx, "pgrep -P $$ >/dev/null; echo children=$?; echo listener=$(ls -l /proc/$$/fd | "
                             "grep -c seccomp)")
        assert _rcs(out) == {"children": "1", "listener": "0"}, out

    async def test_once_the_command_ended_what_it_left_fails_closed(self, ctx: ToolContext) -> None:
        # The reaper decides while the command runs; what it leaves behind (swept in the second after) gets ENOSYS,
        # even for itself.  (Its output still reaches the tool: the pipe is read until the reaper is done.)
        out = await run(ctx, "(trap '' TERM; sleep 0.3; kill -0 $BASHPID; echo late_self=$?; "
                             f"kill -0 {os.getpid()}; echo late_runtime=$?) 2>&1 & echo started")
        assert out.startswith("started"), out
        assert _rcs(out) == {"late_self": "1", "late_runtime": "1"}, out
        assert out.count("Function not implemented") == 2, out

    async def test_the_supervisor_cannot_be_traced(self, ctx: ToolContext, ws: Path) -> None:
        # Without the nested domain the leader and the reaper share the command's Landlock domain: it could attach to
        # them and make the reaper allow anything, or leave.  They are not dumpable: no ptrace, no /proc/<pid>/mem,
        # for a command without CAP_SYS_PTRACE.
        (ws / "trace.py").write_text(TRACE)
        out = await run(ctx, f"{SANDBOX_PYTHON} trace.py; echo listener=$(ls -l /proc/$$/fd | grep -c seccomp)")
        assert _rcs(out) == {"command": "EPERM", "reaper": "EPERM", "command_mem": "EACCES", "reaper_mem": "EACCES",
                             "listener": "0"}, out

    async def test_a_pidfd_names_no_process_to_signal(self, ctx: ToolContext) -> None:
        out = await run(ctx, f"{SANDBOX_PYTHON} -c 'import os, signal\n"
                             f"fd = os.open(\"/proc/{os.getpid()}\", os.O_RDONLY | os.O_DIRECTORY)\n"
                             "for f in (fd, os.pidfd_open(os.getpid())):\n"
                             "    try: signal.pidfd_send_signal(f, 0)\n"
                             "    except OSError as e: print(e.errno)\n'")
        assert out.splitlines()[:2] == ["38", "38"], out  # ENOSYS: programs fall back to kill()

@linux_with_perl
class TestCurrentKernel(OneBackend):
    """With Landlock's own signal scope (ABI >= 6) the reaper decides on scheduling calls only; no handler."""

    mode = "landlock"

    async def test_no_handler_with_the_scope(self, ctx: ToolContext, ws: Path) -> None:
        if landlock.abi_version() < 6:
            pytest.fail("this kernel has no Landlock signal scope (ABI < 6): the test needs Linux 6.12+")
        out = await run(ctx, "pgrep -f '^subagents: signals' || echo none")
        assert out.splitlines()[0] == "none", out
