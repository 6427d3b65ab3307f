"""Hooks that misbehave: floods of output, exceptions asyncio treats specially, answers that outlive
their time limit or their arguments, and processes that leave the hook's group."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from procutil import all_dead
from subagents import Decision, HookInput, HookResult, Runtime
from subagents.authority import _hook_run
from subagents.authority.hooks import HookOutcome, Hooks, HookSpec
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

CAP = 10_000  # _hook_run.CONTEXT_CAP


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


def call(event: str = "PreToolUse", **kw: Any) -> HookInput:
    kw.setdefault("arguments", {"command": "ls"})
    return HookInput(event, "root-1", "ada", "general-purpose", cwd="/ws", tool="bash", **kw)


def py_script(ws: Path, name: str, body: str) -> str:
    p = ws / name
    p.write_text(f"#!{sys.executable}\n{body}\n")
    p.chmod(0o755)
    return f"./{name}"


async def run_command(ws: Path, command: str, event: str = "PreToolUse", **kw: Any) -> HookOutcome:
    h = Hooks([HookSpec(event, command=command, source="test", **kw)], cwd=ws)
    return await h.run(event, call(event, result="ok" if event == "PostToolUse" else None), match="bash")


async def run_python(*entries: Any, event: str = "PreToolUse") -> HookOutcome:
    return await Hooks.from_python({event: list(entries)}).run(event, call(event), match="bash")


def one_call(name: str, args: dict[str, Any]) -> FunctionModel:
    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        return ModelResponse("", [ToolCall(name, args)]) if not done else ModelResponse(done[0])

    return FunctionModel(fn)


# -- output that floods ---------------------------------------------------------------------------
async def test_a_reason_and_context_in_json_are_capped(ws: Path) -> None:
    cmd = py_script(ws, "big.py", "import json; print(json.dumps({'decision': 'block', 'reason': 'r' * 400_000, "
                                  "'context': 'c' * 400_000}))")
    out = await run_command(ws, cmd, "PostToolUse")
    assert out.errors == []
    assert out.decision == "block"
    assert len(out.reason) <= CAP
    assert len(out.context) <= CAP


async def test_a_python_hooks_reason_is_capped_too() -> None:
    out = await run_python(lambda inp: HookResult("block", "r" * 400_000, context="c" * 400_000))
    assert len(out.reason) <= CAP
    assert len(out.context) <= CAP


async def test_json_cut_at_the_stdout_cap_says_so(ws: Path) -> None:
    cmd = py_script(ws, "huge.py", "import json; print(json.dumps({'decision': 'block', 'reason': 'x' * 2_000_000}))")
    out = await run_command(ws, cmd, on_error="block")
    [err] = out.errors
    assert "its stdout was longer than 1,000,000 bytes and was cut there" in err.message
    assert out.decision == "block"


async def test_json_nested_too_deeply_is_a_clear_hook_error(ws: Path) -> None:
    cmd = py_script(ws, "deep.py", "print('{\"a\": ' + '[' * 100_000 + ']' * 100_000 + '}')")
    out = await run_command(ws, cmd)
    [err] = out.errors
    assert "printed JSON nested too deeply to read" in err.message


# -- Python hooks that raise what asyncio treats specially ----------------------------------------
async def test_a_sync_hook_raising_cancelled_error_is_a_hook_error_not_a_cancelled_run() -> None:
    def rogue(inp: HookInput) -> None:
        raise asyncio.CancelledError

    out = await run_python({"callback": rogue, "on_error": "block"})
    [err] = out.errors
    assert err.message.endswith("rogue` for PreToolUse raised CancelledError")
    assert out.decision == "block"


async def test_an_async_hook_raising_cancelled_error_is_a_hook_error() -> None:
    async def rogue(inp: HookInput) -> None:
        raise asyncio.CancelledError

    out = await run_python(rogue)
    assert [e.message.rsplit("` ", 1)[1] for e in out.errors] == ["for PreToolUse raised CancelledError"]


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_hook_raising_keyboard_interrupt_is_a_hook_error(is_async: bool) -> None:
    def interrupt(inp: HookInput) -> None:
        raise KeyboardInterrupt("from the hook")

    async def interrupt_async(inp: HookInput) -> None:
        raise KeyboardInterrupt("from the hook")

    out = await run_python(interrupt_async if is_async else interrupt)
    [err] = out.errors
    assert err.message.endswith("for PreToolUse raised KeyboardInterrupt: from the hook")


async def test_the_callers_own_cancellation_still_cancels() -> None:
    started = asyncio.Event()

    async def slow(inp: HookInput) -> None:
        started.set()
        await asyncio.sleep(30)

    task = asyncio.ensure_future(run_python(slow))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_async_hook_that_ignores_cancellation_loses_its_answer_at_its_timeout() -> None:
    async def stubborn(inp: HookInput) -> HookResult:
        try:
            await asyncio.sleep(0.6)
        except asyncio.CancelledError:
            await asyncio.sleep(0.6)
        return HookResult("allow", "too late")

    t0 = time.monotonic()
    out = await run_python({"callback": stubborn, "timeout_s": 0.1})
    assert time.monotonic() - t0 < 0.5
    assert out.decision is None
    assert [e.message.rsplit("` ", 1)[1] for e in out.errors] == ["for PreToolUse did not finish within 0.1 s"]
    await asyncio.sleep(0.7)  # let it end before the loop does


async def test_a_python_stop_answer_blocks_a_tool_call_like_continue_false() -> None:
    out = await run_python(lambda inp: HookResult(stop=True, reason="budget spent"))
    assert (out.decision, out.reason, out.stop) == ("block", "budget spent", True)


async def test_a_python_stop_answer_on_stop_lets_the_agent_end() -> None:
    out = await run_python(lambda inp: HookResult(stop=True), event="Stop")
    assert (out.decision, out.stop) == (None, True)


# -- an answer holds for what its hook saw --------------------------------------------------------
async def test_an_allow_does_not_cover_arguments_a_later_hook_replaced() -> None:
    out = await run_python(lambda inp: HookResult("allow", "ls is fine"),
                           lambda inp: HookResult(arguments={"command": "rm -rf build"}))
    assert out.arguments == {"command": "rm -rf build"}
    assert out.decision is None


async def test_a_hook_that_replaces_and_allows_keeps_its_allow() -> None:
    out = await run_python(lambda inp: HookResult(arguments={"command": "ls -a"}),
                           lambda inp: HookResult("allow", arguments={"command": "ls -la"}))
    assert (out.decision, out.arguments) == ("allow", {"command": "ls -la"})


async def test_in_a_run_the_replaced_arguments_still_need_approval(workdir: Path) -> None:
    hooks = {"PreToolUse": [lambda inp: HookResult("allow"),
                            lambda inp: HookResult(arguments={"path": "other.txt", "content": "changed"})]}
    async with Runtime(one_call("write_file", {"path": "a.txt", "content": "x"}), workdir=workdir,
                       store="memory://", hooks=hooks) as rt:
        r = await rt.run("go")
    assert not (workdir / "other.txt").exists()
    assert "no one can approve it here" in r.text


async def test_a_permission_request_allow_with_replacement_input_is_not_used() -> None:
    def rewrite(inp: HookInput) -> dict[str, Any]:
        return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
            "behavior": "allow", "updatedInput": {"path": "safe/a.txt", "content": "x"}}}}

    out = await Hooks.from_python({"PermissionRequest": [rewrite]}).run(
        "PermissionRequest", call("PermissionRequest", arguments={"path": "danger.txt", "content": "x"}),
        match="write_file")
    assert out.decision is None
    [err] = out.errors
    assert "PermissionRequest cannot apply" in err.message


async def test_a_permission_request_deny_with_replacement_input_still_denies() -> None:
    out = await run_python(lambda inp: {"decision": "block", "reason": "no", "arguments": {"command": "x"}},
                           event="PermissionRequest")
    assert (out.decision, out.errors) == ("block", [])


async def test_in_a_run_a_permission_request_rewrite_does_not_run_the_original(workdir: Path) -> None:
    def rewrite(inp: HookInput) -> dict[str, Any]:
        return {"hookSpecificOutput": {"decision": {"behavior": "allow",
                                                    "updatedInput": {"path": "safe.txt", "content": "x"}}}}

    async with Runtime(one_call("write_file", {"path": "danger.txt", "content": "x"}), workdir=workdir,
                       store="memory://", hooks={"PermissionRequest": [rewrite]}) as rt:
        await rt.run("go")
    assert not (workdir / "danger.txt").exists()


# -- processes that leave the hook's group (no sandbox launcher) ----------------------------------
async def test_a_process_that_left_the_group_dies_with_a_timed_out_hook(ws: Path) -> None:
    out = await run_command(ws, "setsid sh -c 'exec sleep 60' & echo $! > pid; sleep 60", timeout_s=0.5)
    assert "did not finish within 0.5 s" in out.errors[0].message
    assert all_dead([int((ws / "pid").read_text())])


async def test_a_process_that_left_the_group_holding_stdout_is_killed(ws: Path) -> None:
    t0 = time.monotonic()
    out = await run_command(ws, "setsid sh -c 'exec sleep 60' & echo $! > pid; echo '{\"decision\": \"allow\"}'")
    assert time.monotonic() - t0 < 3
    assert out.decision == "allow"
    assert all_dead([int((ws / "pid").read_text())])


async def test_cancelled_before_its_output_is_read_the_hook_is_killed(ws: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()

    async def cancelled_while_connecting(*args: Any, **kw: Any) -> Any:
        for _ in range(250):  # until the hook has said who it is
            if (ws / "pid").exists() and (ws / "pid").read_text().strip():
                break
            await asyncio.sleep(0.02)
        raise asyncio.CancelledError

    monkeypatch.setattr(loop, "connect_read_pipe", cancelled_while_connecting)
    with pytest.raises(asyncio.CancelledError):
        await run_command(ws, "echo $$ > pid; exec sleep 60")
    monkeypatch.undo()
    assert all_dead([int((ws / "pid").read_text())])



# -- Claude Code's "ask" outranks "allow" ---------------------------------------------------------
ASK = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                              "permissionDecisionReason": "confirm writes to prod"}}


async def test_an_ask_takes_back_an_earlier_allow() -> None:
    out = await run_python(lambda inp: HookResult("allow"), lambda inp: ASK)
    assert (out.decision, out.ask, out.reason) == (None, True, "confirm writes to prod")


async def test_an_allow_after_an_ask_does_not_count() -> None:
    out = await run_python(lambda inp: ASK, lambda inp: HookResult("allow"))
    assert (out.decision, out.ask) == (None, True)


async def test_ask_and_allow_in_one_answer_is_an_ask(ws: Path) -> None:
    reply = json.dumps({"decision": "allow", **ASK})
    out = await run_command(ws, f"echo '{reply}'")
    assert (out.decision, out.ask, out.errors) == (None, True, [])


async def test_an_ask_does_not_soften_a_block() -> None:
    out = await run_python(lambda inp: ASK, lambda inp: HookResult("block", "no"))
    assert (out.decision, out.reason) == ("block", "no")


async def test_in_a_run_an_ask_means_the_call_is_not_allowed_by_the_hooks(workdir: Path) -> None:
    hooks = {"PreToolUse": [lambda inp: HookResult("allow"), lambda inp: ASK]}
    async with Runtime(one_call("write_file", {"path": "a.txt", "content": "x"}), workdir=workdir,
                       store="memory://", hooks=hooks) as rt:
        r = await rt.run("go")
    assert not (workdir / "a.txt").exists()
    assert "no one can approve it here" in r.text


async def test_an_ask_makes_a_person_decide_even_where_the_mode_allows(workdir: Path) -> None:
    """Claude Code's "ask" forces the question: in yolo mode (everything allowed) the call still asks, and with
    nobody to answer it is refused; without the hook the same call runs."""
    asked: list[str] = []

    def approver(req: Any) -> Any:
        asked.append(req.reason)
        return Decision("deny", message="not now")

    for hooks, runs in (({"PreToolUse": [lambda inp: ASK]}, False), ({}, True)):
        async with Runtime(one_call("write_file", {"path": "a.txt", "content": "x"}), workdir=workdir,
                           store="memory://", hooks=hooks, permission_mode="yolo", approver=approver) as rt:
            await rt.run("go")
        assert (workdir / "a.txt").exists() is runs
    assert asked == ["a PreToolUse hook asks for a person's decision: confirm writes to prod"]


# -- no descriptor is lost when a hook cannot start -----------------------------------------------
def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_no_descriptor_leaks_when_the_stdin_file_cannot_be_made(ws: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(*args: Any, **kw: Any) -> Any:
        raise OSError(28, "No space left on device")

    await run_command(ws, "true")  # warm up (the event loop's own descriptors)
    before = open_fds()
    monkeypatch.setattr(_hook_run.tempfile, "TemporaryFile", disk_full)
    out = await run_command(ws, "true")
    assert open_fds() == before
    assert out.errors[0].message.endswith("could not be started: [Errno 28] No space left on device")


async def test_no_descriptor_leaks_when_the_second_pipe_cannot_be_made(ws: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real, made = os.pipe, []

    def pipe() -> tuple[int, int]:
        made.append(1)
        if len(made) == 2:
            raise OSError(24, "Too many open files")
        return real()

    await run_command(ws, "true")
    before = open_fds()
    monkeypatch.setattr(_hook_run.os, "pipe", pipe)
    out = await run_command(ws, "true")
    monkeypatch.undo()
    assert open_fds() == before
    assert "could not be started: [Errno 24] Too many open files" in out.errors[0].message


async def test_continue_false_outranks_a_block_on_stop(ws: Path) -> None:  # Claude Code: it takes precedence
    out = await run_command(ws, "echo '{\"decision\": \"block\", \"reason\": \"more\", \"continue\": false}'", "Stop")
    assert (out.decision, out.stop) == (None, True)
