"""How long the sweeper holds the event loop, with a store full of finished runs.

    python bench/sweeper.py [--runs 100000] [--store sqlite|memory] [--seconds 3]

Fills a store with ``--runs`` finished runs (most kept, not due yet; 2 % due for archiving; 1 %
``cleanup="delete"``), then runs the runtime's sweeper task (:meth:`Sweeper.run`, every 0.25 s) for
``--seconds`` next to a ticker task that wakes every millisecond and records how late it woke (loop
lag).  The same ticker runs alone first: that is the **floor** (the lag of an idle loop on this
machine).  Also times one step (``Store.cleanup_candidates`` with the sweeper's limit) and, for
comparison, the whole-scan read the sweeper did before it was incremental (every candidate at once).

Prints one JSON line: max and p99 loop lag with the sweeper and for the floor, the longest garbage
collection meanwhile (a full collection walks every object the process holds — 100,000 records in
the memory store — and is no part of the sweep), the longest and median sweep step, and what the
whole scan costs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct

from subagents.runtime.sweeper import STEP_ROWS, Sweeper
from subagents.store import MemoryStore, RunRecord, Store
from subagents.store.sqlite import SQLiteStore

NOW = 1_000_000.0


def fill(store: Store, n: int) -> None:
    for i in range(n):
        rid = f"run-{i:07d}"
        ended = NOW - 2_000 + i * 0.01
        kw: dict[str, Any] = {"archive_at": ended + 3600}  # kept, due in an hour
        if i % 50 == 0:
            kw = {"archive_at": NOW - 1}  # due
        elif i % 100 == 1:
            kw = {"cleanup": "delete"}
        store.create_run(RunRecord(run_id=rid, agent_id=rid, nickname=f"n{i}", agent_type="explore", task="t",
                                   status="completed", created_at=ended - 1, ended_at=ended, **kw))
        if i % 5000 == 4999:
            store.flush()
    store.flush()


async def lag(seconds: float, work: asyncio.Task[None] | None = None) -> list[float]:
    out: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        out.append(time.perf_counter() - t0 - 0.001)
    if work is not None:
        work.cancel()
    return out


async def measure(store: Store, seconds: float) -> dict[str, Any]:
    floor = await lag(seconds)
    sw = Sweeper(store, clock=lambda: NOW, interval_s=0.25)
    steps: list[float] = []
    real_step = sw.step

    def timed(*args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_step(*args)
        finally:
            steps.append(time.perf_counter() - t0)

    sw.step = timed  # type: ignore[method-assign]
    gc_pauses: list[float] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            gc_pauses.append(time.perf_counter() - started.pop())

    gc.callbacks.append(on_gc)
    task = asyncio.get_running_loop().create_task(sw.run())
    with_sweeper = await lag(seconds, task)
    gc.callbacks.remove(on_gc)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    store.flush()
    t0 = time.perf_counter()
    step = store.cleanup_candidates(NOW, STEP_ROWS)
    step_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    whole = store.cleanup_candidates(NOW)
    whole_ms = (time.perf_counter() - t0) * 1e3
    ms = [x * 1e3 for x in with_sweeper]
    fl = [x * 1e3 for x in floor]
    return {"lag_max_ms": round(max(ms), 2), "lag_p99_ms": round(pct(ms, 99), 3),
            "gc_pause_max_ms": round(max(gc_pauses, default=0.0) * 1e3, 2), "steps": len(steps),
            "step_max_ms": round(max(steps) * 1e3, 2),
            "step_median_ms": round(sorted(steps)[len(steps) // 2] * 1e3, 3),
            "floor_lag_max_ms": round(max(fl), 2), "floor_lag_p99_ms": round(pct(fl, 99), 3),
            "one_step_read_ms": round(step_ms, 2), "step_rows": STEP_ROWS, "step_got": len(step),
            "whole_scan_read_ms": round(whole_ms, 1), "whole_scan_rows": len(whole)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        store: Store = SQLiteStore(Path(d) / "state.db") if a.store == "sqlite" else MemoryStore()
        try:
            t0 = time.perf_counter()
            fill(store, a.runs)
            fill_s = time.perf_counter() - t0
            res = asyncio.run(measure(store, a.seconds))
            left = len(store.list_runs())
        finally:
            store.close()
    print(json.dumps({"bench": "sweeper", "store": a.store, "runs": a.runs, "fill_s": round(fill_s, 1),
                      **res, "unarchived_left": left}))


if __name__ == "__main__":
    main()
