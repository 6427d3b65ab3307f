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
<= 10x), and the share of the time spent in the garbage collector (``gc.callbacks``).  One JSON line.
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
    res: dict[str, Any] = {"bench": "watched", "n": per * a.rounds, "floor_n": len(samples["floor"])}
    for v in variants:
        us = [x * 1e6 for x in samples[v]]
        res[v] = {"median_us": round(statistics.median(us), 1), "mean_us": round(statistics.fmean(us), 1),
                  "gc_share": round(gc_s[v] / sum(samples[v]), 3)}
    for v in variants[1:]:
        res[v]["x_floor_mean"] = round(res[v]["mean_us"] / res["floor"]["mean_us"], 2)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
