"""The command reaper (``sandbox/supervisor.py``), attacked: what the first version of it got wrong.

- Perl read its own variables from the command's environment: ``PERL5OPT=-MMissing`` kept every command
  from running, ``PERL5OPT=-d`` hung it, ``PERL_BADLANG=1`` printed locale warnings into its output;
- a signal the runtime ignores (inherited ``SIG_IGN``) was reported as exit code ``128 + n``, not as the signal;
- the supervisor, ending with the command's signal, dumped core too: Perl's core file replaced the command's;
- the runtime killed with ``SIGKILL`` left the command and all it started running (as before the reaper, which
  can end them now, as bubblewrap's ``--die-with-parent`` does);
- what the command left in its group got ``SIGKILL`` at once, where the runtime used to give it ``SIGTERM`` and
  a grace period (:data:`~subagents.sandbox.shell.KILL_GRACE_S`) to clean up, at the command's end and at a timeout;
- a command killed as it started (before it joined the group) missed the ``SIGTERM``, ran to its end and
  reported success;
- without ``/proc/<pid>/task/<tid>/children``, the reaper's scan of ``/proc`` read a process's parent from the
  wrong field when its name held ``")"``: the process outlived the command, which itself took 30 s to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import resource
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from procutil import SANDBOX_PYTHON
from subagents.exceptions import ToolError
from subagents.sandbox import supervisor
from subagents.sandbox.shell import ShellSandbox
from subagents.tools.base import ToolContext

from .attacks import OneBackend, eventually, marked, marker, run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or supervisor.perl() is None,
                                reason="the reaper runs on Linux, with perl")

# Started by a runtime of its own, which the test then kills: a command and a process that left its group.
RUNTIME = """
import asyncio, sys
from pathlib import Path
from subagents.sandbox import SandboxPolicy, Workspace
from subagents.sandbox.shell import ShellSandbox
async def main():
    box = ShellSandbox(Workspace(Path(sys.argv[1]), SandboxPolicy(mode=sys.argv[2])))
    mark = sys.argv[3]
    proc = await box.spawn(["bash", "-c", f"env -i setsid -f sleep {mark} > /dev/null 2>&1; sleep {mark}"])
    print(proc.pid, flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""
# Leaves the group, names itself "x) S 1 1 1" (what a naive parse of /proc/<pid>/stat reads as parent 1), waits.
FAKE_NAME = ("import ctypes, os, sys, time\n"
             "if os.fork() == 0:\n"
             "    os.setsid(); ctypes.CDLL(None).prctl(15, b'x) S 1 1 1', 0, 0, 0)\n"
             "    while True: time.sleep(1)\n"
             "time.sleep(0.2)\n")
# A background process of the group that needs a moment to clean up when it gets SIGTERM (and the command waits
# until it is ready to).
CLEANUP = ("(trap 'sleep 0.2; echo cleaned > {f}; exit 0' TERM; echo > {f}.ready; while :; do sleep 0.05; done) & "
           "until [ -e {f}.ready ]; do sleep 0.01; done; ")


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class _Broken(OneBackend):
    """The attacks against one backend (``mode``)."""

    @pytest.fixture
    def usr1_ignored(self) -> Iterator[None]:
        old = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        yield
        signal.signal(signal.SIGUSR1, old)

    async def test_perl_variables_reach_the_command_not_the_supervisor(self, box: ShellSandbox) -> None:
        extra = {"PERL5OPT": "-MNo::Such::Module", "PERL_BADLANG": "1", "LC_ALL": "xx_YY.bogus"}
        proc = await box.spawn(["printenv", "PERL5OPT", "PERL_BADLANG", "LC_ALL"], env_extra=extra)
        out, err = await asyncio.wait_for(proc.communicate(), 10)
        assert (proc.returncode, out, err) == (0, b"-MNo::Such::Module\n1\nxx_YY.bogus\n", b"")

    async def test_perl_debugger_in_the_environment_does_not_hang_the_command(self, box: ShellSandbox) -> None:
        proc = await box.spawn(["echo", "ran"], env_extra={"PERL5OPT": "-d"}, stdin=asyncio.subprocess.PIPE)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 5)
        finally:
            await box.kill(proc)
        assert out == b"ran\n"

    @pytest.mark.usefixtures("usr1_ignored")
    async def test_a_signal_the_runtime_ignores_is_reported_as_the_signal(self, box: ShellSandbox) -> None:
        # (a runtime started in the background by a script ignores SIGINT and SIGQUIT; its children inherit that)
        code = "import os, signal; signal.signal(10, signal.SIG_DFL); os.kill(os.getpid(), 10)"
        proc = await box.spawn([SANDBOX_PYTHON, "-c", code])
        await proc.communicate()
        assert proc.returncode == -signal.SIGUSR1

    @pytest.fixture
    def core_files(self) -> Iterator[None]:
        pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
        if pattern.startswith("|") or "/" in pattern:
            pytest.skip(f"core files do not go to the working directory here ({pattern})")
        old = resource.getrlimit(resource.RLIMIT_CORE)
        if old[1] != resource.RLIM_INFINITY:
            pytest.skip("core files are limited here")
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, old[1]))
        yield
        resource.setrlimit(resource.RLIMIT_CORE, old)

    @pytest.mark.usefixtures("core_files")
    async def test_the_core_file_of_a_crash_is_the_commands(self, box: ShellSandbox, ws: Path) -> None:
        proc = await box.spawn([SANDBOX_PYTHON, "-c", "import os; os.abort()"], cwd=ws / "src")
        await proc.communicate()
        assert proc.returncode == -signal.SIGABRT
        heads = [p.read_bytes()[:65536] for p in (ws / "src").iterdir()]
        assert [b"os.abort()" in h for h in heads] == [True], "the core file of the crash"
        assert not any(b"subagents: " in h for h in heads), "a core file of the supervisor's"

    async def test_nothing_outlives_a_runtime_killed_with_sigkill(self, ws: Path) -> None:
        mark = marker()
        runtime = await asyncio.create_subprocess_exec(sys.executable, "-c", RUNTIME, str(ws), self.mode, mark,
                                                       stdout=asyncio.subprocess.PIPE)
        assert runtime.stdout is not None
        leader = int(await runtime.stdout.readline())
        try:
            await eventually(lambda: len(marked(mark)) >= 2)
            runtime.kill()
            await runtime.wait()
            await eventually(lambda: not marked(mark), timeout=3.0)
        finally:
            with contextlib.suppress(ProcessLookupError):
                runtime.kill()
            await runtime.wait()
            _kill([leader, *marked(mark)])

    async def test_what_the_command_leaves_in_its_group_gets_sigterm_first(self, ctx: ToolContext, ws: Path) -> None:
        done = ws / "src" / "done"
        out = await run(ctx, CLEANUP.format(f=done) + "echo started")
        assert out.startswith("started"), out
        await eventually(done.exists, timeout=3.0)

    async def test_a_command_past_its_timeout_leaves_its_group_the_grace(self, ctx: ToolContext, ws: Path) -> None:
        done = ws / "src" / "done"
        with pytest.raises(ToolError, match="killed after 1 s"):
            await run(ctx, CLEANUP.format(f=done) + "sleep 60", timeout_s=1)
        await eventually(done.exists, timeout=3.0)

    async def test_a_command_killed_as_it_starts_does_not_run(self, box: ShellSandbox, ws: Path) -> None:
        codes = []
        for i in range(20):
            proc = await box.spawn(["bash", "-c", f"sleep 0.2; echo > {ws / 'src' / str(i)}"])
            await asyncio.sleep(random.random() * 0.008)
            await box.kill(proc)
            codes.append(proc.returncode)
        await asyncio.sleep(0.5)
        assert codes == [-signal.SIGTERM] * 20
        assert not list((ws / "src").iterdir()), "a command killed as it started ran all the same"

    async def test_the_scan_without_a_children_file_finds_every_child(self, box: ShellSandbox,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
        # Kernels without CONFIG_PROC_CHILDREN: the reaper reads every /proc/<pid>/stat instead.
        monkeypatch.setattr(supervisor, "REAPER_SCRIPT",
                            supervisor.REAPER_SCRIPT.replace("/proc/$$/task/$$/children", "/nonexistent/$$"))
        mark = marker()
        proc = await box.spawn([SANDBOX_PYTHON, "-c", FAKE_NAME, mark])
        ended = asyncio.ensure_future(proc.communicate())
        try:
            await eventually(lambda: ended.done() and not marked(mark), timeout=3.0)
        finally:
            _kill(marked(mark))
            await ended
        assert proc.returncode == 0

    async def test_arguments_and_environment_pass_unchanged(self, box: ShellSandbox,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
        # A guard: the reaper passes them as they were (what the command saw without it).
        env = {"A_NL": "x\ny\n", "A_EQ": "a=b=c", "A_EMPTY": "", "A_RAW": os.fsdecode(b"\xff\xfe"), "A_DASHES": "--"}
        args = ["a\nb", "", "--", "-x", "é", os.fsdecode(b"\xff"), "=", "x=y"]
        script = 'cat /proc/$$/cmdline; printf "\\n--\\n"; cat /proc/$$/environ'
        seen = []
        for perl in (supervisor.perl(), None):
            monkeypatch.setattr(supervisor, "perl", lambda perl=perl: perl)
            proc = await box.spawn(["sh", "-c", script, *args], env_extra=env)
            out, err = await proc.communicate()
            cmdline, environ = out.split(b"\n--\n")
            own = (b"SUBAGENTS_COMMAND=", b"TMPDIR=")  # (a new one for each command)
            variables = sorted(v for v in environ.split(b"\0") if not v.startswith(own))
            seen.append((proc.returncode, err, cmdline, variables))
        assert seen[0] == seen[1]


class TestLandlockReaperBreak(_Broken):
    mode = "landlock"

    async def test_the_command_cannot_end_its_reaper_through_its_limits(self, ctx: ToolContext) -> None:
        # Landlock scopes signals, not prlimit(): a CPU limit of 0 killed the reaper the next time it ran (here:
        # reaping an orphan), and what the command started after that was re-parented to init.
        mark = marker()
        out = await run(ctx, "prlimit --pid $PPID --cpu=0:0 2>&-; echo rc=$?; "
                             "for i in 1 2 3 4 5; do setsid -f true; sleep 0.02; done; "
                             f"env -i setsid -f sleep {mark} > /dev/null 2>&1 < /dev/null; echo started")
        try:
            assert out.splitlines()[:2] == ["rc=1", "started"], out
            await eventually(lambda: not marked(mark), timeout=3.0)
        finally:
            _kill(marked(mark))

    async def test_the_command_cannot_set_the_limits_of_another_process(self, box: ShellSandbox) -> None:
        # (the runtime's own, for one: a command could take every file descriptor from it)
        victim = await asyncio.create_subprocess_exec("sleep", "30")
        try:
            proc = await box.spawn(["bash", "-c", f"prlimit --pid {victim.pid} --nofile=3:3 2>&-; echo rc=$?; "
                                                  "ulimit -n 64 && prlimit --nofile=32 bash -c 'ulimit -n'"])
            out, _ = await proc.communicate()
            limit = resource.prlimit(victim.pid, resource.RLIMIT_NOFILE)
        finally:
            victim.kill()
            await victim.wait()
        assert out == b"rc=1\n32\n"  # its own limits still change
        assert limit != (3, 3)


class TestOffReaperBreak(_Broken):
    mode = "off"
