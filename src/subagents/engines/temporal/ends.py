"""How an agent workflow's turns end: an answer (:class:`Final`) or a stop (:class:`Stop`: a limit, an error, a
close), how a close reaches the workflow's awaits, and the result recorded for the run (``RunResult`` fields)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, TypeVar

from temporalio.exceptions import ActivityError, ChildWorkflowError
from temporalio.exceptions import CancelledError as ActivityCancelled

from .shapes import Prepared

__all__ = ["CANCELS", "Final", "Stop", "reraise_cancel", "result_of", "shielded"]

# How a close reaches an await: asyncio's cancellation, or the activity / child workflow it cancelled
# (``ActivityError`` / ``ChildWorkflowError`` whose cause is Temporal's ``CancelledError``: an activity in flight
# when the close came comes back so).  Catch these, then keep only what ``is_cancelled_exception`` says is a close.
CANCELS = (asyncio.CancelledError, ActivityError, ChildWorkflowError)


@dataclass
class Stop:
    """The run stopped before its answer: ``outcome`` is ``limit``, ``timeout``, ``error`` or ``cancelled``."""

    outcome: str
    limit: str | None = None
    error: str | None = None


@dataclass
class Final:
    """The model's final answer."""

    text: str


def reraise_cancel(e: ActivityError) -> None:
    """An activity cancelled because the run is being closed: the run ends as closed, not as failed."""
    if isinstance(e.cause, ActivityCancelled):
        raise asyncio.CancelledError() from None


_T = TypeVar("_T")


async def shielded(step: asyncio.Future[_T]) -> tuple[_T, bool]:
    """``step`` carried to its end even when the run is closed meanwhile: (its result, whether it was closed)."""
    try:
        return await asyncio.shield(step), False
    except asyncio.CancelledError:
        return await step, True


def result_of(p: Prepared, d: Final | Stop, *, turns: int, tool_calls: int, usage: dict[str, int],
              cost: float | None, last_text: str, duration_s: float) -> dict[str, Any]:
    """The run's result (the fields of ``RunResult``): a stop keeps the last text, marked truncated."""
    if isinstance(d, Final):
        outcome, limit, error, text, truncated = "ok", None, None, d.text, False
    else:
        outcome, limit, error, text, truncated = d.outcome, d.limit, d.error, last_text, True
    status = {"ok": "completed", "cancelled": "shutdown"}.get(outcome, "errored")
    return {"id": p.run_id, "nickname": p.nickname, "agent": p.agent_type, "status": status, "outcome": outcome,
            "text": text, "truncated": truncated, "limit": limit, "turns": turns, "usage": dict(usage),
            "cost_usd": cost, "duration_s": duration_s, "error": error, "tool_calls": tool_calls,
            "parent_id": p.parent_id, "depth": p.depth}
