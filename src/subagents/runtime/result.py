"""``RunResult``: what one agent run produced, with its stats."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..messages import Usage
from .status import Outcome, Status

__all__ = ["NO_REPLY", "STATUS_LABELS", "RunResult", "announce_stats", "format_stats", "trigger_message"]

NO_REPLY = "NO_REPLY"
"""A reply that is exactly this (surrounding whitespace aside) is silent: nothing is shown to the user."""

STATUS_LABELS: dict[Outcome, str] = {
    Outcome.OK: "completed successfully",
    Outcome.ERROR: "failed",
    Outcome.LIMIT: "failed",
    Outcome.TIMEOUT: "timed out",
    Outcome.CANCELLED: "was cancelled",
    Outcome.INTERRUPTED: "was cancelled",
}
"""The status label of seed 003's trigger message, by outcome."""


@dataclass(slots=True)
class RunResult:
    """The result of one agent run.

    ``text`` is the final answer, or the last assistant text when a limit, an error or a close
    stopped the run (then ``truncated`` is true and ``outcome`` says why).

    ``output`` is the validated structured result of a run started with ``output_type`` (the model
    object) or ``output_schema`` (the JSON value); ``None`` otherwise.  It is not stored: ``text``
    holds the same result as JSON, and ``from_dict`` leaves ``output`` None.

    A reply that is exactly ``NO_REPLY`` is :attr:`silent`: the agent chose to say nothing to the user
    (seed 003: the answer to an announcement that needs none); the CLI prints nothing for it.
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
    output: Any = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def silent(self) -> bool:
        """Whether the reply is exactly ``NO_REPLY``: nothing is to be shown to the user."""
        return self.text.strip() == NO_REPLY

    @property
    def status_label(self) -> str:
        """``completed successfully``, ``failed``, ``timed out`` or ``was cancelled`` (seed 003)."""
        return STATUS_LABELS.get(self.outcome, "failed")

    def announce_stats(self) -> str:
        """Seed 003's stats line: ``runtime 2m34s • tokens 15.2k (in 12.1k / out 3.1k) • est $0.42``."""
        return announce_stats(self.duration_s, self.usage, self.cost_usd)

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
            "silent": self.silent,
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
        hit = f" ({usage.cache_read_tokens / i:.0%} hit)" if i else ""
        tokens += f" / cache r {_k(usage.cache_read_tokens)}{hit} w {_k(usage.cache_write_tokens)}"
    dur = f"{duration_s:.1f}s" if duration_s < 60 else _dur(duration_s)
    return (f"runtime {dur} • {turns} turn{'' if turns == 1 else 's'} • "
            f"{tool_calls} tool call{'' if tool_calls == 1 else 's'} • {tokens}) • {cost}")


def _cost(cost_usd: float | None) -> str:
    if cost_usd is None:
        return "est n/a"
    return f"est ${cost_usd:.2f}" if cost_usd >= 0.01 or cost_usd == 0 else f"est ${cost_usd:.4f}"


def announce_stats(duration_s: float, usage: Usage, cost_usd: float | None) -> str:
    """``runtime 2m34s • tokens 15.2k (in 12.1k / out 3.1k) • est $0.42`` (seed 003's trigger message)."""
    i, o = usage.input_tokens, usage.output_tokens
    return f"runtime {_dur(duration_s)} • tokens {_k(i + o)} (in {_k(i)} / out {_k(o)}) • {_cost(cost_usd)}"


def trigger_message(r: RunResult, label: str, findings: str) -> str:
    """The message that announces a finished background child to its parent (seed 003's announce flow).

    ``findings`` is the child's (possibly capped) final text; ``(no output)`` when empty.  The parent
    is told it may answer ``NO_REPLY`` when the user needs no announcement.
    """
    outcome = r.outcome
    reason = ""
    if outcome is not Outcome.OK:
        why = r.error or (f"limit {r.limit}" if r.limit else str(outcome))
        reason = f"\nReason: {why}. The findings below are its partial work."
    return (f"<subagent-notification>\nA background task {_quoted(label)} ({r.nickname}, id {r.id}) "
            f"just {STATUS_LABELS.get(outcome, 'failed')}.{reason}\n\nFindings:\n{findings or '(no output)'}\n\n"
            f"Stats: {announce_stats(r.duration_s, r.usage, r.cost_usd)}{_TRIGGER_END}")


_TRIGGER_END = ("\n\nSummarize this naturally for the user. Keep it brief (1-2 sentences).\n"
                "Do not mention technical details like tokens or stats.\n"
                f"You can respond with {NO_REPLY} if no announcement is needed.\n"
                "</subagent-notification>")


def _quoted(label: str) -> str:
    one_line = " ".join(label.split())
    return '"' + one_line.replace('"', "'") + '"'
