"""What one run may spend: turns, tokens, wall-clock time and cost (:class:`Limits`).

>>> Limits(max_turns=3).check_turns(4)
Traceback (most recent call last):
...
subagents.exceptions.LimitExceeded: Exceeded max_turns=3 (turns=4)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .exceptions import LimitExceeded, UserError

__all__ = ["MAX_TIMEOUT_S", "MAX_TURNS", "Limits"]

MAX_TURNS = 1_000_000
"""The largest ``max_turns`` (a definition's, ``subagents run --max-turns``, ``Limits``): more is a typo."""
MAX_TIMEOUT_S = 366 * 86_400.0
"""The largest ``timeout_s`` (a year, in seconds): more is a typo, and overflows the timers of the Temporal engine."""
_MOST = {"max_turns": MAX_TURNS, "timeout_s": MAX_TIMEOUT_S}


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
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
                raise UserError(f"Limits.{name} must be a positive number or None, got {v!r}")
            if v > _MOST.get(name, v):
                raise UserError(f"Limits.{name} must be at most {_MOST[name]:.0f}, got {v!r}")
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
