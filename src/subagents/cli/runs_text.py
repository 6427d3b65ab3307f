"""How ``subagents runs`` shows things: ages, audit entries, transcript messages; and a run's subtree."""

from __future__ import annotations

import json
from typing import Any

import click

from ..store.base import AuditRecord, RunRecord, Store

__all__ = ["age", "audit_line", "descendants", "echo_message"]


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
            click.echo(f"{m.role}: {b.text}")
        elif b.kind == "tool_use":
            click.echo(f"{m.role}: -> {b.name}({json.dumps(b.arguments, ensure_ascii=False)[:200]})")
        else:
            click.echo(f"{m.role}: <- {'error: ' if b.is_error else ''}{b.content[:300]}")



def descendants(store: Store, rec: RunRecord) -> list[RunRecord]:
    """Every run under ``rec`` (children, their children, ...)."""
    recs = store.list_runs(include_archived=True, root_id=rec.root_id or rec.run_id)
    kids: dict[str | None, list[RunRecord]] = {}
    for r in recs:
        kids.setdefault(r.parent_id, []).append(r)
    out: list[RunRecord] = []
    todo = list(kids.get(rec.run_id, []))
    while todo:
        r = todo.pop()
        out.append(r)
        todo += kids.get(r.run_id, [])
    return out
