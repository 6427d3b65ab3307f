"""The delegation cycle watched and unwatched, in memory and on SQLite, next to the plain-asyncio floor.

    python bench/watched.py [--iters 2000] [--rounds 5]

A cycle: the parent's model asks for ``spawn_agent`` (foreground), the child's model answers, the
parent's model answers (instant inline ``FunctionModel``).  Variants, in interleaved rounds in one
process so they share the machine's noise:

- ``floor``: the same workload as a ~20-line plain-asyncio loop (no framework), measured right before
  each other variant in every round, ``--floor-factor`` times as many cycles (default 10): a floor
  cycle is ~10x shorter, so the floor is sampled over about as much wall time as each variant, next to
  it.  (Sampled once per round for ~1/10 of a variant's time, one slow moment of the machine moved the
  ratios by 20-40% between runs of the same code.)
- ``memory`` / ``sqlite``: the runtime with that store, nobody listening;
- ``memory+listener`` / ``sqlite+listener``: the same with one ``on_event`` callback (every event
  of the run reaches it; events that announce a status wait for the store's commit, the run does not).

For each: median and mean µs per cycle, the mean as a multiple of the floor's mean (issue 13's goal:
<= 10x), and the share of the time spent in the garbage collector (``gc.callbacks``); and, for the memory
variants, ``paired``: the variant measured once more with a floor cycle right before each of its cycles
(:func:`measure_paired`: the floor in the CPU state the runtime's cycle runs in), that floor's mean and the
ratio.  One JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PARENT_TEXT, store_url

from authority import floor_cycle, script
from subagents import Runtime
from subagents.models import FunctionModel

VARIANTS = ["floor", "memory", "sqlite", "memory+listener", "sqlite+listener"]


class GcClock:
    """Time spent in collections while :attr:`on` (``gc.callbacks`` start/stop pairs)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.on = False
        self._t0 = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self.on:
            self.total += time.perf_counter() - self._t0


async def measure(variant: str, n: int, workdir: str, gcc: GcClock) -> list[float]:
    out: list[float] = []
    if variant == "floor":
        gcc.on = True
        for _ in range(n):
            t0 = time.perf_counter()
            assert await floor_cycle() == PARENT_TEXT
            out.append(time.perf_counter() - t0)
        gcc.on = False
        return out
    store, _ = store_url("sqlite" if variant.startswith("sqlite") else "memory", workdir)
    seen: list[int] = [0]

    def listener(ev: object) -> None:
        seen[0] += 1

    async with Runtime(FunctionModel(script, inline=True), workdir=workdir, store=store, builtin_tools=False,
                       on_event=listener if variant.endswith("+listener") else None) as rt:
        gcc.on = True
        for _ in range(n):
            t0 = time.perf_counter()
            r = await rt.run("hi")
            out.append(time.perf_counter() - t0)
            assert r.text == PARENT_TEXT, r.text
        gcc.on = False
        await rt.events_delivered()
    assert not variant.endswith("+listener") or seen[0] >= n * 6, seen  # the listener did hear every run
    return out


async def measure_paired(variant: str, n: int, workdir: str) -> tuple[list[float], list[float]]:
    """``n`` runtime cycles of ``variant``, each right after one floor cycle: (floor samples, variant samples).

    The floor measured in a block runs its ~120,000 instructions again and again with the CPU's caches and branch
    predictors trained on it alone; alternated 1:1 with the runtime's cycle it runs in the state the runtime's cycle
    runs in (on the box of the nineteenth session: 10.5 µs in a block, 16.5 µs alternated, 13.7 µs after ~480 µs of
    plain ``json``/``re`` work that schedules nothing; the runtime's cycle the same either way).  Only the memory
    variants: with the SQLite store the writer's callbacks run inside the floor's awaits and would be charged to it.
    Reported next to the block floor, which stays issue 13's yardstick."""
    store, _ = store_url("sqlite" if variant.startswith("sqlite") else "memory", workdir)
    floor: list[float] = []
    out: list[float] = []
    async with Runtime(FunctionModel(script, inline=True), workdir=workdir, store=store, builtin_tools=False,
                       on_event=(lambda ev: None) if variant.endswith("+listener") else None) as rt:
        for _ in range(n):
            t0 = time.perf_counter()
            assert await floor_cycle() == PARENT_TEXT
            t1 = time.perf_counter()
            r = await rt.run("hi")
            out.append(time.perf_counter() - t1)
            floor.append(t1 - t0)
            assert r.text == PARENT_TEXT, r.text
        await rt.events_delivered()
    return floor, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset (floor always runs)")
    ap.add_argument("--floor-factor", type=int, default=10,
                    help="floor cycles measured before each variant, per variant cycle (default 10)")
    a = ap.parse_args()
    variants = ["floor", *[v for v in a.variants.split(",") if v in VARIANTS and v != "floor"]]
    samples: dict[str, list[float]] = {v: [] for v in variants}
    paired: dict[str, tuple[list[float], list[float]]] = {v: ([], []) for v in variants if v.startswith("memory")}
    gc_s: dict[str, float] = {v: 0.0 for v in variants}
    per = max(1, a.iters // a.rounds)
    with tempfile.TemporaryDirectory() as d:
        gcc = GcClock()
        for v in variants:  # warm-up
            asyncio.run(measure(v, 100, d, gcc))
        for _ in range(a.rounds):
            for v in variants[1:] or [None]:
                for w, n in (("floor", per * max(1, a.floor_factor)), (v, per)):
                    if w is not None:
                        gcc.total = 0.0
                        samples[w] += asyncio.run(measure(w, n, d, gcc))
                        gc_s[w] += gcc.total
                if v in paired:
                    fl, vs = asyncio.run(measure_paired(v, per, d))
                    paired[v][0].extend(fl)
                    paired[v][1].extend(vs)
    res: dict[str, Any] = {"bench": "watched", "n": per * a.rounds, "floor_n": len(samples["floor"])}
    for v in variants:
        us = [x * 1e6 for x in samples[v]]
        res[v] = {"median_us": round(statistics.median(us), 1), "mean_us": round(statistics.fmean(us), 1),
                  "gc_share": round(gc_s[v] / sum(samples[v]), 3)}
    for v in variants[1:]:
        res[v]["x_floor_mean"] = round(res[v]["mean_us"] / res["floor"]["mean_us"], 2)
    for v, (fls, vss) in paired.items():
        fl, vs = statistics.fmean(fls) * 1e6, statistics.fmean(vss) * 1e6
        res[v]["paired"] = {"floor_mean_us": round(fl, 1), "mean_us": round(vs, 1), "x_floor_mean": round(vs / fl, 2)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
