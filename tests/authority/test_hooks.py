"""Command hooks, for real: shell scripts in a temporary workspace, Claude Code's exit codes and JSON."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from procutil import alive, all_dead
from subagents.authority.hooks import HookInput, HookOutcome, Hooks, HookSpec


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


def script(ws: Path, name: str, body: str) -> str:
    """An executable ``/bin/sh`` script in the workspace; returns the command that runs it."""
    p = ws / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return f"./{name}"


def hooks(ws: Path, *commands: str, event: str = "PreToolUse", **kw: Any) -> Hooks:
    return Hooks([HookSpec(event, command=c, source="test", **kw) for c in commands], cwd=ws)


def call(event: str = "PreToolUse", tool: str | None = "bash", **kw: Any) -> HookInput:
    kw.setdefault("arguments", {"command": "ls"} if tool else None)
    return HookInput(event, "root-1", "ada", "general-purpose", cwd="/ws", tool=tool, **kw)


def read_json(path: str) -> Any:
    return json.loads(Path(path).read_text())


async def run(h: Hooks, event: str = "PreToolUse", match: str | None = "bash", **kw: Any) -> HookOutcome:
    return await h.run(event, call(event, **kw), match=match)


# -- exit codes ----------------------------------------------------------------------------------
async def test_exit_2_blocks_with_stderr_as_reason(ws: Path) -> None:
    cmd = script(ws, "guard.sh", 'echo "ignored" ; echo "  no force pushes here  " >&2; exit 2')
    out = await run(hooks(ws, cmd))
    assert out.decision == "block"
    assert out.reason == "no force pushes here"
    assert out.blocked_by is not None
    assert out.blocked_by.command == cmd
    assert out.errors == []


async def test_exit_2_reason_is_capped(ws: Path) -> None:
    out = await run(hooks(ws, f"{sys.executable} -c \"import sys; sys.stderr.write('x' * 50000); sys.exit(2)\""))
    assert out.decision == "block"
    assert 1_000 < len(out.reason) <= 2_000


async def test_exit_0_without_output_goes_on(ws: Path) -> None:
    out = await run(hooks(ws, "true"))
    assert (out.decision, out.reason, out.arguments, out.context, out.errors) == (None, "", None, "", [])


async def test_exit_1_is_an_error_and_the_call_goes_on(ws: Path) -> None:
    cmd = script(ws, "broken.sh", "echo 'jq: command not found' >&2; exit 1")
    out = await run(hooks(ws, cmd))
    assert out.decision is None
    [err] = out.errors
    assert err.exit_code == 1
    assert err.message == f"hook `{cmd}` for PreToolUse exited with code 1: jq: command not found"


async def test_exit_1_with_on_error_block_fails_closed(ws: Path) -> None:
    cmd = script(ws, "broken.sh", "echo boom >&2; exit 1")
    out = await run(hooks(ws, cmd, on_error="block"))
    assert out.decision == "block"
    assert out.blocked_by is not None
    assert out.blocked_by.command == cmd
    assert "exited with code 1: boom" in out.reason
    assert 'on_error = "block"' in out.reason
    assert len(out.errors) == 1


async def test_missing_script_is_an_error_naming_command_and_code(ws: Path) -> None:
    out = await run(hooks(ws, "./guard.sh"))
    [err] = out.errors
    assert err.exit_code == 127
    assert err.message.startswith("hook `./guard.sh` for PreToolUse exited with code 127: ")
    assert "not found" in err.message
    assert out.decision is None


async def test_script_that_is_not_executable(ws: Path) -> None:
    (ws / "guard.sh").write_text("#!/bin/sh\nexit 2\n")
    out = await run(hooks(ws, "./guard.sh", on_error="block"))
    [err] = out.errors
    assert err.exit_code == 126
    assert "chmod" in err.message
    assert out.decision == "block"


async def test_a_hook_killed_by_a_signal(ws: Path) -> None:
    out = await run(hooks(ws, "kill -TERM $$"))
    [err] = out.errors
    assert "killed by SIGTERM" in err.message


async def test_hook_that_cannot_start_is_an_error(tmp_path: Path) -> None:
    out = await run(hooks(tmp_path / "gone", "true"))
    [err] = out.errors
    assert "could not be started" in err.message


# -- stdout JSON ---------------------------------------------------------------------------------
@pytest.mark.parametrize("word", ["allow", "approve"])
async def test_allow_via_json(ws: Path, word: str) -> None:
    cmd = script(ws, "ok.sh", f"echo '{{\"decision\": \"{word}\", \"reason\": \"read-only\"}}'")
    out = await run(hooks(ws, cmd))
    assert (out.decision, out.reason, out.errors) == ("allow", "read-only", [])


@pytest.mark.parametrize("word", ["block", "deny"])
async def test_block_via_json(ws: Path, word: str) -> None:
    cmd = script(ws, "no.sh", f"echo '{{\"decision\": \"{word}\", \"reason\": \"not today\"}}'")
    out = await run(hooks(ws, cmd))
    assert (out.decision, out.reason) == ("block", "not today")


async def test_claude_code_hook_specific_output(ws: Path) -> None:
    deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": "secrets live there"}}
    out = await run(hooks(ws, script(ws, "deny.sh", f"echo '{json.dumps(deny)}'")))
    assert (out.decision, out.reason) == ("block", "secrets live there")

    allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                    "updatedInput": {"command": "ls -la"}, "additionalContext": "listing"}}
    out = await run(hooks(ws, script(ws, "allow.sh", f"echo '{json.dumps(allow)}'")))
    assert (out.decision, out.arguments, out.context) == ("allow", {"command": "ls -la"}, "listing")

    ask = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}
    out = await run(hooks(ws, script(ws, "ask.sh", f"echo '{json.dumps(ask)}'")))
    assert (out.decision, out.errors) == (None, [])


async def test_permission_request_decision_form(ws: Path) -> None:
    reply = {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                    "decision": {"behavior": "deny", "message": "ask Bob"}}}
    out = await run(hooks(ws, script(ws, "pr.sh", f"echo '{json.dumps(reply)}'"), event="PermissionRequest"),
                    "PermissionRequest")
    assert (out.decision, out.reason) == ("block", "ask Bob")


async def test_continue_false_blocks_with_stop_reason(ws: Path) -> None:
    cmd = script(ws, "halt.sh", "echo '{\"continue\": false, \"stopReason\": \"budget spent\"}'")
    out = await run(hooks(ws, cmd))
    assert (out.decision, out.reason, out.stop) == ("block", "budget spent", True)


async def test_continue_false_on_stop_does_not_keep_the_agent_working(ws: Path) -> None:
    cmd = script(ws, "halt.sh", "echo '{\"continue\": false, \"stopReason\": \"done\"}'")
    out = await run(hooks(ws, cmd, event="Stop"), "Stop", match=None, tool=None, result="the answer")
    assert (out.decision, out.stop) == (None, True)


async def test_our_arguments_and_context_keys(ws: Path) -> None:
    cmd = script(ws, "fix.sh", "echo '{\"arguments\": {\"command\": \"ls -a\"}, \"context\": \"hidden files too\"}'")
    out = await run(hooks(ws, cmd))
    assert (out.decision, out.arguments, out.context) == (None, {"command": "ls -a"}, "hidden files too")


async def test_replacement_arguments_pass_down_the_chain(ws: Path) -> None:
    first = script(ws, "one.sh", "echo '{\"arguments\": {\"command\": \"git status\"}}'")
    seen = ws / "seen.json"
    second = script(ws, "two.sh", f"cat > {seen}; echo '{{\"decision\": \"allow\"}}'")
    out = await run(hooks(ws, first, second))
    assert json.loads(seen.read_text())["tool_input"] == {"command": "git status"}
    assert (out.decision, out.arguments) == ("allow", {"command": "git status"})


async def test_replacement_arguments_only_count_on_pre_tool_use(ws: Path) -> None:
    cmd = script(ws, "fix.sh", "echo '{\"arguments\": {\"command\": \"ls -a\"}}'")
    out = await run(hooks(ws, cmd, event="PostToolUse"), "PostToolUse", result="ok")
    assert out.arguments is None


async def test_broken_json_is_an_error(ws: Path) -> None:
    cmd = script(ws, "bad.sh", "echo '{\"decision\": \"block\",}'")
    out = await run(hooks(ws, cmd, on_error="block"))
    [err] = out.errors
    assert "looks like JSON but is not valid JSON" in err.message
    assert out.decision == "block"


async def test_unknown_decision_is_an_error_not_an_allow(ws: Path) -> None:
    out = await run(hooks(ws, script(ws, "typo.sh", "echo '{\"decision\": \"blokc\"}'")))
    [err] = out.errors
    assert "'blokc'" in err.message
    assert out.decision is None


async def test_plain_stdout_is_context_only_where_claude_code_says(ws: Path) -> None:
    cmd = script(ws, "note.sh", "echo 'the build is red'")
    out = await run(hooks(ws, cmd, event="UserPromptSubmit"), "UserPromptSubmit", match=None, tool=None, prompt="hi")
    assert out.context == "the build is red"
    out = await run(hooks(ws, cmd, event="PostToolUse"), "PostToolUse", result="done")
    assert out.context == "the build is red"
    out = await run(hooks(ws, cmd))
    assert (out.context, out.errors) == ("", [])


# -- the process ---------------------------------------------------------------------------------
async def test_a_hanging_hook_is_killed_with_its_group_at_its_timeout(ws: Path) -> None:
    pids = ws / "pids"
    cmd = script(ws, "hang.sh", f"echo $$ > {pids}; sleep 60 & echo $! >> {pids}; wait")
    t0 = time.monotonic()
    out = await run(hooks(ws, cmd, timeout_s=0.5))
    assert time.monotonic() - t0 < 5
    [err] = out.errors
    assert err.message == (f"hook `{cmd}` for PreToolUse did not finish within 0.5 s and was killed, with every "
                           "process it started")
    assert out.decision is None  # on_error = "allow": the run goes on
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    assert all_dead(started)


async def test_background_leftovers_holding_stdout_do_not_stall_the_hook(ws: Path) -> None:
    pids = ws / "pids"
    cmd = script(ws, "bg.sh", f"sleep 60 & echo $! > {pids}; echo '{{\"decision\": \"allow\"}}'")
    t0 = time.monotonic()
    out = await run(hooks(ws, cmd, timeout_s=10))
    assert time.monotonic() - t0 < 3
    assert (out.decision, out.errors) == ("allow", [])
    assert all_dead([int(pids.read_text())])


async def test_cancelling_the_run_kills_the_hook(ws: Path) -> None:
    pids = ws / "pids"
    cmd = script(ws, "hang.sh", f"echo $$ > {pids}; exec sleep 60")
    task = asyncio.create_task(run(hooks(ws, cmd)))
    while not pids.exists() or not pids.read_text().strip():  # noqa: ASYNC110 (a file the hook writes)
        await asyncio.sleep(0.01)
    pid = int(pids.read_text())
    assert alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all_dead([pid])


async def test_a_hook_that_ignores_its_stdin(ws: Path) -> None:
    big = {"command": "x" * 500_000}
    out = await run(hooks(ws, "exit 2"), arguments=big)
    assert out.decision == "block"


async def test_environment_is_scrubbed_and_names_the_event(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("GH_TOKEN", "ghp-secret")
    dump = ws / "env.txt"
    cmd = script(ws, "env.sh", f"env > {dump}; pwd >> {dump}")
    await run(hooks(ws, cmd))
    text = dump.read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert "ANTHROPIC_API_KEY" not in env
    assert "GH_TOKEN" not in env
    assert "sk-ant-secret" not in text
    assert env["SUBAGENTS_HOOK_EVENT"] == "PreToolUse"
    assert env["SUBAGENTS_PROJECT_DIR"] == env["CLAUDE_PROJECT_DIR"] == str(ws)
    assert text.splitlines()[-1] == str(ws)  # the working directory is the workspace


async def test_extra_env_is_added(ws: Path) -> None:
    dump = ws / "env.txt"
    h = Hooks([HookSpec("PreToolUse", command=f"env > {dump}")], cwd=ws, env={"MYAPP_MODE": "ci"})
    await run(h)
    assert "MYAPP_MODE=ci" in dump.read_text().splitlines()


async def test_stdin_json_has_the_documented_fields(ws: Path) -> None:
    seen = ws / "in.json"
    h = Hooks([HookSpec(e, command=f"cat > {seen}.{e}") for e in ("PreToolUse", "PostToolUse", "Stop",
                                                                  "UserPromptSubmit")], cwd=ws)
    info: dict[str, Any] = {"agent_id": "c-7", "nickname": "bob", "agent_type": "explorer", "depth": 1,
                            "parent_id": "root-1", "cwd": ws, "permission_mode": "autoEdit",
                            "extra": {"session_id": "root-1", "tool_use_id": "tu-9"}}
    await h.run("PreToolUse", HookInput("PreToolUse", tool="write_file", arguments={"path": "a"}, **info))
    d = read_json(f"{seen}.PreToolUse")
    assert d["hook_event_name"] == d["event"] == "PreToolUse"
    assert d["session_id"] == "root-1"
    assert d["cwd"] == str(ws)
    assert d["permission_mode"] == "acceptEdits"
    assert d["mode"] == "autoEdit"
    assert d["tool_name"] == d["tool"] == "write_file"
    assert d["tool_input"] == d["arguments"] == {"path": "a"}
    assert d["tool_use_id"] == "tu-9"
    assert d["agent"] == {"id": "c-7", "nickname": "bob", "type": "explorer", "depth": 1, "parent_id": "root-1"}
    assert (d["agent_id"], d["agent_type"]) == ("c-7", "explorer")

    await h.run("PostToolUse", HookInput("PostToolUse", tool="bash", arguments={"command": "ls"},
                                         result="a\nb", is_error=False, **info))
    d = read_json(f"{seen}.PostToolUse")
    assert d["tool_response"] == d["result"] == "a\nb"
    assert d["is_error"] is False

    await h.run("Stop", HookInput("Stop", "root-1", result="done", extra={"stop_hook_active": True}))
    d = read_json(f"{seen}.Stop")
    assert d["stop_hook_active"] is True
    assert d["session_id"] == "root-1"
    assert d["result"] == "done"
    assert "tool_name" not in d

    await h.run("UserPromptSubmit", HookInput("UserPromptSubmit", "root-1", prompt="fix the bug"))
    d = read_json(f"{seen}.UserPromptSubmit")
    assert d["prompt"] == "fix the bug"


async def test_launcher_starts_the_hook_when_given(ws: Path) -> None:
    calls: list[dict[str, Any]] = []

    class Launcher:
        async def spawn(self, argv: Any, *, writable: bool = True, cwd: Path | None = None, stdin: int | None = None,
                        stdout: int | None = None, stderr: int | None = None,
                        env_extra: Any = None) -> asyncio.subprocess.Process:
            calls.append({"argv": list(argv), "cwd": cwd, "env_extra": dict(env_extra or {})})
            return await asyncio.create_subprocess_exec(*argv, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                                                        start_new_session=True,
                                                        env={**os.environ, **(env_extra or {})})

    h = Hooks([HookSpec("PreToolUse", command="echo no >&2; exit 2")], cwd=ws, launcher=Launcher())
    out = await run(h)
    assert (out.decision, out.reason) == ("block", "no")
    [c] = calls
    assert c["argv"] == ["/bin/sh", "-c", "echo no >&2; exit 2"]
    assert c["cwd"] == ws
    assert c["env_extra"]["SUBAGENTS_HOOK_EVENT"] == "PreToolUse"


async def test_a_launcher_that_fails_is_a_hook_error(ws: Path) -> None:
    class Broken:
        async def spawn(self, argv: Any, **kw: Any) -> asyncio.subprocess.Process:
            raise RuntimeError("bwrap: no user namespaces")

    out = await run(Hooks([HookSpec("PreToolUse", command="true", on_error="block")], cwd=ws, launcher=Broken()))
    assert out.decision == "block"
    assert "could not be started: bwrap: no user namespaces" in out.errors[0].message
