"""``RunResult``: what one agent run produced, with its stats."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..messages import Usage
from .status import Outcome, Status

__all__ = ["RunResult", "format_stats"]


@dataclass(slots=True)
class RunResult:
    """The result of one agent run.

    ``text`` is the final answer, or the last assistant text when a limit, an error or a close
    stopped the run (then ``truncated`` is true and ``outcome`` says why).
    """

    id: str
    nickname: str
    agent: str
    status: Status
    outcome: Outcome
    text: str = ""
    truncated: bool = False
    limit: str | None = None
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    duration_s: float = 0.0
    error: str | None = None
    tool_calls: int = 0
    parent_id: str | None = None
    depth: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    def stats_line(self, descendants: Iterable[RunResult] = ()) -> str:
        """One line of stats: ``runtime 1.2s • 3 turns • 2 tool calls • tokens 1.5k (in 1.2k / out 300) • est $0.01``.

        With ``descendants`` (the results of the agents under this one) the turns, tool calls, tokens
        and cost are those of the whole tree, and the line ends with ``(whole tree: N agents)``; the
        runtime is this agent's wall clock.
        """
        others = list(descendants)
        if not others:
            return format_stats(self.duration_s, self.turns, self.usage, self.cost_usd, self.tool_calls)
        usage = Usage()
        for r in (self, *others):
            usage.add(r.usage)
        costs = [r.cost_usd for r in (self, *others)]
        cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
        line = format_stats(self.duration_s, sum(r.turns for r in (self, *others)), usage, cost,
                            sum(r.tool_calls for r in (self, *others)))
        return f"{line} (whole tree: {1 + len(others)} agents)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "nickname": self.nickname,
            "agent": self.agent,
            "status": str(self.status),
            "outcome": str(self.outcome),
            "text": self.text,
            "truncated": self.truncated,
            "limit": self.limit,
            "turns": self.turns,
            "usage": self.usage.to_dict(),
            "cost_usd": self.cost_usd,
            "duration_s": round(self.duration_s, 6),
            "error": self.error,
            "tool_calls": self.tool_calls,
            "parent_id": self.parent_id,
            "depth": self.depth,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        return cls(
            id=d["id"], nickname=d.get("nickname", ""), agent=d.get("agent", ""),
            status=Status(d["status"]), outcome=Outcome(d["outcome"]), text=d.get("text", ""),
            truncated=bool(d.get("truncated", False)), limit=d.get("limit"), turns=int(d.get("turns", 0)),
            usage=Usage.from_dict(d.get("usage") or {}), cost_usd=d.get("cost_usd"),
            duration_s=float(d.get("duration_s", 0.0)), error=d.get("error"),
            tool_calls=int(d.get("tool_calls", 0)), parent_id=d.get("parent_id"), depth=int(d.get("depth", 0)),
        )


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _dur(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    return f"{m}m{sec:02d}s"


def format_stats(duration_s: float, turns: int, usage: Usage, cost_usd: float | None, tool_calls: int = 0) -> str:
    cost = "est n/a" if cost_usd is None else f"est ${cost_usd:.4f}"
    i, o = usage.input_tokens, usage.output_tokens
    tokens = f"tokens {_k(i + o)} (in {_k(i)} / out {_k(o)}"
    if usage.cache_read_tokens or usage.cache_write_tokens:
        tokens += f" / cache r {_k(usage.cache_read_tokens)} w {_k(usage.cache_write_tokens)}"
    dur = f"{duration_s:.1f}s" if duration_s < 60 else _dur(duration_s)
    return (f"runtime {dur} • {turns} turn{'' if turns == 1 else 's'} • "
            f"{tool_calls} tool call{'' if tool_calls == 1 else 's'} • {tokens}) • {cost}")
