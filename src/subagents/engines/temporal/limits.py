"""Tree-wide budgets on the Temporal engine: the workflow side of :class:`~subagents.runtime.limits.Budget`.

Locally a run's budget hangs under its parent's: every model call is charged to the run and to every
ancestor, a child's limits are carved from what its parent has *left*, and a run stops when it or an
ancestor has spent its limit.  Agent workflows share no memory, so the same rules travel as signals:

- a run whose limits bound tokens or cost reports each model call's spend to its parent (``spent``,
  sent without waiting), and a parent with a bound adds it to what its tree has spent and passes it up;
- a ``spawn_agent`` carves the child's limits from what the parent's tree has left at that moment
  (tokens, cost, and the wall-clock time left before the parent's ``timeout_s``), and is refused with the
  local engine's message when nothing is left;
- a run whose tree has spent its limit tells its running children (``budget_out``), and they theirs: each
  stops before its next model call with the local engine's "its parent's budget ... is spent" error.

The checks are :class:`~subagents.runtime.limits.Budget`'s own (a one-level budget holding the run's
spend plus its descendants'), so the limits and messages are the local engine's.  One difference: a
child learns of an ancestor's spend only when that ancestor's budget is gone (``budget_out``), not
before each call, so siblings may overshoot by the model calls in flight — as locally, where the calls
in flight are not stopped either.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ...exceptions import LimitExceeded
    from ...limits import Limits
    from ...runtime.limits import Budget, _shared

__all__ = ["TreeBudget"]

_KEYS = ("max_turns", "max_tokens", "timeout_s", "max_cost_usd")


class TreeBudget:
    """What one agent workflow's tree has spent, and what it may still spend (see the module docstring).

    ``below_*``: what its descendants reported (``spent`` signals); ``above``: the ``(limit, message)`` of
    an ancestor whose budget is spent (``budget_out``).  :meth:`state` / :meth:`restore` carry it over a
    continue-as-new."""

    def __init__(self) -> None:
        self.limits: dict[str, Any] = {}
        self.parent_id: str | None = None
        self.below_tokens = 0
        self.below_cost = 0.0
        self.above: tuple[str, str, int] | None = None  # (limit, the spent budget's message, how many levels up)
        self.out_sent = False
        self._sends: list[asyncio.Task[None]] = []

    # -- state --------------------------------------------------------------------------------------
    def bind(self, limits: dict[str, Any], parent_id: str | None, state: dict[str, Any] | None = None) -> None:
        """The run's (carved) limits and parent; ``state``: what a previous history of the run carried."""
        self.limits, self.parent_id = limits, parent_id
        if state:
            self.below_tokens += int(state.get("below_tokens", 0))
            self.below_cost += float(state.get("below_cost", 0.0))
            above = state.get("above")
            if above and self.above is None:
                self.above = (str(above[0]), str(above[1]), int(above[2]))
            self.out_sent = self.out_sent or bool(state.get("out_sent"))

    def state(self) -> dict[str, Any]:
        """What the run's next history needs (continue-as-new)."""
        return {"below_tokens": self.below_tokens, "below_cost": self.below_cost,
                "above": list(self.above) if self.above else None, "out_sent": self.out_sent}

    @property
    def bounded(self) -> bool:
        """Whether the run's limits bound tokens or cost (only then is spend reported and checked)."""
        return self.limits.get("max_tokens") is not None or self.limits.get("max_cost_usd") is not None

    def _budget(self, usage: dict[str, int], cost: float | None) -> Budget:
        b = Budget(Limits(**{k: self.limits.get(k) for k in _KEYS}), now=0.0)
        b.tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0)) + self.below_tokens
        b.cost = (cost or 0.0) + self.below_cost
        return b

    # -- checks (``usage`` / ``cost``: the run's own, as the workflow counts them) ------------------------
    def exhausted(self, usage: dict[str, int], cost: float | None) -> tuple[str, str] | None:
        """Before a model call: the limit already spent here (with descendants) or above, as ``(limit, message)``."""
        if not self.bounded and self.above is None:
            return None
        e = self._budget(usage, cost).exhausted()
        if e is not None:
            return e.limit, str(e)
        return self._above()

    def check(self, usage: dict[str, int], cost: float | None) -> tuple[str, str] | None:
        """After a model call: the limit exceeded here (with descendants) or spent above, as ``(limit, message)``."""
        if not self.bounded and self.above is None:
            return None
        try:
            self._budget(usage, cost).check()
        except LimitExceeded as e:
            return e.limit, str(e)
        return self._above()

    def _above(self) -> tuple[str, str] | None:
        if self.above is None:
            return None
        limit, message, level = self.above
        e = LimitExceeded(limit, 0, 0)
        e.args = (message,)
        return limit, str(_shared(e, level))

    def left(self, usage: dict[str, int], cost: float | None, elapsed_s: float) -> dict[str, Any] | str:
        """The limits a child is carved from: what this tree has left (tokens, cost, time before
        ``timeout_s``); or the refusal (a tool error) when a budget is used up."""
        out = dict(self.limits)
        spent = self.exhausted(usage, cost) if self.bounded or self.above else None
        if spent is not None:
            return (f"cannot spawn: the parent's budget is used up ({spent[1]}); finish with what you have "
                    "or raise the parent's limit")
        b = self._budget(usage, cost)
        if out.get("max_tokens") is not None:
            out["max_tokens"] = int(out["max_tokens"]) - b.tokens
        if out.get("max_cost_usd") is not None:
            out["max_cost_usd"] = float(out["max_cost_usd"]) - b.cost
        if out.get("timeout_s") is not None:
            out["timeout_s"] = max(float(out["timeout_s"]) - elapsed_s, 0.001)
        return out

    # -- signals between the runs of a tree ---------------------------------------------------------------
    def report(self, usage: dict[str, Any], cost: float | None) -> None:
        """One model call of this run (its usage and cost): told to the parent when this run is bounded."""
        if self.bounded and self.parent_id is not None:
            tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
            self._send(self.parent_id, "spent", {"tokens": tokens, "cost": cost or 0.0})

    def charge(self, spent: dict[str, Any]) -> None:
        """A descendant's model call (``spent`` signal): added here, and passed up when this run is bounded."""
        self.below_tokens += int(spent.get("tokens", 0))
        self.below_cost += float(spent.get("cost", 0.0))
        if self.bounded and self.parent_id is not None:
            self._send(self.parent_id, "spent", spent)

    def tell_children(self, usage: dict[str, int], cost: float | None, children: list[str]) -> None:
        """When this tree's budget (or an ancestor's) is spent: tell the running children, once."""
        if self.out_sent or not children:
            return
        own = self._budget(usage, cost).exhausted() if self.bounded else None
        if own is not None:
            out: dict[str, Any] = {"limit": own.limit, "message": str(own), "level": 1}
        elif self.above is not None:
            out = {"limit": self.above[0], "message": self.above[1], "level": self.above[2] + 1}
        else:
            return
        self.out_sent = True
        for child in children:
            self._send(child, "budget_out", out)

    def spent_above(self, out: dict[str, Any]) -> None:
        """``budget_out``: an ancestor's budget is spent (``level``: how many levels up)."""
        if self.above is None:
            self.above = (str(out["limit"]), str(out["message"]), int(out.get("level", 1)))

    def _send(self, run_id: str, signal: str, arg: dict[str, Any]) -> None:
        async def send() -> None:
            try:
                await workflow.get_external_workflow_handle(run_id).signal(signal, arg)
            except Exception:  # it has ended: nothing left to charge or stop
                workflow.logger.info("%s has ended: %s not delivered", run_id, signal)

        self._sends.append(asyncio.ensure_future(send()))

    async def flush(self) -> None:
        """Wait for the signals sent (before the run ends)."""
        while self._sends:
            sends, self._sends = self._sends, []
            await asyncio.gather(*sends)
