"""The ``bash`` tool: output, exit codes, caps, and killing everything a command started on timeout or cancel.

Every test runs through each shell sandbox backend (bubblewrap, Landlock, off).  Processes are found
by a unique marker in their command line (inside bubblewrap ``$$`` is a PID of the sandbox's own
namespace, not of the host).  Process checks read ``/proc``: in a container whose PID 1 does not reap
orphans, killed grandchildren stay zombies, so "gone" means "no ``/proc`` entry, or a zombie".
The attacks on the sandbox itself are in ``tests/sandbox/``.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from subagents.exceptions import ToolError
from subagents.messages import ToolUseBlock
from subagents.models.base import AgentInfo
from subagents.sandbox import SandboxPolicy, Workspace, supervisor
from subagents.sandbox.shell import ShellSandbox
from subagents.tools.base import ToolCategory, ToolContext, ToolRegistry
from subagents.tools.shell import KILL_GRACE_S, bash, default_sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks processes through /proc")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()  # state ppid pgrp ...


def running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


_MARKS = itertools.count(1)


def marker() -> str:
    """A unique ``sleep`` duration: every process whose command line holds it belongs to one test."""
    return f"{3000 + next(_MARKS) + os.getpid() % 1000 / 1000:.3f}"


def marked(mark: str, comm: str | None = None) -> list[int]:
    """The running processes (zombies excluded) whose command line holds ``mark`` (and named ``comm``)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            if comm is not None and Path(f"/proc/{name}/comm").read_text().strip() != comm:
                continue
        except OSError:
            continue
        if mark.encode() in cmdline and running(int(name)):
            out.append(int(name))
    return out


def exists(path: str) -> bool:
    return os.path.lexists(path)


@pytest.fixture(params=["bwrap", "landlock", "off"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ctx(ws_root: Path, backend: str) -> ToolContext:
    """A context whose sandbox uses ``backend`` (never a silent fallback: the backend is checked)."""
    ws = Workspace(ws_root, SandboxPolicy(mode=backend))
    box = ShellSandbox(ws)
    assert box.backend == backend
    (ws_root / "sub").mkdir()  # Landlock cannot let a command create entries in the root itself
    return ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=ws, sandbox=box)


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for observable state, with a bound (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not reached within {timeout} s")
        await asyncio.sleep(0.01)


async def run(ctx: ToolContext, command: str, timeout_s: float | None = None) -> str:
    args: dict[str, object] = {"command": command}
    if timeout_s is not None:
        args["timeout_s"] = timeout_s
    return await bash.call(args, ctx)


def test_bash_is_an_async_execute_tool() -> None:
    assert bash.category is ToolCategory.EXECUTE
    assert bash._async
    assert not bash.parallel_safe
    props = bash.parameters["properties"]
    assert bash.parameters["required"] == ["command"]
    assert props["command"] == {
        "type": "string",
        "description": "the shell command (bash syntax: pipes, &&, redirections and so on work).",
    }
    assert "number" in props["timeout_s"]["type"]
    assert props["timeout_s"]["description"] == (
        "seconds before the command is killed; the agent's default applies when omitted."
    )


async def test_output_merged_exit_code_and_cwd(ctx: ToolContext, ws_root: Path) -> None:
    out = await run(ctx, "echo out; echo err >&2; pwd; exit 3")
    assert out == f"out\nerr\n{ws_root}\nexit code 3"
    assert await run(ctx, "printf 'no newline'") == "no newline\nexit code 0"
    assert await run(ctx, "true") == "(no output)\nexit code 0"


async def test_stdin_is_closed(ctx: ToolContext) -> None:
    assert await run(ctx, "cat; echo done", timeout_s=10) == "done\nexit code 0"


async def test_bash_syntax_and_files_in_workspace(ctx: ToolContext, ws_root: Path) -> None:
    out = await run(ctx, "cd sub; for i in 1 2 3; do echo $i; done | paste -sd+ - | bc > sum.txt && cat sum.txt")
    assert out == "6\nexit code 0"
    assert (ws_root / "sub" / "sum.txt").read_text() == "6\n"


async def test_output_keeps_head_and_tail(ctx: ToolContext) -> None:
    out = await run(ctx, r"printf START; head -c 100000 /dev/zero | tr '\0' x; printf END")
    assert out.startswith("START" + "x" * 100)
    assert out.endswith("x" * 100 + "END\nexit code 0")
    assert (
        "\n\n[... 70,008 bytes of output omitted from the middle (100,008 in all); redirect the output to a file "
        "and use grep or read_file on it to see everything ...]\n\n"
    ) in out
    assert len(out) < 30_400


async def test_bad_arguments(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as info:
        await run(ctx, "   ")
    assert str(info.value) == "command is empty; pass the shell command to run."
    with pytest.raises(ToolError) as info:
        await run(ctx, "true", timeout_s=0)
    assert str(info.value) == "timeout_s must be a positive number of seconds, got 0."


async def test_timeout_kills_everything_the_command_started(ctx: ToolContext) -> None:
    mark = marker()
    with pytest.raises(ToolError) as info:
        await run(ctx, f"echo started; sleep {mark} & wait", timeout_s=0.5)
    head, started, *rest = str(info.value).splitlines()
    assert head == "The command was killed after 0.5 s because it ran past its timeout; output so far:"
    assert started == "started"
    assert rest == [
        "",
        "Pass a larger timeout_s, or run long jobs in the background with their output redirected to a file.",
    ]
    await eventually(lambda: not marked(mark))


async def test_timeout_kills_grandchildren(ctx: ToolContext) -> None:
    # A child shell that starts a grandchild: both die with the command.
    mark = marker()
    with pytest.raises(ToolError):
        await run(ctx, f"bash -c 'sleep {mark} & wait' & wait", timeout_s=0.5)
    await eventually(lambda: not marked(mark))


async def test_timeout_sigkills_what_ignores_sigterm(ctx: ToolContext) -> None:
    mark = marker()
    started = time.monotonic()
    with pytest.raises(ToolError):
        await run(ctx, f"trap '' TERM; sleep {mark} & wait", timeout_s=0.3)
    elapsed = time.monotonic() - started
    await eventually(lambda: not marked(mark))
    assert elapsed < 0.3 + KILL_GRACE_S + 2.0


async def test_default_timeout_comes_from_the_context(ctx: ToolContext) -> None:
    ctx.bash_timeout_s = 0.2
    with pytest.raises(ToolError) as info:
        await run(ctx, "sleep 30")
    assert str(info.value).startswith("The command was killed after 0.2 s because it ran past its timeout;")


async def test_cancel_kills_everything_and_reraises(ctx: ToolContext) -> None:
    mark = marker()
    task = asyncio.create_task(run(ctx, f"sleep {mark} & wait", timeout_s=60))
    await eventually(lambda: bool(marked(mark, "sleep")))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: not marked(mark))


async def test_cancel_through_wait_for_kills_grandchildren(ctx: ToolContext) -> None:
    # How a run's timeout reaches the tool: the awaiting task is cancelled from outside.
    mark = marker()
    task = asyncio.ensure_future(asyncio.wait_for(run(ctx, f"bash -c 'sleep {mark} & wait'", timeout_s=60), 30))
    await eventually(lambda: bool(marked(mark, "sleep")))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: not marked(mark))


async def test_background_process_ends_with_the_command(ctx: ToolContext, backend: str) -> None:
    # With bubblewrap the kernel ends the sandbox's PID namespace with the shell, elsewhere the command's
    # reaper (sandbox/supervisor.py) ends them; without a reaper (no perl) the tool kills the group, and says so.
    for command in ("sleep {} & echo started", "sleep {} > /dev/null 2>&1 & echo started"):
        mark = marker()
        out = await run(ctx, command.format(mark), timeout_s=30)
        note = ("[background processes the command left running were stopped: every process a command starts "
                "ends with it]")
        reaped = backend == "bwrap" or supervisor.perl() is not None
        expected = ["started", "exit code 0"] if reaped else ["started", note, "exit code 0"]
        assert out.splitlines() == expected
        await eventually(lambda mark=mark: not marked(mark))  # type: ignore[misc]


async def test_plan_mode_reads_but_cannot_write_the_workspace(ctx: ToolContext, ws_root: Path, backend: str) -> None:
    (ws_root / "sub" / "notes.txt").write_text("hello\n")
    ctx.shell_writable = False
    out = await run(ctx, "cat sub/notes.txt; ls; echo x > sub/new.txt; echo y >> sub/notes.txt; echo $?")
    assert out.splitlines()[:2] == ["hello", "sub"]
    if backend == "off":  # unconfined: nothing enforces read-only (the "off" warning says so)
        assert out.endswith("0\nexit code 0")
        return
    assert out.endswith("1\nexit code 0")
    assert not (ws_root / "sub" / "new.txt").exists()
    assert (ws_root / "sub" / "notes.txt").read_text() == "hello\n"


async def test_the_default_sandbox_is_used_and_cached_per_workspace(ws_root: Path) -> None:
    ws = Workspace(ws_root)
    ctx = ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=ws)
    assert default_sandbox(ws) is default_sandbox(ws)
    assert default_sandbox(ws).backend == "bwrap"  # auto, on this Linux
    out = await run(ctx, "cat /proc/1/comm; echo x > /etc/subagents-test-probe; echo $?")
    assert out == "bwrap\n/bin/bash: line 1: /etc/subagents-test-probe: Read-only file system\n1\nexit code 0"
    assert not exists("/etc/subagents-test-probe")


async def test_timeout_through_the_registry_is_a_tool_error(ctx: ToolContext) -> None:
    reg = ToolRegistry([bash])
    result = await reg.execute(ToolUseBlock("c1", "bash", {"command": "echo hi; sleep 30", "timeout_s": 0.3}), ctx)
    assert result.is_error
    assert result.content.startswith(
        "The command was killed after 0.3 s because it ran past its timeout; output so far:\nhi\n"
    )
    ok = await reg.execute(ToolUseBlock("c2", "bash", {"command": "exit 1"}), ctx)
    assert (ok.content, ok.is_error) == ("(no output)\nexit code 1", False)


async def test_a_second_cancel_during_the_kill_still_reaps_the_shell(ctx: ToolContext) -> None:
    # The group ignores SIGTERM, so the kill waits out its grace (bubblewrap itself does not, it
    # dies at once); a second cancel lands in it and must neither leave the shell running nor
    # swallow the cancellation.
    mark = marker()
    task = asyncio.create_task(run(ctx, f"trap '' TERM; sleep {mark}", timeout_s=60))
    await eventually(lambda: bool(marked(mark, "sleep")))
    task.cancel()
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: not marked(mark))
    gc.collect()  # with filterwarnings=error, a ResourceWarning from an unreaped Popen would fail here
