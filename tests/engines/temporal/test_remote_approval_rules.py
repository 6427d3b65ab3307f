"""The client's answer to a worker's approval request when "allow always" yields no rule that parses."""

from __future__ import annotations

from typing import Any

from subagents import Decision
from subagents.authority.approvals import ApprovalBroker
from subagents.exceptions import UserError
from subagents.runtime.events import EventBus
from subagents.runtime.remote_approvals import RemoteApprovals
from subagents.store.memory import MemoryStore


class FakeEngine:
    def __init__(self) -> None:
        self.decided: list[tuple[str, str, Decision]] = []

    async def approvals(self, run_id: str) -> list[dict[str, Any]]:
        return [{"id": "ap-1"}]

    async def decide(self, run_id: str, call_id: str, decision: Decision, *, created_at: float | None = None) -> None:
        self.decided.append((run_id, call_id, decision))


async def test_allow_always_for_a_blank_command_allows_once_and_keeps_answering() -> None:
    """A model's ``bash`` with command "   ": the request's own rule ``bash(   )`` does not parse either; the
    approval loop raised ValueError (the worker waited for an answer that never came).  Now: allowed once."""
    engine = FakeEngine()

    async def get_engine() -> Any:
        return engine

    broker = ApprovalBroker(lambda req: Decision("allow", always=True, rule="bash("))
    ra = RemoteApprovals(MemoryStore(), EventBus(), broker, get_engine, executor=None)  # type: ignore[arg-type]
    await ra.answer({"run_id": "r1", "id": "ap-1", "root_id": "r1", "tool": "bash", "arguments": {"command": "   "},
                     "always_rule": "bash(   )", "reason": "asks", "mode": "default"})
    [(run_id, call_id, decision)] = engine.decided
    assert (run_id, call_id, decision.allowed, decision.always) == ("r1", "ap-1", True, False)
    assert ra.rules == {}


A_REQ = {"run_id": "r1", "id": "call_0", "root_id": "r1", "tool": "touch", "arguments": {"name": "a"},
     "always_rule": "touch", "reason": "asks", "mode": "default", "created_at": 1.5}


class RacingEngine:
    """``approvals`` shows request A whenever asked; but by the time the answer is sent, a later call waits under
    A's id (B, made at 2.5).  ``decide`` does what the workflow's ``decide`` validator does."""

    def __init__(self) -> None:
        self.answered: list[str] = []

    async def approvals(self, run_id: str) -> list[dict[str, Any]]:
        return [A_REQ]

    async def decide(self, run_id: str, call_id: str, decision: Decision, *, created_at: float | None = None) -> str:
        if created_at is not None and created_at != 2.5:
            raise UserError("approval 'call_0' now waits for another request")
        self.answered.append("touch(b)")  # without created_at the answer reaches whatever waits now
        return decision.label()


async def test_the_answer_reaches_only_the_request_the_person_decided() -> None:
    engine = RacingEngine()

    async def get_engine() -> Any:
        return engine

    ra = RemoteApprovals(MemoryStore(), EventBus(), ApprovalBroker(lambda req: Decision.allow()), get_engine,
                         executor=None)  # type: ignore[arg-type]
    await ra.answer(dict(A_REQ))
    assert engine.answered == [], "the answer for touch(a) reached touch(b)"
