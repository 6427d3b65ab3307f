"""Adversarial terminal approvals and ``subagents runs approve``: an answer typed after a question went unanswered
reaches the next question; options the answer would drop, and a rule that does not parse, are refused before
anything reaches the engine."""

from __future__ import annotations

import asyncio
import contextlib
import io
import queue
from collections.abc import Iterator

import pytest

from subagents.authority.approvals import ApprovalBroker, ApprovalRequest, Decision
from subagents.cli.approve import TerminalApprover
from subagents.cli.main import main
from subagents.models import AgentInfo

from .conftest import answer_with


def request(command: str) -> ApprovalRequest:
    return ApprovalRequest(f"r-{command}", AgentInfo("a1", "ada", "general-purpose"), (), "bash",
                           {"command": command}, "permission mode 'default' asks", "default", f"bash({command})")


def keyboard() -> tuple[queue.Queue[str], TerminalApprover, io.StringIO]:
    """A terminal whose lines the test types (``read_line`` blocks, as a real one does, until a line comes)."""
    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    return lines, TerminalApprover(out=out, read_line=lines.get, discard=lambda: 0), out


async def test_the_answer_to_the_question_after_a_timed_out_one_is_not_lost() -> None:
    """Each question started its own reader thread; the one of a question that timed out kept waiting for a line,
    got the person's answer to the next question and dropped it: that question waited on as if nobody had
    answered (until its own timeout, or for ever)."""
    lines, approver, out = keyboard()
    first = await ApprovalBroker(approver, timeout_s=0.2).decide(request("ls"))
    assert first.decided_by == "timeout"
    task = asyncio.ensure_future(ApprovalBroker(approver).decide(request("pwd")))
    await asyncio.sleep(0.05)
    assert 'wants to run bash("pwd")' in out.getvalue()
    lines.put("y\n")
    second = await asyncio.wait_for(task, 5)
    assert (second.allowed, second.always) == (True, False)


async def test_after_a_timed_out_question_an_answer_decides_exactly_one_question() -> None:
    lines, approver, _ = keyboard()
    assert (await ApprovalBroker(approver, timeout_s=0.2).decide(request("ls"))).decided_by == "timeout"
    broker = ApprovalBroker(approver)
    task = asyncio.ensure_future(broker.decide(request("pwd")))
    await asyncio.sleep(0.05)
    lines.put("n\n")
    lines.put("not pwd\n")
    second = await asyncio.wait_for(task, 5)
    assert (second.allowed, second.message) == (False, "not pwd")
    third = asyncio.ensure_future(broker.decide(request("date")))
    await asyncio.sleep(0.05)
    assert not third.done()  # nothing left over answers it
    lines.put("a\n")
    assert (await asyncio.wait_for(third, 5)).always


async def test_a_line_typed_while_no_question_waits_answers_none() -> None:
    lines, approver, _ = keyboard()
    assert (await ApprovalBroker(approver, timeout_s=0.2).decide(request("ls"))).decided_by == "timeout"
    lines.put("y\n")  # for the question that is gone: its reader reads it, and nobody takes it
    await asyncio.sleep(0.05)
    task = asyncio.ensure_future(ApprovalBroker(approver).decide(request("rm -rf build")))
    await asyncio.sleep(0.05)
    assert not task.done()
    lines.put("n\n")
    lines.put("\n")
    assert not (await asyncio.wait_for(task, 5)).allowed


# -- subagents runs approve ----------------------------------------------------------------------------------
class Engine:
    def __init__(self) -> None:
        self.decided: list[tuple[str, str, Decision]] = []

    async def decide(self, run_id: str, call_id: str, decision: Decision) -> str:
        self.decided.append((run_id, call_id, decision))
        return decision.label()


@contextlib.contextmanager
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    engine = Engine()
    answer_with(monkeypatch, engine)
    yield engine


@pytest.mark.parametrize(("args", "says"), [
    (["always", "--rule", "bash(git push"], "invalid permission rule 'bash(git push'"),
    (["always", "--rule", ""], "invalid permission rule ''"),
    (["allow", "--rule", "bash(ls)"], "--rule goes with the answer 'always'"),
    (["deny", "--rule", "bash(ls)"], "--rule goes with the answer 'always'"),
    (["allow", "--message", "fine"], "--message goes with the answer 'deny'"),
    (["always", "--message", "fine"], "--message goes with the answer 'deny'"),
])
def test_an_option_the_answer_would_drop_or_a_bad_rule_is_refused_before_anything_is_sent(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    """These were sent as they were: a malformed ``--rule`` became, on the worker, the request's own rule (what
    the person typed was silently not what was allowed); ``--rule`` with ``allow`` and ``--message`` with
    ``allow`` were dropped without a word."""
    with fake_engine(monkeypatch) as engine:
        code = main(["runs", "approve", "run-1", "call_1", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert says in err
    assert "Traceback" not in err
    assert engine.decided == []


def test_a_good_answer_still_goes_to_the_engine(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with fake_engine(monkeypatch) as engine:
        assert main(["runs", "approve", "run-1", "call_1", "always", "--rule", "bash(git status*)"]) == 0
        assert main(["runs", "approve", "run-1", "call_2", "deny", "--message", "not now"]) == 0
    assert [(c, d.label(), d.rule, d.message) for _, c, d in engine.decided] == [
        ("call_1", "allowed always", "bash(git status*)", None), ("call_2", "denied", None, "not now")]
    assert capsys.readouterr().out == "ada: call_1 allowed always\nada: call_2 denied\n"
