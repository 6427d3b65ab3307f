"""Limits of a run and the budget a run carves for its children.

>>> Limits(max_turns=3).check_turns(4)
Traceback (most recent call last):
...
subagents.exceptions.LimitExceeded: Exceeded max_turns=3 (turns=4)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace

from ..exceptions import LimitExceeded, UserError
from ..messages import Usage

__all__ = ["Budget", "Limits"]


@dataclass(slots=True, frozen=True)
class Limits:
    """Per-run limits; ``None`` means unlimited.

    ``max_tokens`` counts input + output tokens of every model call of the run (and of its
    children, whose budgets are carved from it); ``timeout_s`` is wall-clock time.
    """

    max_turns: int | None = None
    max_tokens: int | None = None
    timeout_s: float | None = None
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        for name, v, whole in (("max_turns", self.max_turns, True), ("max_tokens", self.max_tokens, True),
                               ("timeout_s", self.timeout_s, False), ("max_cost_usd", self.max_cost_usd, False)):
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise UserError(f"Limits.{name} must be a positive number or None, got {v!r}")
            if whole and not isinstance(v, int):
                raise UserError(f"Limits.{name} must be a whole number, got {v!r}")

    def merged(self, override: Limits | None) -> Limits:
        """These limits with every non-``None`` field of ``override`` taking precedence."""
        if override is None or override == _NO_LIMITS:
            return self
        return replace(self, **{f.name: getattr(override, f.name) for f in fields(override)
                                if getattr(override, f.name) is not None})

    def check_turns(self, turns: int) -> None:
        if self.max_turns is not None and turns > self.max_turns:
            raise LimitExceeded("max_turns", self.max_turns, turns)

    def check_tokens(self, tokens: int) -> None:
        if self.max_tokens is not None and tokens > self.max_tokens:
            raise LimitExceeded("max_tokens", self.max_tokens, tokens)

    def check_cost(self, cost: float | None) -> None:
        if self.max_cost_usd is not None and cost is not None and cost > self.max_cost_usd:
            raise LimitExceeded("max_cost_usd", self.max_cost_usd, round(cost, 6))


_NO_LIMITS = Limits()


class Budget:
    """What one run may still spend: its own use plus what its children used or hold reserved.

    A child's token and cost limits are reserved from its parent's remaining budget when it is
    spawned (:meth:`carve`) and the unused part returns when it ends (:meth:`release`); the wall
    clock deadline of a child never passes its parent's.
    """

    __slots__ = ("cost", "deadline", "limits", "reserved_cost", "reserved_tokens", "started", "tokens")

    def __init__(self, limits: Limits, *, now: float | None = None) -> None:
        self.limits = limits
        self.started = time.monotonic() if now is None else now
        self.deadline = None if limits.timeout_s is None else self.started + limits.timeout_s
        self.tokens = 0
        self.cost = 0.0
        self.reserved_tokens = 0
        self.reserved_cost = 0.0

    def add(self, usage: Usage, cost: float | None) -> None:
        self.tokens += usage.input_tokens + usage.output_tokens
        if cost is not None:
            self.cost += cost

    def check(self) -> None:
        """Raise :class:`LimitExceeded` if spent + reserved passes a limit."""
        self.limits.check_tokens(self.tokens + self.reserved_tokens)
        if self.limits.max_cost_usd is not None:
            self.limits.check_cost(self.cost + self.reserved_cost)

    def remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def carve(self, wanted: Limits) -> Limits:
        """Limits for a child: ``wanted`` capped by what is left here, and reserve them."""
        lim = self.limits
        tokens = wanted.max_tokens
        reserved = 0
        if lim.max_tokens is not None:
            left = lim.max_tokens - self.tokens - self.reserved_tokens
            if left <= 0:
                raise LimitExceeded("max_tokens", lim.max_tokens, self.tokens + self.reserved_tokens)
            tokens = left if tokens is None else min(tokens, left)
            reserved = tokens
            self.reserved_tokens += reserved
        cost = wanted.max_cost_usd
        if lim.max_cost_usd is not None:
            left_c = lim.max_cost_usd - self.cost - self.reserved_cost
            if left_c <= 0:
                self.reserved_tokens -= reserved
                raise LimitExceeded("max_cost_usd", lim.max_cost_usd, round(self.cost + self.reserved_cost, 6))
            cost = left_c if cost is None else min(cost, left_c)
            self.reserved_cost += cost
        timeout = wanted.timeout_s
        rem = self.remaining_s()
        if rem is not None:
            rem = max(rem, 0.001)
            timeout = rem if timeout is None else min(timeout, rem)
        return Limits(wanted.max_turns, tokens, timeout, cost)

    def release(self, carved: Limits, used: Budget) -> None:
        """A child ended: return its reservation and charge what it really spent."""
        if self.limits.max_tokens is not None and carved.max_tokens is not None:
            self.reserved_tokens -= carved.max_tokens
        if self.limits.max_cost_usd is not None and carved.max_cost_usd is not None:
            self.reserved_cost -= carved.max_cost_usd
        self.tokens += used.tokens
        self.cost += used.cost
