"""How ``subagents runs`` shows things: ages, audit entries, transcript messages; a run's subtree, and the tree
with each agent's duration, turns, tokens and cost (``runs tree``)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from ..ids import short_id
from ..store.base import AuditRecord, RunRecord, Store
from .common import isatty

__all__ = ["age", "audit_line", "cache_hits", "cache_line", "descendants", "echo_message", "owner_gone", "say",
           "tree_lines"]


def say(text: str) -> None:
    """Echo ``text`` read from the store (a model's answer, a tool's output, team mail): on a terminal its control
    characters are shown (``\\x1b``), not obeyed, as ``subagents run`` shows an answer; piped, it goes to
    ``click.echo`` unchanged."""
    from .render import terminal_safe

    click.echo(terminal_safe(text) if isatty(sys.stdout) else text)


def age(t: float | None, now: float) -> str:
    if not t:
        return "-"
    s = max(now - t, 0.0)
    return f"{s:.0f}s" if s < 90 else f"{s / 60:.0f}m" if s < 5400 else f"{s / 3600:.1f}h"


def audit_line(a: AuditRecord) -> str:
    """One audit entry as a person reads it: who allowed or refused what, and why."""
    d = a.data
    call = f"{d.get('tool')}({_short(d.get('arguments'))})" if d.get("tool") else ""
    if a.kind == "approval":
        by = d.get("by") or "approver"
        extra = f" as {d['rule']!r}" if d.get("rule") else ""
        msg = f": {d['message']}" if d.get("message") else ""
        return f"approval  {call} {d.get('decision')}{extra} by {by} after {d.get('waited_s', 0):g} s{msg}"
    if a.kind == "denied":
        return f"denied    {call}: {d.get('reason')}"
    if a.kind == "hook_blocked":
        return f"blocked   {call or d.get('event', '')} by a hook: {d.get('reason')}"
    if a.kind == "hook_error":
        return f"hook err  {d.get('event')} {d.get('hook')} ({d.get('source') or 'python'}): {d.get('message')}"
    return f"{a.kind}  {json.dumps(d, default=str)[:200]}"


def _short(args: object, n: int = 80) -> str:
    text = json.dumps(args, ensure_ascii=False, default=str) if args is not None else ""
    return text if len(text) <= n else text[: n - 1] + "…"


def echo_message(m: Any) -> None:
    for b in m.content:
        if b.kind == "text":
            say(f"{m.role}: {b.text}")
        elif b.kind == "tool_use":
            say(f"{m.role}: -> {b.name}({json.dumps(b.arguments, ensure_ascii=False)[:200]})")
        else:
            say(f"{m.role}: <- {'error: ' if b.is_error else ''}{b.content[:300]}")


def descendants(store: Store, rec: RunRecord) -> list[RunRecord]:
    """Every run under ``rec`` (children, their children, ...)."""
    recs = store.list_runs(include_archived=True, root_id=rec.root_id or rec.run_id)
    kids: dict[str | None, list[RunRecord]] = {}
    for r in recs:
        kids.setdefault(r.parent_id, []).append(r)
    out: list[RunRecord] = []
    todo = list(kids.get(rec.run_id, []))
    seen = {rec.run_id}  # (a cycle of parent ids in a damaged or crafted store must not loop for ever)
    while todo:
        r = todo.pop()
        if r.run_id in seen:
            continue
        seen.add(r.run_id)
        out.append(r)
        todo += kids.get(r.run_id, [])
    return out


def tree_lines(root: RunRecord, recs: list[RunRecord], now: float) -> list[str]:
    """A header, then ``root`` and its descendants among ``recs``, one line each, indented under their parent, with
    columns for duration (``+``: still running, so far), turns, tokens (in/out) and estimated cost; then the total."""
    kids: dict[str | None, list[RunRecord]] = {}
    for r in recs:
        kids.setdefault(r.parent_id, []).append(r)
    order: list[tuple[int, RunRecord]] = []
    todo = [(0, root)]
    seen: set[str] = set()  # (a cycle of parent ids: see descendants)
    while todo:
        depth, r = todo.pop()
        if r.run_id in seen:
            continue
        seen.add(r.run_id)
        order.append((depth, r))
        todo += [(depth + 1, c) for c in reversed(kids.get(r.run_id, []))]
    heads = ["AGENT", *(f"{'  ' * d}{r.nickname} [{r.agent_type}] {r.status}{'/' + r.outcome if r.outcome else ''}"
                        for d, r in order)]
    cols = [("ID", "TIME", "TURNS", "TOKENS", "COST", "LABEL"),
            *((short_id(r.run_id), _duration(r, now), str(r.turns), _tokens(r.usage), _cost(r.cost_usd), r.label[:50])
              for _, r in order)]
    hw = max(len(h) for h in heads)
    w = [max(len(c[i]) for c in cols) for i in range(5)]
    lines = [f"{h:<{hw}}  {c[0]:<{w[0]}}  {c[1]:>{w[1]}}  {c[2]:>{w[2]}}  {c[3]:>{w[3]}}  {c[4]:>{w[4]}}  "
             f"{c[5]}".rstrip() for h, c in zip(heads, cols, strict=True)]
    every = [r for _, r in order]
    usage = {k: sum(r.usage.get(k, 0) for r in every) for k in ("input_tokens", "output_tokens")}
    costs = [r.cost_usd for r in every]
    total = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    turns = sum(r.turns for r in every)
    lines.append(f"total: {_n(len(every), 'agent')} · {_duration(root, now)} wall · {_n(turns, 'turn')} · "
                 f"tokens {_tokens(usage)} (in/out) · {_cost(total)}")
    return lines


def cache_hits(recs: list[RunRecord]) -> tuple[int, int, int]:
    """(input tokens, of them read from the provider's prompt cache, written to it) over ``recs``' usage."""
    total, read, written = (sum(int(r.usage.get(k, 0) or 0) for r in recs)
                            for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
    return total, read, written


def _ratio(read: int, total: int) -> str:
    return f"{read / total:.1%} ({_k(read)} of {_k(total)})"


def cache_line(rec: RunRecord, tree: list[RunRecord]) -> str | None:
    """The prompt-cache hit ratio of a run and of its tree: input tokens the provider read from its cache over all
    input tokens (``Usage.input_tokens`` counts cached ones too), from the usage the providers reported;
    ``None`` when no input tokens were recorded."""
    total, read, written = cache_hits([rec])
    if not total:
        return None
    line = f"{_ratio(read, total)} of input tokens read from cache"
    if written:
        line += f", {_k(written)} written"
    if tree:
        t_total, t_read, _ = cache_hits([rec, *tree])
        line += f" · tree of {_n(len(tree) + 1, 'run')}: {_ratio(t_read, t_total)}"
    if not read and not written:
        line += " (the provider reported no cached tokens)"
    return line


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _duration(r: RunRecord, now: float) -> str:
    if r.started_at is None:
        return "-"
    end = r.ended_at if r.ended_at is not None else now
    text = _secs(max(end - r.started_at, 0.0))
    return text if r.ended_at is not None else text + "+"


def _secs(s: float) -> str:
    n = int(s)
    if s < 60:
        return f"{s:.1f}s"
    if n < 3600:
        return f"{n // 60}m{n % 60:02d}s"
    if n < 86400:
        return f"{n // 3600}h{n % 3600 // 60:02d}m"
    return f"{n // 86400}d{n % 86400 // 3600:02d}h"


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _tokens(usage: dict[str, int]) -> str:
    return f"{_k(usage.get('input_tokens', 0))}/{_k(usage.get('output_tokens', 0))}"


def _cost(cost: float | None) -> str:
    return "est n/a" if cost is None else f"${cost:.4f}"


def owner_gone(store: Store, rec: RunRecord) -> bool:
    """Whether the unfinished run ``rec`` has no live process any more (it was killed): then say so."""
    from ..runtime.recovery import is_orphaned

    if not is_orphaned(store, rec, time.time()):
        return False
    click.echo(f"{rec.nickname} ({rec.run_id}) is still marked {rec.status}, but the process that ran it is gone "
               "(killed before it finished); the next runtime that opens this store resumes it (e.g. any "
               "'subagents run'), or cancel it with 'subagents runs cancel ID'", err=True)
    return True
