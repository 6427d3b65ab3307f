"""Hooks wired into a real Runtime: every event, command hooks from the config, errors reported, never a crash."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from subagents import HookInput, HookResult, Outcome, Runtime
from subagents.config import user_config_dir
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.trust import add_trusted


def results(req: ModelRequest) -> list[str]:
    return [r.content for m in req.messages for r in m.tool_results]


def one_call(name: str, args: dict[str, Any]) -> FunctionModel:
    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        return ModelResponse("", [ToolCall(name, args)]) if not done else ModelResponse(done[0])

    return FunctionModel(fn)


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def config(workdir: Path, text: str) -> None:
    cfg = workdir / ".subagents" / "config.toml"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text(text)


async def test_a_pre_tool_use_hook_that_exits_2_stops_bash_and_the_model_sees_why(workdir: Path) -> None:
    # hooks run in the shell sandbox (private /tmp): keep them in the project, where agents cannot rewrite them
    (workdir / ".subagents" / "hooks").mkdir(parents=True)
    script(workdir / ".subagents" / "hooks" / "guard.sh",
           "cat > /dev/null\necho 'no network tools: use the cached copy' >&2\nexit 2\n")
    config(workdir, '[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = ".subagents/hooks/guard.sh"\n')
    async with Runtime(one_call("bash", {"command": "touch ran"}), workdir=workdir, store="memory://",
                       permission_mode="yolo", trust_project=True) as rt:
        r = await rt.run("go")
        audit = rt.store.audit_of(r.id)
    assert r.text == "bash was not run: a PreToolUse hook blocked it: no network tools: use the cached copy"
    assert not (workdir / "ran").exists()
    assert [(a.kind, a.data["reason"]) for a in audit] == [("hook_blocked", "no network tools: use the cached copy")]


async def test_a_hook_can_replace_arguments_and_allow_without_asking(workdir: Path) -> None:
    seen: list[HookInput] = []

    def redirect(inp: HookInput) -> HookResult:
        seen.append(inp)
        return HookResult("allow", arguments={**(inp.arguments or {}), "path": "out/" + inp.arguments["path"]})

    hooks = {"PreToolUse": [{"matcher": "write_file", "callback": redirect}]}
    async with Runtime(one_call("write_file", {"path": "a.txt", "content": "x"}), workdir=workdir,
                       store="memory://", hooks=hooks) as rt:
        r = await rt.run("go")
    assert (workdir / "out" / "a.txt").read_text() == "x"  # allowed by the hook: no approver was needed
    assert r.text.startswith("Created out/a.txt")
    i = seen[0]
    assert (i.event, i.tool, i.agent_id, i.depth, i.permission_mode, i.cwd) == (
        "PreToolUse", "write_file", r.id, 0, "default", str(workdir))


async def test_replacement_arguments_are_validated_and_deny_rules_still_apply(workdir: Path) -> None:
    def bad(inp: HookInput) -> HookResult:
        return HookResult(arguments={"path": 3})

    async with Runtime(one_call("write_file", {"path": "a.txt", "content": "x"}), workdir=workdir,
                       store="memory://", permission_mode="yolo", hooks={"PreToolUse": [bad]}) as rt:
        r = await rt.run("go")
    assert r.text.startswith("write_file was not run: a PreToolUse hook replaced its arguments with invalid ones")

    def allow(inp: HookInput) -> HookResult:
        return HookResult("allow")

    async with Runtime(one_call("write_file", {"path": "a.txt", "content": "x"}), workdir=workdir,
                       store="memory://", deny=["write_file"], hooks={"PreToolUse": [allow]}) as rt:
        r = await rt.run("go")
    assert r.text.startswith("write_file was not run: denied by the rule 'write_file'")
    assert not (workdir / "a.txt").exists()


async def test_post_tool_use_feedback_reaches_the_model(workdir: Path) -> None:
    def review(inp: HookInput) -> HookResult:
        assert inp.result is not None
        return HookResult("block", "the listing is stale; run it again after the build")

    async with Runtime(one_call("list_dir", {}), workdir=workdir, store="memory://",
                       hooks={"PostToolUse": [review]}) as rt:
        r = await rt.run("go")
    assert r.text.endswith("\n\n[hook feedback: the listing is stale; run it again after the build]")


async def test_stop_hooks_send_the_agent_back_to_work_and_subagent_hooks_see_children(workdir: Path) -> None:
    log: list[tuple[str, str, Any]] = []

    def stop(inp: HookInput) -> HookResult | None:
        log.append((inp.event, inp.agent_type, inp.extra.get("stop_hook_active")))
        if not inp.extra.get("stop_hook_active"):
            return HookResult("block", "also run the tests")
        return None

    def start(inp: HookInput) -> HookResult:
        log.append((inp.event, inp.agent_type, inp.prompt))
        return HookResult(context="The repo uses pytest.")

    prompts: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            prompts.append(req.messages[0].text)
            return ModelResponse("child done")
        done = results(req)
        if not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "explore", "prompt": "look"})])
        return ModelResponse(f"root done after {len(req.messages)} messages")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://",
                       hooks={"Stop": [stop], "SubagentStop": [stop], "SubagentStart": [start]}) as rt:
        r = await rt.run("go")
    assert prompts == ["look\n\nThe repo uses pytest."] * 2  # its first answer, then again after its stop hook
    assert ("SubagentStart", "explore", "look") in log
    assert [x for x in log if x[0] in ("Stop", "SubagentStop")] == [
        ("SubagentStop", "explore", False), ("SubagentStop", "explore", True),
        ("Stop", "general-purpose", False), ("Stop", "general-purpose", True)]
    assert r.outcome is Outcome.OK
    assert r.text == "root done after 5 messages"  # prompt, spawn, its result, first answer, stop-hook reason


async def test_user_prompt_submit_can_refuse_a_run(workdir: Path) -> None:
    def gate(inp: HookInput) -> HookResult | None:
        return HookResult("block", "no production work on Fridays") if "prod" in (inp.prompt or "") else None

    async with Runtime(FunctionModel(lambda r: "fine"), workdir=workdir, store="memory://",
                       hooks={"UserPromptSubmit": [gate]}) as rt:
        ok = await rt.run("fix staging")
        refused = await rt.run("deploy prod")
    assert (ok.outcome, ok.text) == (Outcome.OK, "fine")
    assert refused.outcome is Outcome.ERROR
    assert refused.error == "blocked by a UserPromptSubmit hook: no production work on Fridays"


async def test_a_permission_request_hook_decides_instead_of_the_person(workdir: Path) -> None:
    def policy(inp: HookInput) -> HookResult:
        return HookResult("allow") if str(inp.arguments.get("path", "")).startswith("tmp/") else HookResult(
            "block", "only tmp/ may be written")

    model = FunctionModel(lambda req: ModelResponse("", [ToolCall("write_file", {"path": p, "content": "x"})
                                                         for p in ("tmp/a", "src/b")]) if not results(req)
                          else ModelResponse(" | ".join(results(req))))
    async with Runtime(model, workdir=workdir, store="memory://", hooks={"PermissionRequest": [policy]}) as rt:
        r = await rt.run("go")
        audit = [(a.data["decision"], a.data["by"]) for a in rt.store.audit_of(r.id)]
    assert (workdir / "tmp" / "a").exists()
    assert not (workdir / "src" / "b").exists()
    assert "write_file was not run: a PermissionRequest hook denied it: only tmp/ may be written" in r.text
    assert audit == [("allowed once", "hook"), ("denied", "hook")]


async def test_hook_errors_are_reported_and_on_error_decides(workdir: Path, tmp_path: Path) -> None:
    config(workdir, '[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = "./missing-guard.sh"\n'
                    '[[hooks.PreToolUse]]\nmatcher = "write_file"\ncommand = "exit 1"\non_error = "block"\n')
    events: list[Event] = []
    model = FunctionModel(lambda req: ModelResponse("", [ToolCall("bash", {"command": "echo hi"}),
                                                         ToolCall("write_file", {"path": "a", "content": "x"})])
                          if not results(req) else ModelResponse(" | ".join(results(req))))
    async with Runtime(model, workdir=workdir, store="memory://", permission_mode="yolo",
                       on_event=events.append, trust_project=True) as rt:
        r = await rt.run("go")
        audit = [a.data for a in rt.store.audit_of(r.id) if a.kind == "hook_error"]
    assert r.outcome is Outcome.OK
    bash_out, write_out = r.text.split(" | ")
    assert bash_out.startswith("hi")  # the broken guard did not stop it (Claude Code's meaning of a hook error)
    assert write_out.startswith("write_file was not run: a PreToolUse hook blocked it")
    assert not (workdir / "a").exists()
    errors = [e.data for e in events if e.kind == "hook_error"]
    assert [(e["hook"], e["on_error"]) for e in errors] == [("./missing-guard.sh", "allow"), ("exit 1", "block")]
    assert "127" in errors[0]["message"]
    assert [a["hook"] for a in audit] == ["./missing-guard.sh", "exit 1"]


def test_the_cli_tells_the_person_about_a_hook_error(workdir: Path) -> None:
    config(workdir, '[[hooks.PreToolUse]]\ncommand = "./missing-guard.sh"\n')
    add_trusted(workdir, user_config_dir())  # the CLI's run reads the trust list
    code = ("import sys; from subagents.cli.main import main; from subagents.models import FunctionModel, "
            "ModelResponse, ToolCall\n"
            "def fn(req):\n"
            "    done = [r for m in req.messages for r in m.tool_results]\n"
            "    return ModelResponse('', [ToolCall('list_dir', {})]) if not done else ModelResponse('listed')\n"
            "sys.exit(main(['run', 'go', '--cwd', sys.argv[1]], model=FunctionModel(fn)))\n")
    p = subprocess.run([sys.executable, "-c", code, str(workdir)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "SUBAGENTS_STORE": "memory://"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "listed"
    assert (f"subagents: hook error (PreToolUse, {workdir / '.subagents' / 'config.toml'}): hook "
            "`./missing-guard.sh` for PreToolUse exited with code 127") in p.stderr
