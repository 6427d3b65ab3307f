"""A Landlock command could change the scheduling of any process of its user — Landlock covers none of it, on any
ABI: ``renice -n 19 -p <runtime>``, ``renice -u $USER`` (every process of the user; an unprivileged process may
lower, never raise back, a priority), ``taskset -p 1``, ``chrt --idle -p 0``, ``ionice -c3 -p``.  Now those calls
on another process go to the command's reaper, which allows only the command's own (``sandbox/signals.py``).

The target stands for the runtime: a process of the test's, without capabilities when the test runs as root (the
kernel refuses a process without capabilities, as the command is, the scheduling of one that has them; a normal
user's runtime has none)."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Iterator

import pytest

from procutil import SANDBOX_PYTHON
from subagents.sandbox import landlock
from subagents.sandbox.signals import _ABIS, LISTENER_CALLS
from subagents.tools.base import ToolContext

from .attacks import OneBackend, run
from .test_signals import _rcs, linux_with_perl, old_kernel

IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "riscv64": 30}.get(platform.machine(), 0)

OTHERS = """renice -n 5 -p {t}; echo renice=$?; renice -n 5 -g {t}; echo renice_group=$?
taskset -p 1 {t} >/dev/null; echo taskset=$?; chrt --idle -p 0 {t}; echo chrt=$?; ionice -c3 -p {t}; echo ionice=$?
{python} -c 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
try: os.setpriority(os.PRIO_USER, 54321, 5)
except OSError as e: print(f"prio_user={{e.errno}}")
libc.syscall({ioprio_set}, 3, 54321, 3 << 13); print(f"ioprio_user={{ctypes.get_errno()}}")
for name, call in (("setaffinity", lambda: os.sched_setaffinity({t}, {{0}})),
                   ("setscheduler", lambda: os.sched_setscheduler({t}, os.SCHED_IDLE, os.sched_param(0))),
                   ("setparam", lambda: os.sched_setparam({t}, os.sched_param(0)))):
    try: call(); print(f"{{name}}=0")
    except OSError as e: print(f"{{name}}={{e.errno}}")'
"""
"""Every way to change the scheduling of the target ``{t}`` (its own process group too), and of every process of a
user (54321: one without processes, so that the old code answered ESRCH, harmlessly, where it now gets EPERM)."""

OWN = """sleep 30 & p=$!; renice -n 3 -p $p >/dev/null; echo renice=$?; taskset -p 1 $p >/dev/null; echo taskset=$?
chrt --idle -p 0 $p; echo chrt=$?; ionice -c3 -p $p; echo ionice=$?; kill $p
renice -n 3 -g 0 >/dev/null; echo group0=$?; renice -n 4 -g $(ps -o pgid= -p $$) >/dev/null; echo group=$?
nice -n 2 true; echo nice=$?; ionice -c3 true; echo ionice_cmd=$?; taskset 1 true; echo taskset_cmd=$?
{python} -c 'import os, threading
def work():
    tid = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, tid, 10); os.sched_setaffinity(tid, {{0}}); print("thread=0")
t = threading.Thread(target=work); t.start(); t.join()'
"""
"""The command's own processes, groups and threads: all allowed."""

OWN_LISTENER = """{python} - <<'EOF'
import ctypes, struct, threading
libc = ctypes.CDLL(None, use_errno=True)
insns = [(0x20, 0, 0, 0), (0x15, 0, 1, {nr}), (0x06, 0, 0, 0x7FC00000), (0x06, 0, 0, 0x7FFF0000)]  # setpriority: notify
code = ctypes.create_string_buffer(b"".join(struct.pack("<HBBI", *i) for i in insns))
prog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", len(insns), ctypes.addressof(code)))
def answer(fd):  # a thread outside the filter (made before it) that lets every call go on
    while True:
        n = ctypes.create_string_buffer(80)
        if libc.ioctl(fd, 0xC0502100, n) != 0:
            return
        go_on = struct.pack("QqiI", *struct.unpack_from("Q", n), 0, 0, 1)
        libc.ioctl(fd, 0xC0182101, ctypes.create_string_buffer(go_on))
fds = []
t = threading.Thread(target=lambda: [answer(fd) for fd in fds], daemon=True)
fd = libc.syscall({seccomp}, 1, 8, prog)
print(f"listener={{ctypes.get_errno() if fd < 0 else 0}}")
if fd >= 0:
    fds.append(fd)
t.start()
print(f"renice={{ctypes.get_errno() if libc.setpriority(0, {t}, 5) else 0}}")
EOF
"""
"""The command installs a filter of its own that sends ``setpriority`` to its own listener, to answer "go on"
itself (the newest filter's listener gets a call).  The kernel allows one listener per filter tree: ``EBUSY``."""


@pytest.fixture
def target() -> Iterator[int]:
    argv = ["sleep", "60"]
    if os.geteuid() == 0:
        argv = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *argv]
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while _comm(proc.pid) != "sleep" and time.monotonic() < deadline:  # setpriv has exec'd it
            time.sleep(0.01)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def _scheduling(pid: int) -> tuple[object, ...]:
    io = subprocess.run(["ionice", "-p", str(pid)], capture_output=True, text=True, check=True).stdout
    return os.getpriority(os.PRIO_PROCESS, pid), os.sched_getscheduler(pid), os.sched_getaffinity(pid), io


class SchedulingAttacks(OneBackend):
    mode = "landlock"

    async def test_the_command_cannot_change_the_scheduling_of_other_processes(self, ctx: ToolContext,
                                                                               target: int) -> None:
        before = _scheduling(target)
        out = await run(ctx, OTHERS.format(t=target, python=SANDBOX_PYTHON, ioprio_set=IOPRIO_SET))
        assert _rcs(out) == {"renice": "1", "renice_group": "1", "taskset": "1", "chrt": "1", "ionice": "1",
                             "prio_user": "1", "ioprio_user": "1", "setaffinity": "1", "setscheduler": "1",
                             "setparam": "1"}, out  # 1: EPERM (the user 54321 has no process: ESRCH without it)
        assert _scheduling(target) == before

    async def test_the_command_cannot_answer_its_calls_itself(self, ctx: ToolContext, target: int) -> None:
        before = _scheduling(target)
        nr = _ABIS[platform.machine()][0].prio[0]
        seccomp = LISTENER_CALLS[platform.machine()].split(",")[0]
        out = await run(ctx, OWN_LISTENER.format(python=SANDBOX_PYTHON, nr=nr, seccomp=seccomp, t=target))
        assert _rcs(out) == {"listener": "16", "renice": "1"}, out  # EBUSY; EPERM
        assert _scheduling(target) == before

    async def test_the_command_still_schedules_its_own_processes(self, ctx: ToolContext) -> None:
        out = await run(ctx, OWN.format(python=SANDBOX_PYTHON))
        assert _rcs(out) == {"renice": "0", "taskset": "0", "chrt": "0", "ionice": "0", "group0": "0", "group": "0",
                             "nice": "0", "ionice_cmd": "0", "taskset_cmd": "0", "thread": "0"}, out


@linux_with_perl
class TestCurrentKernel(SchedulingAttacks):
    pass


@linux_with_perl
class TestOldKernelReaper(SchedulingAttacks):
    @pytest.fixture(autouse=True)
    def abi_5(self, monkeypatch: pytest.MonkeyPatch) -> None:
        old_kernel(monkeypatch)


def test_landlock_is_there() -> None:
    assert landlock.abi_version() >= 1, "the scheduling tests need Landlock"
