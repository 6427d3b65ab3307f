"""The sweeper task's steps stay short: their rows follow their time, and a step's writes commit before the next.

(``bench/sweeper.py`` measures the loop lag this buys; these tests check the behaviour behind it.)
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from subagents.runtime.sweeper import MIN_STEP_ROWS, STEP_ROWS, Sweeper
from subagents.store import RunRecord, Store

NOW = 5000.0


def fill(store: Store, n: int) -> tuple[set[str], set[str]]:
    """``n`` finished runs: a third due for archiving, a third to delete, a third kept for later."""
    archive, delete = set(), set()
    for i in range(n):
        rid = f"r{i:04d}"
        kw: dict[str, object] = {"archive_at": 9000.0}
        if i % 3 == 0:
            kw = {"archive_at": 1000.0 + i}
            archive.add(rid)
        elif i % 3 == 1:
            kw = {"cleanup": "delete"}
            delete.add(rid)
        store.create_run(RunRecord(run_id=rid, agent_id=rid, nickname=rid, agent_type="explore", task="t",
                                   status="completed", ended_at=1000.0 + i, **kw))  # type: ignore[arg-type]
    store.flush()
    return archive, delete


async def sweep_once(sw: Sweeper) -> None:
    """Run the sweeper task until its first sweep is over (it then sleeps ``interval_s``)."""
    sw.interval_s = 3600.0
    ended = asyncio.Event()
    real = sw.step

    def step(now: float, report: object, after: tuple[float, str] | None = None,
             rows: int | None = None) -> tuple[float, str] | None:
        nxt = real(now, report, after, rows)  # type: ignore[arg-type]
        if nxt is None:
            ended.set()
        return nxt

    sw.step = step  # type: ignore[method-assign]
    task = asyncio.create_task(sw.run())
    try:
        await asyncio.wait_for(ended.wait(), 60)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_slow_rows_make_short_steps_and_the_sweep_does_the_same(store: Store) -> None:
    archive, delete = fill(store, 240)
    asked: list[int] = []
    real = store.cleanup_candidates

    def slow(now: float, limit: int | None = None, after: tuple[float, str] | None = None) -> list[RunRecord]:
        got = real(now, limit, after)
        time.sleep(0.0004 * len(got))  # 0.4 ms a row: 64 rows would hold the loop 26 ms
        asked.append(limit or 0)
        return got

    store.cleanup_candidates = slow  # type: ignore[method-assign]
    sw = Sweeper(store, clock=lambda: NOW, archive_after_minutes=10)
    await sweep_once(sw)
    store.flush()
    assert asked[0] <= 16
    assert max(asked[1:]) <= 2 * MIN_STEP_ROWS  # 1 ms a step fits 2-3 of these rows
    left = {r.run_id: r for r in store.list_runs(include_archived=True)}
    assert not delete & set(left)
    assert {rid for rid, r in left.items() if r.archived} == archive


async def test_quick_rows_make_bigger_steps(store: Store) -> None:
    fill(store, 900)
    asked: list[int] = []
    real = store.cleanup_candidates

    def spy(now: float, limit: int | None = None, after: tuple[float, str] | None = None) -> list[RunRecord]:
        asked.append(limit or 0)
        return real(now, limit, after)

    store.cleanup_candidates = spy  # type: ignore[method-assign]
    sw = Sweeper(store, clock=lambda: NOW, archive_after_minutes=10, step_budget_s=0.05)
    await sweep_once(sw)
    assert asked[0] == 16
    assert max(asked) == STEP_ROWS


async def test_a_step_starts_once_the_last_steps_writes_are_committed(store: Store) -> None:
    archive, delete = fill(store, 150)
    done: list[str] = []      # archived or deleted by the steps so far
    unseen: list[str] = []    # of those, not yet visible to a read at the start of the next step
    real = store.cleanup_candidates

    def check(now: float, limit: int | None = None, after: tuple[float, str] | None = None) -> list[RunRecord]:
        for rid in done:  # reads see what is committed
            rec = store.get_run(rid)
            if rec is not None and not rec.archived:
                unseen.append(rid)
        got = real(now, limit, after)
        done.extend(r.run_id for r in got if r.run_id in archive | delete)
        return got

    store.cleanup_candidates = check  # type: ignore[method-assign]
    await sweep_once(Sweeper(store, clock=lambda: NOW, archive_after_minutes=10))
    assert len(done) == len(archive) + len(delete)
    assert unseen == []
