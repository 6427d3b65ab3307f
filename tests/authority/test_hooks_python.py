"""Hooks as Python callbacks, matchers, chains and configuration (command hooks: ``test_hooks.py``)."""

from __future__ import annotations

import asyncio
import doctest
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import subagents.authority.hooks as hooks_module
from subagents.authority.hooks import HookInput, HookOutcome, HookResult, Hooks, HookSpec
from subagents.config import load_settings
from subagents.exceptions import ConfigError
from subagents.models.base import AgentInfo


def call(event: str = "PreToolUse", tool: str | None = "bash", **kw: Any) -> HookInput:
    kw.setdefault("arguments", {"command": "ls"} if tool else None)
    return HookInput(event, "root-1", "ada", "general-purpose", cwd="/ws", tool=tool, **kw)


async def run(h: Hooks, event: str = "PreToolUse", match: str | None = "bash", **kw: Any) -> HookOutcome:
    return await h.run(event, call(event, **kw), match=match)


def py(mapping: dict[str, Any]) -> Hooks:
    return Hooks.from_python(mapping, cwd="/ws")


def test_module_docstring_example_runs() -> None:
    result = doctest.testmod(hooks_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# -- callbacks -----------------------------------------------------------------------------------
async def test_sync_callback_blocks() -> None:
    def guard(inp: HookInput) -> HookResult | None:
        return HookResult("block", "no rm") if "rm" in (inp.arguments or {})["command"] else None

    h = py({"PreToolUse": [guard]})
    assert (await run(h, arguments={"command": "rm -rf /"})).decision == "block"
    out = await run(h, arguments={"command": "ls"})
    assert (out.decision, out.errors) == (None, [])
    assert out.blocked_by is None


async def test_async_callback_and_context() -> None:
    async def note(inp: HookInput) -> HookResult:
        await asyncio.sleep(0)
        return HookResult(context=f"{inp.tool} ran")

    out = await run(py({"PostToolUse": [note]}), "PostToolUse", result="ok")
    assert out.context == "bash ran"


async def test_callback_may_answer_with_claude_code_json() -> None:
    def deny(inp: HookInput) -> dict[str, Any]:
        return {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "nope"}}

    out = await run(py({"PreToolUse": [deny]}))
    assert (out.decision, out.reason) == ("block", "nope")


async def test_callback_that_raises_is_an_error() -> None:
    def boom(inp: HookInput) -> None:
        raise ValueError("config missing")

    out = await run(py({"PreToolUse": [boom]}))
    [err] = out.errors
    assert err.message.endswith("boom` for PreToolUse raised ValueError: config missing")
    assert err.message.startswith("Python hook `")
    assert out.decision is None
    out = await run(py({"PreToolUse": [{"callback": boom, "on_error": "block"}]}))
    assert out.decision == "block"
    assert "raised ValueError: config missing" in out.reason


async def test_callback_returning_nonsense_is_an_error() -> None:
    out = await run(py({"PreToolUse": [lambda inp: True]}))
    assert "returned a bool" in out.errors[0].message
    out = await run(py({"PreToolUse": [lambda inp: HookResult("maybe")]}))  # type: ignore[arg-type]
    assert "decision = 'maybe'" in out.errors[0].message


async def test_sync_callback_runs_in_a_thread_and_the_loop_goes_on() -> None:
    threads: list[int] = []

    def slow(inp: HookInput) -> None:
        threads.append(threading.get_ident())
        time.sleep(0.3)

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.create_task(ticker())
    out = await run(py({"PreToolUse": [slow]}))
    t.cancel()
    assert out.errors == []
    assert threads
    assert threads[0] != threading.get_ident()
    assert ticks >= 10


async def test_callback_timeouts() -> None:
    async def stuck(inp: HookInput) -> None:
        await asyncio.sleep(30)

    def slow(inp: HookInput) -> None:
        time.sleep(0.5)

    t0 = time.monotonic()
    out = await run(py({"PreToolUse": [{"callback": stuck, "timeout_s": 0.1},
                                       {"callback": slow, "timeout_s": 0.1, "on_error": "block"}]}))
    assert time.monotonic() - t0 < 0.45
    assert [e.message.split("` for ")[1] for e in out.errors] == [
        "PreToolUse did not finish within 0.1 s",
        "PreToolUse did not finish within 0.1 s (its thread is left to finish in the background)"]
    assert out.decision == "block"


async def test_a_callback_cannot_change_the_arguments_behind_the_guards_back() -> None:
    def sneaky(inp: HookInput) -> None:
        assert inp.arguments is not None
        inp.arguments["command"] = "rm -rf /"

    args = {"command": "ls"}
    out = await py({"PreToolUse": [sneaky]}).run("PreToolUse", call(arguments=args), match="bash")
    assert args == {"command": "ls"}
    assert out.arguments is None


# -- chains --------------------------------------------------------------------------------------
async def test_configuration_order_and_first_block_wins() -> None:
    ran: list[str] = []

    def hook(name: str, result: HookResult | None) -> Any:
        def fn(inp: HookInput) -> HookResult | None:
            ran.append(name)
            return result
        fn.__qualname__ = name
        return fn

    h = py({"PreToolUse": [hook("a", HookResult("allow", "fine")), hook("b", None),
                           hook("c", HookResult("block", "c says no")), hook("d", HookResult("block", "d"))]})
    out = await run(h)
    assert ran == ["a", "b", "c"]
    assert (out.decision, out.reason) == ("block", "c says no")
    assert out.blocked_by is not None
    assert out.blocked_by.name == "c"


async def test_replacement_arguments_chain_through_callbacks() -> None:
    seen: list[dict[str, Any] | None] = []
    h = py({"PreToolUse": [lambda inp: HookResult(arguments={**(inp.arguments or {}), "timeout_s": 5}),
                           lambda inp: seen.append(inp.arguments),
                           lambda inp: HookResult("allow", arguments={**(inp.arguments or {}), "command": "ls -l"})]})
    out = await run(h)
    assert seen == [{"command": "ls", "timeout_s": 5}]
    assert out.arguments == {"command": "ls -l", "timeout_s": 5}
    assert out.decision == "allow"


async def test_context_from_several_hooks_is_joined() -> None:
    h = py({"UserPromptSubmit": [lambda inp: HookResult(context="one"), lambda inp: HookResult(context="two")]})
    out = await run(h, "UserPromptSubmit", match=None, tool=None, prompt="hi")
    assert out.context == "one\n\ntwo"


# -- has() and matchers --------------------------------------------------------------------------
async def test_has_is_false_for_unconfigured_events() -> None:
    h = py({"PreToolUse": [lambda inp: None]})
    assert h.has("PreToolUse")
    assert not h.has("PostToolUse")
    assert not h.has("Stop")
    assert not h.has("NoSuchEvent")
    empty = Hooks([], cwd="/ws")
    assert not empty.has("PreToolUse")
    assert len(empty) == 0
    out = await run(empty)
    assert (out.decision, out.errors) == (None, [])


@pytest.mark.parametrize(("matcher", "hits", "misses"), [
    ("bash", ["bash"], ["bash2", "xbash", "read_file"]),
    ("bash|write_file", ["bash", "write_file"], ["edit_file", "write_files"]),
    ("mcp__github__.*", ["mcp__github__create_issue"], ["mcp__gitlab__x", "github"]),
    ("*", ["bash", "anything"], []),
    ("", ["bash", "anything"], []),
    (None, ["bash", "anything"], []),
    ("Bash", ["bash"], ["read_file"]),              # Claude Code's name for our tool
    ("Write|Edit", ["write_file", "edit_file"], ["bash"]),
])
async def test_matcher_is_a_full_regex_match(matcher: str | None, hits: list[str], misses: list[str]) -> None:
    h = py({"PreToolUse": [{"matcher": matcher, "callback": lambda inp: HookResult("block", "matched")}]})
    for name in hits:
        assert (await run(h, match=name, tool=name)).decision == "block", name
    for name in misses:
        assert (await run(h, match=name, tool=name)).decision is None, name


async def test_subagent_matchers_match_the_agent_type() -> None:
    h = py({"SubagentStart": [{"matcher": "explorer|reviewer", "callback": lambda inp: HookResult("block", "no")}]})
    assert (await run(h, "SubagentStart", match="explorer", tool=None)).decision == "block"
    assert (await run(h, "SubagentStart", match="general-purpose", tool=None)).decision is None
    assert (await run(h, "SubagentStart", match=None, tool=None)).decision == "block"  # no target: all run


def test_bad_regex_is_a_config_error_naming_event_and_matcher() -> None:
    with pytest.raises(ConfigError, match=r"PreToolUse hook from .*config.toml has matcher '\(bash'.*not a valid"):
        HookSpec("PreToolUse", matcher="(bash", command="true", source="/p/.subagents/config.toml")


@pytest.mark.parametrize(("kw", "message"), [
    ({"event": "PreTool", "command": "x"}, "'PreTool' is not a hook event"),
    ({"event": "Stop"}, "neither"),
    ({"event": "Stop", "command": "x", "callback": print}, "both"),
    ({"event": "Stop", "command": "  "}, "give the program to run"),
    ({"event": "Stop", "command": "x", "timeout_s": 0}, "positive number of seconds"),
    ({"event": "Stop", "command": "x", "on_error": "deny"}, "use \"allow\""),
    ({"event": "Stop", "callback": 42}, "not a function"),
])
def test_spec_checks(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        HookSpec(**kw)


# -- building ------------------------------------------------------------------------------------
def test_from_python_forms() -> None:
    def fn(inp: HookInput) -> None:
        return None

    spec = HookSpec("Stop", callback=fn)
    h = Hooks.from_python({"PreToolUse": [fn, {"matcher": "bash", "command": "./g.sh", "timeout_s": 3}], "Stop": spec},
                          cwd="/ws")
    assert [(s.event, s.name, s.source) for s in h.specs] == [
        ("PreToolUse", "test_from_python_forms.<locals>.fn", "python"), ("PreToolUse", "./g.sh", "python"),
        ("Stop", "test_from_python_forms.<locals>.fn", "python")]
    with pytest.raises(ConfigError, match="holds a HookSpec for Stop"):
        Hooks.from_python({"PreToolUse": [spec]})
    with pytest.raises(ConfigError, match="unknown key 'matches'"):
        Hooks.from_python({"PreToolUse": [{"matches": "bash", "callback": fn}]})
    with pytest.raises(ConfigError, match="give a function"):
        Hooks.from_python({"PreToolUse": [42]})  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="must map an event name"):
        Hooks.from_python([fn])  # type: ignore[arg-type]


async def test_from_config_with_the_settings_dicts(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".subagents").mkdir(parents=True)
    cfg = project / ".subagents" / "config.toml"
    cfg.write_text('[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = "echo first >&2; exit 2"\n'
                   '[[hooks.PreToolUse]]\nmatcher = "write_file|edit_file"\ncommand = "exit 7"\n'
                   'timeout_s = 5\non_error = "block"\n'
                   '[[hooks.Stop]]\ncommand = "true"\n')
    s = load_settings(project, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")}, trust=True)
    h = Hooks.from_config(s.hooks, sources=s.sources, cwd=project)
    assert [(sp.event, sp.matcher, sp.timeout_s, sp.on_error) for sp in h.specs] == [
        ("PreToolUse", "bash", 30.0, "allow"), ("PreToolUse", "write_file|edit_file", 5, "block"),
        ("Stop", None, 30.0, "allow")]
    assert {sp.source for sp in h.specs} == {str(cfg)}
    assert h.has("Stop")
    assert not h.has("PostToolUse")
    out = await run(h)
    assert (out.decision, out.reason) == ("block", "first")
    out = await run(h, match="edit_file", tool="edit_file")
    assert out.decision == "block"
    assert "exited with code 7" in out.errors[0].message
    h2 = Hooks.from_config({"Stop": [{"command": "true"}]}, source_map={"hooks.Stop[0]": "/etc/x.toml"})
    assert h2.specs[0].source == "/etc/x.toml"


async def test_combine_keeps_the_order_given() -> None:
    config = Hooks.from_config({"PreToolUse": [{"command": "exit 0"}]})
    python = Hooks.from_python({"PreToolUse": [lambda inp: HookResult("block", "python")]})
    h = Hooks.combine(config, python, cwd="/tmp")
    assert [sp.source for sp in h.specs] == ["config", "python"]
    assert (await run(h)).reason == "python"


def test_input_for_agent() -> None:
    info = AgentInfo("c-1", "bob", "explorer", depth=2, parent_id="p-1")
    inp = HookInput.for_agent("PreToolUse", info, cwd="/ws", permission_mode="plan", tool="bash", arguments={})
    assert (inp.agent_id, inp.nickname, inp.agent_type, inp.depth, inp.parent_id) == ("c-1", "bob", "explorer", 2,
                                                                                      "p-1")
    d = inp.to_dict()
    assert d["session_id"] is None  # a child's session is its root's, which only the caller knows
    assert HookInput("Stop", "root-1").to_dict()["session_id"] == "root-1"
