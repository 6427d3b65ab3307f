"""The events of runs on a remote engine, read back from the run store the workers write.

The workers record every run, status change and message in the store (docs/scale-out.md).  A
:class:`StoreWatch` reads the trees a remote :class:`~subagents.runtime.runtime.Runtime` started and
publishes on its bus the events the local engine publishes for the same steps, in the same order:
``subagent_spawned``, ``run_start``, ``turn_start`` (with the usage so far), ``assistant_text`` (whole
turns, never deltas), ``model_end`` (model, usage, cost, stop reason — from the ``model_end`` audit row
the worker records with each model call), ``tool_start``, ``tool_end``, ``run_end``,
``subagent_status_changed`` and ``subagent_completed``.

Not published (the store does not hold them): streamed text deltas, ``tool_end``'s ``duration_s``,
``subagent_queued`` and team events.  A step shows up one poll (:attr:`StoreWatch.interval`) after a
worker recorded it; a model call's tool calls are recorded with the model's reply, so ``tool_start``
comes with ``turn_start``.  Each poll reads only what is new: a running run's transcript from the last
entry seen on (when the store can), and its audit rows only when it has a new model call.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, Usage
from ..store.base import RunRecord, Store
from .events import Event, EventBus

__all__ = ["StoreWatch"]


@dataclass(slots=True)
class _Seen:
    status: str = ""
    messages: int = 0
    turns: int = 0
    tools: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    calls: int = 0  # model_end audit rows published
    usage: Usage = field(default_factory=Usage)  # the run's usage so far (turn_start carries it)
    rows: list[dict[str, Any]] | None = None  # the model_end rows read in this poll


def _stats(rec: RunRecord) -> dict[str, Any]:
    dur = (rec.ended_at - rec.started_at) if rec.ended_at is not None and rec.started_at is not None else 0.0
    return {"status": rec.status, "outcome": rec.outcome, "turns": rec.turns, "tool_calls": rec.tool_calls,
            "duration_s": max(dur, 0.0), "usage": dict(rec.usage), "cost_usd": rec.cost_usd,
            "truncated": rec.truncated, "limit": rec.limit}


class StoreWatch:
    """Publishes the events of the watched trees from the store (see the module docstring)."""

    interval = 0.1
    """Seconds between two reads of the store while someone listens."""

    def __init__(self, store: Store, bus: EventBus) -> None:
        self.store, self.bus = store, bus
        self.roots: set[str] = set()
        self.seen: dict[str, _Seen] = {}
        self.reopened: set[str] = set()  # resumed runs not seen running again yet
        try:  # a store that reads a transcript from an entry on (``transcript(run_id, start)``)
            self._tail = "start" in inspect.signature(store.transcript).parameters
        except (TypeError, ValueError):
            self._tail = False

    def watch(self, root_id: str, *, reopened: str | None = None) -> None:
        """Publish the events of the tree under ``root_id`` from now on (until it has ended; ``reopened``:
        a run of it that was resumed and may still look finished in the store)."""
        self.roots.add(root_id)
        if reopened is not None:
            self.reopened.add(reopened)

    async def run(self) -> None:
        """Poll until cancelled (the runtime's service)."""
        while True:
            if self.bus.active and self.roots:
                self.poll()
            await asyncio.sleep(self.interval)

    def poll(self) -> None:
        """Publish what the store holds that was not published yet (only while someone listens)."""
        if not self.bus.active:
            return
        for root in sorted(self.roots):
            recs = sorted(self.store.list_runs(root_id=root, include_archived=True),
                          key=lambda r: (r.depth, r.created_at))
            for rec in recs:
                self._one(rec)
            if recs and all(r.is_final for r in recs) and any(r.run_id == root for r in recs) and not (
                    self.reopened & {r.run_id for r in recs}):
                self.roots.discard(root)
                for r in recs:
                    self.seen.pop(r.run_id, None)

    def _emit(self, rec: RunRecord, kind: str, **data: Any) -> None:
        self.bus.publish(Event(kind, rec.run_id, rec.parent_id, rec.depth, data, nickname=rec.nickname))

    def _one(self, rec: RunRecord) -> None:
        s = self.seen.get(rec.run_id)
        if s is None:
            s = self.seen[rec.run_id] = _Seen()
            self._emit(rec, "subagent_spawned", agent_type=rec.agent_type, label=rec.label,
                       background=rec.background, model=rec.model, call_id=None)
        ran = rec.status == "running" or (  # (or started and ended between two polls: never seen running)
            rec.is_final and s.status not in ("running", rec.status) and rec.started_at is not None)
        if ran and s.status != "running":  # started, or resumed
            self.reopened.discard(rec.run_id)
            self._emit(rec, "subagent_status_changed", status="running")
            self._emit(rec, "run_start", agent_type=rec.agent_type, prompt=rec.task)
        if rec.status == "running" or (rec.is_final and s.status != rec.status):
            s.rows = None
            new = self._new_messages(rec.run_id, s.messages)
            for m in new:
                self._message(rec, s, m)
            s.messages += len(new)
        if rec.is_final and s.status != rec.status:
            for row in self._model_rows(rec, s)[s.calls:]:  # model calls that failed (no reply recorded)
                s.calls += 1
                s.turns += 1
                self._emit(rec, "turn_start", turn=s.turns, usage=s.usage.to_dict())
                self._emit(rec, "model_end", **row)
            self._emit(rec, "run_end", status=rec.status, outcome=rec.outcome, turns=rec.turns, usage=dict(rec.usage))
            self._emit(rec, "subagent_status_changed", status=rec.status)
            self._emit(rec, "subagent_completed", **_stats(rec))
        s.status = rec.status

    def _new_messages(self, run_id: str, seen: int) -> list[Message]:
        if self._tail:
            read: Any = self.store.transcript  # ``start``: not in every store's signature yet
            got: list[Message] = read(run_id, start=seen)
            return got
        return self.store.transcript(run_id)[seen:]

    def _model_rows(self, rec: RunRecord, s: _Seen) -> list[dict[str, Any]]:
        """The run's ``model_end`` audit rows (read once per poll, and only when needed)."""
        if s.rows is None:
            s.rows = [a.data for a in self.store.audit_of(rec.run_id) if a.kind == "model_end"]
        return s.rows

    def _message(self, rec: RunRecord, s: _Seen, m: Message) -> None:
        if m.role == "assistant":
            s.turns += 1
            self._emit(rec, "turn_start", turn=s.turns, usage=s.usage.to_dict())
            if m.text:
                self._emit(rec, "assistant_text", text=m.text, delta=False)
            rows = self._model_rows(rec, s)
            if s.calls < len(rows):
                row = rows[s.calls]
                s.calls += 1
                if row.get("usage"):
                    s.usage = s.usage + Usage.from_dict(row["usage"])
                self._emit(rec, "model_end", **row)
            for u in m.tool_uses:
                s.tools[u.id] = u.name
                self._emit(rec, "tool_start", tool=u.name, call_id=u.id, arguments=u.arguments)
        else:
            for r in m.tool_results:
                self._emit(rec, "tool_end", tool=s.tools.pop(r.tool_use_id, ""), call_id=r.tool_use_id,
                           is_error=r.is_error, output=r.content[:2000])
