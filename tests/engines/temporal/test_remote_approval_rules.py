"""The client's answer to a worker's approval request when "allow always" yields no rule that parses."""

from __future__ import annotations

from typing import Any

from subagents import Decision
from subagents.authority.approvals import ApprovalBroker
from subagents.runtime.events import EventBus
from subagents.runtime.remote_approvals import RemoteApprovals
from subagents.store.memory import MemoryStore


class FakeEngine:
    def __init__(self) -> None:
        self.decided: list[tuple[str, str, Decision]] = []

    async def approvals(self, run_id: str) -> list[dict[str, Any]]:
        return [{"id": "ap-1"}]

    async def decide(self, run_id: str, call_id: str, decision: Decision) -> None:
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
