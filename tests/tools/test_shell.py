"""The ``bash`` tool: output, exit codes, caps, and killing the whole process group on timeout or cancel.

Process checks read ``/proc``: in a container whose PID 1 does not reap orphans, killed grandchildren
stay zombies, so "gone" means "no ``/proc`` entry, or a zombie".
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from subagents.exceptions import ToolError
from subagents.messages import ToolUseBlock
from subagents.tools.base import ToolCategory, ToolContext, ToolRegistry
from subagents.tools.shell import KILL_GRACE_S, bash

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


def group_members(pgid: int) -> list[int]:
    """The pids of the group that still run (zombies excluded)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                out.append(int(name))
    return out


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for observable state, with a bound (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not reached within {timeout} s")
        await asyncio.sleep(0.01)


def read_pid(path: Path) -> int | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") else None


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
    out = await run(ctx, "for i in 1 2 3; do echo $i; done | paste -sd+ - | bc > sum.txt && cat sum.txt")
    assert out == "6\nexit code 0"
    assert (ws_root / "sum.txt").read_text() == "6\n"


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


async def test_timeout_kills_the_process_group(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as info:
        await run(ctx, "echo $$; sleep 300 & echo $!; wait", timeout_s=0.5)
    msg = str(info.value)
    head, pgid, sleeper, *rest = msg.splitlines()
    assert head == "The command was killed after 0.5 s because it ran past its timeout; output so far:"
    assert rest == [
        "",
        "Pass a larger timeout_s, or run long jobs in the background with their output redirected to a file.",
    ]
    await eventually(lambda: not running(int(sleeper)))
    await eventually(lambda: not group_members(int(pgid)))


async def test_timeout_kills_grandchildren(ctx: ToolContext) -> None:
    # A child shell that starts a grandchild: both are in the command's process group.
    with pytest.raises(ToolError) as info:
        await run(ctx, "echo $$; bash -c 'sleep 300 & echo $!; wait' & wait", timeout_s=0.5)
    _, pgid, grandchild, *_ = str(info.value).splitlines()
    await eventually(lambda: not running(int(grandchild)))
    await eventually(lambda: not group_members(int(pgid)))


async def test_timeout_sigkills_what_ignores_sigterm(ctx: ToolContext) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError) as info:
        await run(ctx, "trap '' TERM; echo $$; sleep 300 & echo $!; wait", timeout_s=0.3)
    elapsed = time.monotonic() - started
    _, pgid, sleeper, *_ = str(info.value).splitlines()
    await eventually(lambda: not running(int(sleeper)))
    assert not group_members(int(pgid))
    assert elapsed < 0.3 + KILL_GRACE_S + 2.0


async def test_default_timeout_comes_from_the_context(ctx: ToolContext) -> None:
    ctx.bash_timeout_s = 0.2
    with pytest.raises(ToolError) as info:
        await run(ctx, "sleep 30")
    assert str(info.value).startswith("The command was killed after 0.2 s because it ran past its timeout;")


async def test_cancel_kills_the_process_group_and_reraises(ctx: ToolContext, ws_root: Path) -> None:
    pg_file, pid_file = ws_root / "pgid", ws_root / "pid"
    task = asyncio.create_task(run(ctx, "echo $$ > pgid; sleep 300 & echo $! > pid; wait", timeout_s=60))
    await eventually(lambda: read_pid(pid_file) is not None and read_pid(pg_file) is not None)
    pgid, sleeper = read_pid(pg_file), read_pid(pid_file)
    assert pgid is not None
    assert sleeper is not None
    assert running(sleeper)
    assert group_members(pgid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: not running(sleeper))
    await eventually(lambda: not group_members(pgid))


async def test_cancel_through_wait_for_kills_grandchildren(ctx: ToolContext, ws_root: Path) -> None:
    # How a run's timeout reaches the tool: the awaiting task is cancelled from outside.
    cmd = "echo $$ > pgid; bash -c 'sleep 300 & echo $! > pid; wait'"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(run(ctx, cmd, timeout_s=60), timeout=0.5)
    pgid, grandchild = read_pid(ws_root / "pgid"), read_pid(ws_root / "pid")
    assert pgid is not None
    assert grandchild is not None
    await eventually(lambda: not running(grandchild))
    await eventually(lambda: not group_members(pgid))


async def test_background_process_holding_the_output_is_stopped(ctx: ToolContext) -> None:
    out = await run(ctx, "sleep 300 & echo $!", timeout_s=30)
    pid, *rest = out.splitlines()
    assert rest == [
        "[background processes that kept the output open were stopped; to keep one running, redirect its "
        "output: `cmd > log 2>&1 &`]",
        "exit code 0",
    ]
    await eventually(lambda: not running(int(pid)))


async def test_detached_background_process_keeps_running(ctx: ToolContext) -> None:
    out = await run(ctx, "sleep 300 > /dev/null 2>&1 & echo $!", timeout_s=30)
    pid, code = out.splitlines()
    assert code == "exit code 0"
    try:
        assert running(int(pid))
    finally:
        os.kill(int(pid), signal.SIGKILL)
    await eventually(lambda: not running(int(pid)))


async def test_timeout_through_the_registry_is_a_tool_error(ctx: ToolContext) -> None:
    reg = ToolRegistry([bash])
    result = await reg.execute(ToolUseBlock("c1", "bash", {"command": "echo hi; sleep 30", "timeout_s": 0.3}), ctx)
    assert result.is_error
    assert result.content.startswith(
        "The command was killed after 0.3 s because it ran past its timeout; output so far:\nhi\n"
    )
    ok = await reg.execute(ToolUseBlock("c2", "bash", {"command": "exit 1"}), ctx)
    assert (ok.content, ok.is_error) == ("(no output)\nexit code 1", False)


async def test_a_second_cancel_during_the_kill_still_reaps_the_shell(ctx: ToolContext, ws_root: Path) -> None:
    # The group ignores SIGTERM, so the kill waits out its grace; a second cancel lands in it and
    # must neither leave the shell running nor swallow the cancellation.
    pid_file = ws_root / "pid"
    task = asyncio.create_task(run(ctx, "trap '' TERM; echo $$ > pid; sleep 300", timeout_s=60))
    await eventually(lambda: read_pid(pid_file) is not None)
    shell = read_pid(pid_file)
    assert shell is not None
    task.cancel()
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not running(shell)
    gc.collect()  # with filterwarnings=error, a ResourceWarning from an unreaped Popen would fail here
