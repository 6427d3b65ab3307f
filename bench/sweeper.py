"""How long the sweeper holds the event loop, with a store full of finished runs.

    python bench/sweeper.py [--runs 100000] [--store sqlite|memory] [--seconds 2] [--rounds 3]
    python bench/sweeper.py --live 1000 [--runs 100000] [--rounds 3]     # with a runtime's fan-out (SQLite)

Fills a store with ``--runs`` finished runs (most kept, not due yet; 2 % due for archiving; 1 %
``cleanup="delete"``), then, ``--rounds`` times: a ticker task that wakes every millisecond records how
late it wakes (loop lag) for ``--seconds`` on an idle loop — the **floor**, this machine's noise — and
then for ``--seconds`` next to the runtime's sweeper task (:meth:`Sweeper.run`, every 0.25 s), whose
first sweep archives and deletes the 3 % due.  Before each round the store is put back as filled (the
archived runs unarchived, the deleted ones made again), so every round does the same work.

Prints one JSON line: per round and as the median of the rounds, the longest loop stall (``max``) and
the 99th / 99.9th percentile of the lag with the sweeper and for the floor, the longest stall over the
floor's (``excess``); the sweep steps: how many, median, 99th percentile and longest, in wall time and
in the thread's CPU time (a step's wall time over its CPU time is the machine preempting us, not the
sweep's work); how long the first sweep took; the longest garbage collection meanwhile; process CPU
time; and what the whole scan (every candidate at once, the sweeper before it was incremental) costs.

``--live N`` (SQLite): a :class:`~subagents.Runtime` over the filled store runs one fan-out of ``N``
background children while its own sweeper sweeps (every 0.05 s, the due runs put back each round),
against the same runtime whose sweeper finds nothing due, alternating, ``--rounds`` times: the loop lag
during the fan-out, and the sweeper's steps, with and without the sweep's work.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import pct

from subagents.runtime.sweeper import STEP_ROWS, Sweeper
from subagents.store import MemoryStore, RunRecord, Store
from subagents.store.sqlite import SQLiteStore

NOW = 1_000_000.0


def record(i: int) -> RunRecord:
    rid = f"run-{i:07d}"
    ended = NOW - 2_000 + i * 0.01
    kw: dict[str, Any] = {"archive_at": ended + 3600}  # kept, due in an hour
    if i % 50 == 0:
        kw = {"archive_at": NOW - 1}  # due
    elif i % 100 == 1:
        kw = {"cleanup": "delete"}
    return RunRecord(run_id=rid, agent_id=rid, nickname=f"n{i}", agent_type="explore", task="t",
                     status="completed", created_at=ended - 1, ended_at=ended, **kw)


def fill(store: Store, n: int) -> None:
    for i in range(n):
        store.create_run(record(i))
        if i % 5000 == 4999:
            store.flush()
    store.flush()


def reset(store: Store, n: int) -> None:
    """Put the due runs back as :func:`fill` made them (the last sweep archived or deleted them)."""
    for i in range(n):
        if i % 50 == 0:
            store.update_run(f"run-{i:07d}", {"archived": False})
        elif i % 100 == 1 and store.get_run(f"run-{i:07d}") is None:
            store.create_run(record(i))
    store.flush()


async def lag(seconds: float, stop: Callable[[], bool] | None = None) -> list[float]:
    """How late a 1 ms sleep wakes, again and again for ``seconds`` (or until ``stop()``), in ms."""
    out: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and not (stop and stop()):
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        out.append((time.perf_counter() - t0 - 0.001) * 1e3)
    return out


def lag_stats(ms: list[float], prefix: str = "") -> dict[str, float]:
    return {f"{prefix}max_ms": round(max(ms), 2), f"{prefix}p99_ms": round(pct(ms, 99), 3),
            f"{prefix}p999_ms": round(pct(ms, 99.9), 3)}


class StepTimer:
    """Wraps a sweeper's :meth:`~Sweeper.step`: each step's wall and CPU time (ms) and rows asked."""

    def __init__(self, sw: Sweeper) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.rows: list[int] = []
        self.done_at: float | None = None  # when the first sweep ended (perf_counter)
        real = sw.step

        def timed(now: float, report: Any, after: Any = None, rows: int | None = None) -> Any:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                nxt = real(now, report, after) if rows is None else real(now, report, after, rows)
            finally:
                self.wall.append((time.perf_counter() - t0) * 1e3)
                self.cpu.append((time.thread_time() - c0) * 1e3)
                self.rows.append(rows or STEP_ROWS)
            if nxt is None and self.done_at is None:
                self.done_at = time.perf_counter()
            return nxt

        sw.step = timed  # type: ignore[method-assign]

    def stats(self) -> dict[str, float]:
        w, c = self.wall or [0.0], self.cpu or [0.0]
        return {"steps": len(self.wall), "step_median_ms": round(statistics.median(w), 3),
                "step_p99_ms": round(pct(w, 99), 3), "step_max_ms": round(max(w), 2),
                "step_cpu_max_ms": round(max(c), 2), "step_rows_median": statistics.median(self.rows or [0])}


async def one_round(store: Store, seconds: float) -> dict[str, Any]:
    floor = await lag(seconds)
    sw = Sweeper(store, clock=lambda: NOW, interval_s=0.25)
    timer = StepTimer(sw)
    gc_pauses: list[float] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            gc_pauses.append(time.perf_counter() - started.pop())

    gc.callbacks.append(on_gc)
    c0, t0 = time.process_time(), time.perf_counter()
    task = asyncio.get_running_loop().create_task(sw.run())
    with_sweeper = await lag(seconds)
    cpu = time.process_time() - c0
    task.cancel()
    gc.callbacks.remove(on_gc)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return {**lag_stats(with_sweeper, "lag_"), **lag_stats(floor, "floor_lag_"),
            "excess_ms": round(max(with_sweeper) - max(floor), 2), **timer.stats(),
            "first_sweep_s": round((timer.done_at or t0) - t0, 3),
            "gc_pause_max_ms": round(max(gc_pauses, default=0.0) * 1e3, 2), "process_cpu_s": round(cpu, 3)}


def medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in rounds[0].items():
        if isinstance(v, (int, float)):
            out[k] = round(statistics.median(r[k] for r in rounds), 3)
    return out


def bench_store(a: argparse.Namespace, d: str) -> dict[str, Any]:
    store: Store = SQLiteStore(Path(d) / "state.db") if a.store == "sqlite" else MemoryStore()
    try:
        t0 = time.perf_counter()
        fill(store, a.runs)
        fill_s = time.perf_counter() - t0
        rounds = []
        for _ in range(a.rounds):
            reset(store, a.runs)
            rounds.append(asyncio.run(one_round(store, a.seconds)))
        store.flush()
        t0 = time.perf_counter()
        step = store.cleanup_candidates(NOW, STEP_ROWS)
        step_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        whole = store.cleanup_candidates(NOW)
        whole_ms = (time.perf_counter() - t0) * 1e3
        left = len(store.list_runs())
    finally:
        store.close()
    return {"store": a.store, "fill_s": round(fill_s, 1), **medians(rounds),
            "lag_max_all_ms": max(r["lag_max_ms"] for r in rounds),
            "floor_lag_max_all_ms": max(r["floor_lag_max_ms"] for r in rounds),
            "step_max_all_ms": max(r["step_max_ms"] for r in rounds), "per_round": rounds,
            "one_step_read_ms": round(step_ms, 2), "step_rows": STEP_ROWS, "step_got": len(step),
            "whole_scan_read_ms": round(whole_ms, 1), "whole_scan_rows": len(whole), "unarchived_left": left}


async def live_round(d: str, n: int, due: bool) -> dict[str, Any]:
    from ours import PARENT_TEXT, Script

    from subagents import Runtime
    from subagents.models import FunctionModel

    script = Script()
    rt = Runtime(model=FunctionModel(script, inline=True), workdir=d, store=f"sqlite:///{d}/state.db",
                 max_threads=n + 16)
    rt.sweeper.clock = (lambda: NOW) if due else (lambda: NOW - 100_000.0)  # nothing due then
    rt.sweeper.interval_s = 0.05
    timer = StepTimer(rt.sweeper)
    async with rt:
        script.n = 10
        assert (await rt.run("fanout")).text == PARENT_TEXT  # warm
        timer.wall.clear()
        timer.cpu.clear()
        timer.rows.clear()
        script.n = n
        run = asyncio.get_running_loop().create_task(rt.run("fanout"))
        t0 = time.perf_counter()
        ms = await lag(600.0, run.done)
        wall = time.perf_counter() - t0
        assert (await run).text == PARENT_TEXT
    return {**lag_stats(ms, "lag_"), "fanout_ms": round(wall * 1e3, 1), **timer.stats()}


def bench_live(a: argparse.Namespace, d: str) -> dict[str, Any]:
    store = SQLiteStore(Path(d) / "state.db")
    fill(store, a.runs)
    store.close()
    with_sweep, without = [], []
    for _ in range(a.rounds):
        for due in (True, False):
            store = SQLiteStore(Path(d) / "state.db")
            reset(store, a.runs)
            store.close()
            (with_sweep if due else without).append(asyncio.run(live_round(d, a.live, due)))
    return {"store": "sqlite", "live_fanout": a.live, "sweeping": medians(with_sweep),
            "nothing_due": medians(without), "rounds_sweeping": with_sweep, "rounds_nothing_due": without}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--live", type=int, default=0, metavar="N",
                    help="measure a runtime's fan-out of N children with its sweeper at work (SQLite)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        res = bench_live(a, d) if a.live else bench_store(a, d)
    print(json.dumps({"bench": "sweeper", "runs": a.runs, "rounds": a.rounds, **res}))


if __name__ == "__main__":
    main()
