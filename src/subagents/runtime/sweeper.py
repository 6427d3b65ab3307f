"""The sweeper: cleanup policies and requests from other processes.

(The owner lease that tells other processes this runtime's runs have a live owner is renewed by
the store's writer itself — see :mod:`subagents.store._lease` — so it holds while the
process lives, with or without a sweeper, even while the event loop waits on a long model call.)

One :meth:`Sweeper.sweep` does, with the time from an injectable ``clock``:

1. take the requests other processes left for this runtime's runs (``subagents runs cancel`` /
   ``runs resume``) and carry them out;
2. apply the cleanup policies to final runs:
   ``cleanup="keep"`` — ``archive_at = ended_at + archive_after_minutes``; once past it the run is
   archived (hidden from default listings, still readable);
   ``cleanup="delete"`` — record and transcript removed once the result was delivered (a
   foreground or root run: when it ended; a background child: when its announcement was delivered).

A :class:`~subagents.Runtime` runs :meth:`Sweeper.run` as a task while it is open (every
``interval_s``); ``subagents runs sweep`` runs one sweep on demand, without a manager.

A sweep is incremental: it reads the candidates in steps of at most ``step_rows`` runs, in the
store's sweep order (an index on when each run is due: ``Store.cleanup_candidates(now, limit,
after)``), so its work is proportional to what is due, not to every record kept.  In :meth:`run` the
event loop gets control back between steps, so no step holds it for long (``bench/sweeper.py``).
The sweeper also tells the store its ``archive_after`` delay (``Store.archive_after_s``): the store
stamps ``archive_at`` with a run's final status, so the sweeper does not write it afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..exceptions import SpawnError
from ..store.base import Request, RunRecord, Store, sweep_key
from .recovery import adopt_tree

if TYPE_CHECKING:
    from .manager import AgentManager

__all__ = ["STEP_ROWS", "SweepReport", "Sweeper"]

STEP_ROWS = 64
"""Candidates one sweep step reads, at most (each may cost a read of its announcements)."""


@dataclass(slots=True)
class SweepReport:
    archived: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)   # "<kind> <run id>: done|refused: why"


class Sweeper:
    def __init__(self, store: Store, manager: AgentManager | None = None, *, archive_after_minutes: float = 60.0,
                 clock: Callable[[], float] = time.time, interval_s: float = 2.0, step_rows: int = STEP_ROWS) -> None:
        self.store = store
        self.manager = manager
        self.archive_after_s = archive_after_minutes * 60.0
        self.clock = clock
        self.interval_s = interval_s
        self.step_rows = step_rows
        self._tasks: set[asyncio.Task[object]] = set()
        store.archive_after_s = self.archive_after_s

    async def run(self) -> None:
        """Sweep every ``interval_s`` until cancelled, yielding to the event loop between steps."""
        while True:
            now = self.clock()
            report = self._requests(now)
            after = self.step(now, report)
            while after is not None:
                await asyncio.sleep(0)
                await self.store.room()  # a step's writes wait for the store, never block the loop
                after = self.step(now, report, after)
            await asyncio.sleep(self.interval_s)

    def sweep(self) -> SweepReport:
        """One whole sweep, at once: the requests, then every candidate (step by step)."""
        now = self.clock()
        report = self._requests(now)
        after = self.step(now, report)
        while after is not None:
            after = self.step(now, report, after)
        return report

    def _requests(self, now: float) -> SweepReport:
        report = SweepReport()
        if self.manager is not None:
            for req in self.store.take_requests(self.store.owner, now):
                report.requests.append(self._carry_out(req))
        return report

    def step(self, now: float, report: SweepReport, after: tuple[float, str] | None = None
             ) -> tuple[float, str] | None:
        """Apply the policies to the next ``step_rows`` candidates past ``after`` (adding to ``report``);
        returns where the next step starts, or ``None`` when this sweep has seen every candidate due."""
        recs = self.store.cleanup_candidates(now, self.step_rows, after)
        for rec in recs:
            if rec.cleanup == "delete":
                if self._delivered(rec) and not self._live(rec):
                    self.store.delete_run(rec.run_id)
                    report.deleted.append(rec.run_id)
                continue
            archive_at = rec.archive_at
            fields: dict[str, object] = {}
            if archive_at is None:
                archive_at = fields["archive_at"] = (rec.ended_at or now) + self.archive_after_s
            if now >= archive_at:
                fields["archived"] = True
                report.archived.append(rec.run_id)
            if fields:  # one write per run: a stamp committed alone would move it ahead, to be met again
                self.store.update_run(rec.run_id, fields)
        return sweep_key(recs[-1]) if len(recs) == self.step_rows else None

    def _delivered(self, rec: RunRecord) -> bool:
        if not rec.background or rec.parent_id is None:
            return True  # the caller (parent tool call, or the user) had the result when the run ended
        anns = self.store.announcements_of(child_id=rec.run_id)
        return all(a.delivered_at is not None for a in anns)

    def _live(self, rec: RunRecord) -> bool:
        """An agent still in this runtime's memory that may be resumed, or any unfinished descendant."""
        m = self.manager
        if m is None:
            return False
        node = m.nodes.get(rec.run_id)
        return node is not None and any(not n.status.is_final() for n in m.tree.subtree(node))

    def _carry_out(self, req: Request) -> str:
        m = self.manager
        assert m is not None
        try:
            if req.kind == "cancel":
                node = m.find(req.run_id)
                if node is None or node.status.is_final():
                    return f"cancel {req.run_id}: nothing to do, it is not running here"
                run_id = req.run_id
                m.executor.start_service(f"cancel:{run_id}", lambda: m.close(run_id))
                return f"cancel {req.run_id}: done"
            if req.kind == "resume":
                if m.find(req.run_id) is None:
                    rec = self.store.get_run(req.run_id)
                    if rec is not None:
                        adopt_tree(m, self.store, rec.root_id or rec.run_id)
                m.resume(req.run_id, req.message)
                return f"resume {req.run_id}: done"
        except SpawnError as e:
            return f"{req.kind} {req.run_id}: refused: {e}"
        return f"{req.kind} {req.run_id}: refused: unknown request kind"
