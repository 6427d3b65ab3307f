"""The budget of a run: one pool per tree, charged to every ancestor (:class:`Budget`).

:class:`~subagents.limits.Limits` (what a run may spend) lives in :mod:`subagents.limits`, which
agent definitions use without importing the runtime; it is re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..exceptions import LimitExceeded, UserError
from ..limits import MAX_TIMEOUT_S, Limits
from ..messages import Usage

if TYPE_CHECKING:
    from ..store.base import RunRecord

__all__ = ["Budget", "Limits", "charge_tree", "limits_from_record"]


class Budget:
    """What a run has spent, charged live to every ancestor's budget: one pool per tree.

    A child's budget hangs under its parent's (``parent``).  Every model call's tokens and cost are
    added to the child and to each ancestor at once, and :meth:`check` fails when *any* of them is
    over its limit, so siblings share what their parent has left and a whole tree never spends more
    than its root's limit plus the model calls in flight when it is reached (one per running agent).
    Nothing is reserved up front: a child spawned first cannot starve its siblings or its parent.
    :meth:`carve` gives a child its own limits, capped by what is left; the wall-clock deadline of a
    child never passes its parent's.
    """

    __slots__ = ("_bounded", "cost", "deadline", "inherited", "limits", "parent", "started", "tokens")

    def __init__(self, limits: Limits, *, now: float | None = None, parent: Budget | None = None) -> None:
        self.limits = limits
        self.parent = parent
        self.started = 0.0
        self.deadline: float | None = None
        self.inherited = False  # whether ``deadline`` is an ancestor's (it comes before this run's own)
        self.restart(now)
        self.tokens = 0
        self.cost = 0.0
        own = limits.max_tokens is not None or limits.max_cost_usd is not None
        self._bounded: bool = own or (parent is not None and parent._bounded)

    def restart(self, now: float | None = None) -> None:
        """Start the wall clock (again) at ``now``: ``timeout_s`` counts from here, capped by the parent's deadline.

        A queued agent whose loop was built while it waited for a slot (a ``send_input`` reached it) starts its
        clock when it starts running: time spent queued counts against its parent's deadline, not its own."""
        self.started = time.monotonic() if now is None else now
        limits, parent = self.limits, self.parent
        self.deadline = None if limits.timeout_s is None else self.started + limits.timeout_s
        self.inherited = False
        if parent is not None and parent.deadline is not None and (self.deadline is None
                                                                   or parent.deadline < self.deadline):
            self.deadline, self.inherited = parent.deadline, True  # a child's deadline never passes its parent's

    def chain(self) -> list[Budget]:
        """This budget and its ancestors', nearest first."""
        out: list[Budget] = []
        b: Budget | None = self
        while b is not None:
            out.append(b)
            b = b.parent
        return out

    def add(self, usage: Usage, cost: float | None) -> None:
        """Charge one model call here and to every ancestor."""
        n = usage.input_tokens + usage.output_tokens
        b: Budget | None = self
        while b is not None:
            b.tokens += n
            if cost is not None:
                b.cost += cost
            b = b.parent

    def check(self) -> None:
        """Raise :class:`LimitExceeded` if this run or any ancestor has spent more than its limit."""
        if not self._bounded:
            return
        for i, b in enumerate(self.chain()):
            try:
                b.limits.check_tokens(b.tokens)
                b.limits.check_cost(b.cost if b.limits.max_cost_usd is not None else None)
            except LimitExceeded as e:
                raise _shared(e, i) from None

    def exhausted(self) -> LimitExceeded | None:
        """Before a model call: the limit (here or above) that is already fully spent, if any."""
        if not self._bounded:
            return None
        for i, b in enumerate(self.chain()):
            lim = b.limits
            if lim.max_tokens is not None and b.tokens >= lim.max_tokens:
                return _shared(_spent("max_tokens", lim.max_tokens, b.tokens, b.tokens > lim.max_tokens), i)
            if lim.max_cost_usd is not None and b.cost >= lim.max_cost_usd:
                return _shared(_spent("max_cost_usd", lim.max_cost_usd, round(b.cost, 6), b.cost > lim.max_cost_usd), i)
        return None

    def remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def left(self) -> tuple[int | None, float | None]:
        """Tokens and cost still to spend before some limit here or above is reached (``None``: no limit)."""
        tokens: int | None = None
        cost: float | None = None
        for b in self.chain():
            if b.limits.max_tokens is not None:
                t = b.limits.max_tokens - b.tokens
                tokens = t if tokens is None else min(tokens, t)
            if b.limits.max_cost_usd is not None:
                c = b.limits.max_cost_usd - b.cost
                cost = c if cost is None else min(cost, c)
        return tokens, cost

    def carve(self, wanted: Limits) -> Limits:
        """Limits for a child: ``wanted`` capped by what is left here (and above); nothing is reserved."""
        tokens_left, cost_left = self.left()
        tokens = wanted.max_tokens
        if tokens_left is not None:
            if tokens_left <= 0:
                raise self.exhausted() or LimitExceeded("max_tokens", self.limits.max_tokens, self.tokens)
            tokens = tokens_left if tokens is None else min(tokens, tokens_left)
        cost = wanted.max_cost_usd
        if cost_left is not None:
            if cost_left <= 0:
                raise self.exhausted() or LimitExceeded("max_cost_usd", self.limits.max_cost_usd, round(self.cost, 6))
            cost = cost_left if cost is None else min(cost, cost_left)
        timeout = wanted.timeout_s
        rem = self.remaining_s()
        if rem is not None:
            if rem <= 0:  # the deadline here (or above) has passed: a child would time out before its first call
                raise self._overdue()
            # (what is left can pass the largest timeout_s: a deadline moved on by a held clock, see release_clock)
            timeout = min(rem, MAX_TIMEOUT_S) if timeout is None else min(timeout, rem)
        if tokens == wanted.max_tokens and cost == wanted.max_cost_usd and timeout == wanted.timeout_s:
            return wanted  # nothing to cap (the common case): no new Limits to build and validate
        return Limits(wanted.max_turns, tokens, timeout, cost)

    def _overdue(self) -> LimitExceeded:
        """The deadline that has passed, as the limit of the budget (here or above) that set it."""
        now = time.monotonic()
        for i, b in enumerate(self.chain()):
            if not b.inherited and b.deadline is not None and b.deadline <= now:
                return _shared(LimitExceeded("timeout_s", b.limits.timeout_s, round(now - b.started, 3)), i)
        return LimitExceeded("timeout_s", self.limits.timeout_s, round(now - self.started, 3))


def _shared(e: LimitExceeded, level: int) -> LimitExceeded:
    """``e`` raised by an ancestor's budget (``level`` > 0) says whose it is."""
    if level == 0:
        return e
    whose = "its parent's" if level == 1 else f"an ancestor's ({level} levels up)"
    out = LimitExceeded(e.limit, e.value, e.seen)
    out.args = (f"{e} — {whose} budget, shared by the whole tree below it, is spent",)
    return out


def _spent(limit: str, value: float, seen: float, over: bool) -> LimitExceeded:
    e = LimitExceeded(limit, value, seen)
    if not over:  # exactly at the limit: nothing was exceeded, there is just nothing left for a call
        e.args = (f"Used up {limit}={value} ({limit.removeprefix('max_')}={seen}): no budget left for another "
                  "model call",)
    return e


def limits_from_record(d: Mapping[str, object]) -> Limits:
    """The limits a run record keeps (``limits``); a field that is no longer valid (a record of an older version, or
    one written by hand) is dropped alone, never the others with it."""
    kept: dict[str, object] = {}
    for k, v in d.items():
        if k in Limits.__dataclass_fields__:
            try:
                Limits(**{k: v})  # type: ignore[arg-type]
            except (TypeError, ValueError, UserError):
                continue
            kept[k] = v
    return Limits(**kept)  # type: ignore[arg-type]


def charge_tree(budget: Budget, root: RunRecord, tree_spend: Callable[[str, float], tuple[int, float]]) -> None:
    """Charge a restored root's ``budget`` with what its tree spent since its last run started (a restart does not
    give a tree its limits anew): ``tree_spend`` is the store's :meth:`~subagents.store.base.Store.tree_spend`,
    which reads only the spending columns.  Only a budget with a token or cost limit asks: the spending counts for
    nothing else, and a tree may hold 100,000 runs."""
    if budget.limits.max_tokens is None and budget.limits.max_cost_usd is None:
        return
    tokens, cost = tree_spend(root.run_id, root.started_at or 0.0)
    budget.tokens += tokens
    budget.cost += cost
