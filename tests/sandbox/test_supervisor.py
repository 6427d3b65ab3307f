"""The reaper that commands run under without a PID namespace (Landlock, ``mode = "off"``): escape attempts.

Before it, a process that cleared its environment (``env -i``) and left the command's process group
(``setsid``, a double fork) escaped the tag sweep and outlived its command, its run and the runtime.
Every attack below starts ``sleep MARK`` that way and checks, from outside the sandbox, that nothing
with the mark runs once the ``bash`` tool returned (or the command was killed).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from procutil import SANDBOX_PYTHON
from subagents.exceptions import ToolError
from subagents.models.base import AgentInfo
from subagents.sandbox import SandboxPolicy, Workspace, supervisor
from subagents.sandbox.shell import ShellSandbox, kill_all_process_groups
from subagents.tools.base import ToolContext

from .attacks import OneBackend, eventually, marked, marker, run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock and the reaper are Linux only")

# Each: a shell snippet that leaves behind ``sleep MARK`` with no tag, out of the command's group and session.
ESCAPES = {
    "env-i-setsid": "env -i setsid -f sleep {mark} > /dev/null 2>&1 < /dev/null",
    "env-i-setsid-holding-output": "env -i setsid -f sleep {mark}",
    "env-i-double-fork": (f"env -i {SANDBOX_PYTHON} -c \"import os; os.fork() and os._exit(0); os.setsid(); "
                          "os.fork() and os._exit(0); os.execvp('sleep', ['sleep', '{mark}'])\" > /dev/null 2>&1"),
    "env-i-nohup-chain": ("env -i setsid -f sh -c 'setsid -f sh -c \"setsid -f sleep {mark}\"' "
                          "> /dev/null 2>&1 < /dev/null"),
    "own-subreaper": (f"env -i {SANDBOX_PYTHON} -c \"import ctypes, os; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0); "
                      "os.setsid(); os.fork() or os.execvp('sleep', ['sleep', '{mark}']); os._exit(0)\" "
                      "> /dev/null 2>&1"),
}
# Wait until the escaped process runs before the command ends (else its end could stop it first).
WAIT = "; for i in $(seq 300); do pgrep -f 'sleep {mark}' > /dev/null && break; sleep 0.01; done; echo started"


class _Reaped(OneBackend):
    """The escapes against one backend (``mode``)."""

    @pytest.mark.parametrize("name", list(ESCAPES))
    async def test_nothing_outlives_its_command(self, name: str, ctx: ToolContext) -> None:
        mark = marker()
        out = await run(ctx, ESCAPES[name].format(mark=mark) + WAIT.format(mark=mark))
        assert out.startswith("started"), out
        await eventually(lambda: not marked(mark), timeout=3.0)

    async def test_nothing_outlives_a_command_killed_at_its_timeout(self, ctx: ToolContext) -> None:
        mark = marker()
        with pytest.raises(ToolError, match="killed after 1 s"):
            await run(ctx, "trap '' TERM; " + ESCAPES["env-i-setsid"].format(mark=mark) + WAIT.format(mark=mark)
                      + "; sleep 60", timeout_s=1)
        await eventually(lambda: not marked(mark), timeout=3.0)

    async def test_nothing_outlives_a_cancelled_command(self, ctx: ToolContext) -> None:
        mark = marker()
        task = asyncio.ensure_future(run(ctx, ESCAPES["env-i-double-fork"].format(mark=mark) + "; sleep 60"))
        await eventually(lambda: bool(marked(mark)))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(lambda: not marked(mark), timeout=3.0)

    async def test_nothing_outlives_the_runtime_exit_hook(self, ws: Path) -> None:
        # kill_all_process_groups is what atexit (and a signal handler) runs: synchronous SIGKILLs to the groups.
        mark = marker()
        box = ShellSandbox(Workspace(ws, SandboxPolicy(mode=self.mode)))
        proc = await box.spawn(["bash", "-c", ESCAPES["env-i-setsid"].format(mark=mark) + "; sleep 60"])
        await eventually(lambda: bool(marked(mark)))
        kill_all_process_groups()
        await eventually(lambda: not marked(mark), timeout=3.0)
        assert await proc.wait() == -signal.SIGKILL

    async def test_the_command_keeps_its_exit_status_environment_and_errors(self, ws: Path) -> None:
        box = ShellSandbox(Workspace(ws, SandboxPolicy(mode=self.mode)))
        for script, code in (("exit 7", 7), ("true", 0), ("kill -TERM $$", -signal.SIGTERM),
                             ("kill -KILL $$", -signal.SIGKILL)):
            proc = await box.spawn(["bash", "-c", script])
            await proc.communicate()
            assert proc.returncode == code, script
        proc = await box.spawn(["bash", "-c", 'echo "$SUBAGENTS_COMMAND/${PERL_BADLANG-none}"; cat /proc/$PPID/comm'])
        out, _ = await proc.communicate()
        tag, comm = out.decode().splitlines()
        assert len(tag) == 21, tag  # tagged
        assert tag.endswith("/none"), tag  # the setting the reaper gave Perl is not passed on
        assert comm == "subagents: reap"  # (comm: the first 15 characters) the command runs under the reaper
        with pytest.raises(FileNotFoundError):
            await box.spawn(["no-such-program-x1"])
        with pytest.raises(FileNotFoundError):
            await box.spawn(["./missing.sh"], cwd=ws)
        (ws / "plain.sh").write_text("echo hi\n")
        with pytest.raises(PermissionError):
            await box.spawn(["./plain.sh"], cwd=ws)

    async def test_output_of_an_ended_command_is_complete(self, ctx: ToolContext) -> None:
        out = await run(ctx, "seq 1 20000 | tail -n 1; echo done >&2")
        assert out.splitlines()[:2] == ["20000", "done"], out


class TestLandlockReaper(_Reaped):
    mode = "landlock"

    async def test_the_command_cannot_signal_its_reaper(self, ctx: ToolContext) -> None:
        # Landlock (ABI >= 6) scopes the command's signals to its own domain: the reaper and the group's first
        # process are outside it.  Killing them first, then escaping, was the way around a reaper.
        mark = marker()
        out = await run(ctx, "kill -9 $PPID 2>&-; echo rc=$?; kill -STOP $PPID 2>&-; echo rc=$?; "
                             "pkill -9 -f '^subagents: ' 2>&-; "
                             "echo rc=$?; " + ESCAPES["env-i-setsid"].format(mark=mark) + WAIT.format(mark=mark))
        assert out.splitlines()[:3] == ["rc=1", "rc=1", "rc=1"], out
        assert "started" in out
        await eventually(lambda: not marked(mark), timeout=3.0)


class TestOffReaper(_Reaped):
    mode = "off"


async def test_without_perl_commands_still_run_tagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No perl (a minimal image): the command runs directly, as before the reaper, and the tag sweep still works.
    monkeypatch.setattr(supervisor, "perl", lambda: None)
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="off")))
    proc = await box.spawn(["bash", "-c", "echo $SUBAGENTS_COMMAND; cat /proc/$PPID/comm"])
    out, _ = await proc.communicate()
    tag, comm = out.decode().splitlines()
    assert len(tag) == 16, out
    assert comm != "subagents: reap", out
    ws = Workspace(tmp_path, SandboxPolicy(mode="off"))
    ctx = ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=ws, sandbox=ShellSandbox(ws))
    mark = marker()
    out = await run(ctx, f"sleep {mark} & echo started")  # the tool kills what is left in the group, and says so
    assert "[background processes the command left running were stopped" in out
    await eventually(lambda: not marked(mark))


def test_this_machine_has_the_reaper() -> None:
    # The tests above must not pass by accident on a machine without it (they would test the fallback).
    assert supervisor.perl() is not None
    assert supervisor.supervisor_argv(["true"], env={}, command_only=[], landlock=False) is not None


@pytest.mark.parametrize("network", [False, True])
@pytest.mark.parametrize("reaper", [True, False])
async def test_a_landlock_command_cannot_set_another_processs_limits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, network: bool, reaper: bool) -> None:
    # Landlock does not cover prlimit(): a command could set the runtime's limits (no file descriptors, a CPU
    # limit that kills it), with or without the network, with or without the reaper.
    import resource

    if not reaper:
        monkeypatch.setattr(supervisor, "perl", lambda: None)
    before = resource.getrlimit(resource.RLIMIT_CORE)
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="landlock", network=network)))
    me = os.getpid()
    proc = await box.spawn(["bash", "-c", f"prlimit --pid {me} --core=0:0; echo set=$?; "
                                          f"prlimit --pid {me} --core > /dev/null; echo query=$?; "
                                          "ulimit -n 64; echo own=$?"])
    out, _ = await proc.communicate()
    assert out.decode().split() == ["set=1", "query=0", "own=0"]
    assert resource.getrlimit(resource.RLIMIT_CORE) == before
