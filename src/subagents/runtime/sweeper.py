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
event loop gets control back between steps, and no step holds it for long (``bench/sweeper.py``):

* a step's rows follow its time: each step aims at ``step_budget_s`` (1 ms) of work, taking fewer rows
  after a slow step and up to twice as many after a quick one (between :data:`MIN_STEP_ROWS` and
  ``step_rows``) — what a row costs depends on the store, the records and the machine;
* the next step waits until the store committed this step's writes (``Store.on_commit``), so the
  sweeper never piles writes up in the store: the batch the store prepares on the event loop
  stays one step's size, and a busy runtime's own writes go first.
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

__all__ = ["MIN_STEP_ROWS", "STEP_BUDGET_S", "STEP_ROWS", "SweepReport", "Sweeper"]

STEP_ROWS = 64
"""Candidates one sweep step reads, at most (each may cost a read of its announcements)."""
MIN_STEP_ROWS = 4
"""Candidates a step of :meth:`Sweeper.run` reads at least, however slow the last step was."""
STEP_BUDGET_S = 0.001
"""The time one step of :meth:`Sweeper.run` aims at (its rows follow it; see the module docstring)."""
COMMIT_WAIT_S = 5.0
"""How long :meth:`Sweeper.run` waits at most for a step's writes to commit before going on anyway."""


@dataclass(slots=True)
class SweepReport:
    archived: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)   # "<kind> <run id>: done|refused: why"


class Sweeper:
    def __init__(self, store: Store, manager: AgentManager | None = None, *, archive_after_minutes: float = 60.0,
                 clock: Callable[[], float] = time.time, interval_s: float = 2.0, step_rows: int = STEP_ROWS,
                 step_budget_s: float = STEP_BUDGET_S) -> None:
        self.store = store
        self.manager = manager
        self.archive_after_s = archive_after_minutes * 60.0
        self.clock = clock
        self.interval_s = interval_s
        self.step_rows = step_rows
        self.step_budget_s = step_budget_s
        self.rows = min(step_rows, 16)
        """The rows the next step of :meth:`run` reads (follows the steps' time, see the module docstring)."""
        self.writes = 0
        """Writes the steps made so far (archive, delete, stamp)."""
        store.archive_after_s = self.archive_after_s

    async def run(self) -> None:
        """Sweep every ``interval_s`` until cancelled, in short steps that yield to the event loop."""
        while True:
            now = self.clock()
            report = self._requests(now)
            after: tuple[float, str] | None = None
            while True:
                wrote = self.writes
                t0 = time.perf_counter()
                after = self.step(now, report, after, self.rows)
                self._pace(time.perf_counter() - t0)
                if self.writes != wrote:
                    await self._committed()
                if after is None:
                    break
                await asyncio.sleep(0)
                await self.store.room()  # (the runtime's own writes may fill the store)
            await asyncio.sleep(self.interval_s)

    def _pace(self, took: float) -> None:
        """The next step's rows: what fits ``step_budget_s`` at this step's pace, at most twice as many."""
        fit = int(self.rows * self.step_budget_s / took) if took > 0 else self.step_rows
        self.rows = max(MIN_STEP_ROWS, min(self.step_rows, 2 * self.rows, fit))

    async def _committed(self) -> None:
        """Wait until the store committed what was written so far (a stopped store: at most COMMIT_WAIT_S)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def committed() -> None:
            if not done.done():
                done.set_result(None)

        def on_commit() -> None:  # (from any thread)
            loop.call_soon_threadsafe(committed)

        if self.store.on_commit(on_commit):  # (not asyncio.wait_for: on 3.11 it can swallow a cancellation)
            await asyncio.wait([done], timeout=COMMIT_WAIT_S)

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

    def step(self, now: float, report: SweepReport, after: tuple[float, str] | None = None,
             rows: int | None = None) -> tuple[float, str] | None:
        """Apply the policies to the next ``rows`` (default ``step_rows``) candidates past ``after`` (adding
        to ``report``); returns where the next step starts, or ``None`` when this sweep has seen every
        candidate due."""
        limit = rows or self.step_rows
        recs = self.store.cleanup_candidates(now, limit, after)
        for rec in recs:
            if rec.cleanup == "delete":
                if self._delivered(rec) and not self._live(rec):
                    self.store.delete_run(rec.run_id)
                    self.writes += 1
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
                self.writes += 1
        return sweep_key(recs[-1]) if len(recs) == limit else None

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
