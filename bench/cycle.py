"""Where a delegation cycle's time goes: µs per cycle, and with ``--profile`` the steps of a cycle with µs each.

    python bench/cycle.py [--store memory|sqlite] [--n 2000] [--listener] [--profile]

A cycle: the parent's model asks for ``spawn_agent`` (foreground), the child's model answers, the parent's
model answers (instant inline ``FunctionModel``).  Without ``--profile``: wall and thread-CPU µs per cycle
(median of 3 runs).  With ``--profile``: one unprofiled run (thread CPU per cycle), then the same run under
cProfile; every function's own time is put in the step of the cycle it belongs to (by module) and the steps
are scaled to the unprofiled CPU time, so the column adds up to a real cycle (the collector's time, ``gc_us``,
is inside the steps: cProfile charges a collection to the function whose allocation started it).  The
profiler inflates small functions more than big ones: read the steps as shares, not as exact costs.
One JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PARENT_TEXT, store_url

from authority import script
from subagents import Runtime
from subagents.models import FunctionModel

# (step, the path fragments of the functions whose own time is that step's), in the order of a cycle;
# "a&b": both; the first match wins, what matches nothing is "other".
STEPS: list[tuple[str, tuple[str, ...]]] = [
    ("listener (the callback itself)", ("bench/cycle.py:",)),
    ("events (build, publish, gates)", ("runtime/events.py", "(emit)", "(commit_point)", "(stats)")),
    ("spawn_agent call + guard", ("tools/", "authority/", "runtime/control.py", "runtime/calls.py")),
    ("factory + assemble (definition, authority, prompt, slot, node)",
     ("runtime/factory.py", "runtime/dormant.py", "runtime/shared.py", "runtime/slots.py", "runtime/node.py",
      "runtime/nicknames.py", "runtime/prompts.py", "definitions/", "runtime/limits.py", "ids.py",
      "manager.py&(spawn)", "manager.py&(assemble)")),
    ("record (recorder + store)", ("runtime/recorder.py", "store/")),
    ("start + task switches (engine, asyncio)", ("engines/", "asyncio/", "{method 'run' of '_contextvars",
                                                  "selectors.py", "{method 'poll'", "{built-in method _asyncio")),
    ("agent loop (turns, messages, limits)", ("runtime/loop.py", "runtime/turns.py", "messages.py",
                                              "runtime/inbox.py", "runtime/result.py", "runtime/status.py")),
    ("model (FunctionModel + the script)", ("models/", "bench/authority.py")),
    ("finish + wake the parent (waiters, retention)", ("runtime/manager.py", "runtime/waiting.py",
                                                       "runtime/retention.py", "runtime/delivery.py",
                                                       "runtime/tree.py", "runtime/runtime.py",
                                                       "runtime/remote.py")),
]


def _step(where: str) -> str:
    for name, frags in STEPS:
        if any(all(part in where for part in f.split("&")) for f in frags):
            return name
    return "other (builtins: dict, list, time, ...)"


heard = [0]
gc_s = [0.0, 0.0]  # time in collections while measuring, start of the current one


def _gc_clock(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        gc_s[1] = time.perf_counter()
    else:
        gc_s[0] += time.perf_counter() - gc_s[1]


def listener(ev: object) -> None:
    heard[0] += 1


async def cycles(store: str, n: int, workdir: str, listen: bool, prof: cProfile.Profile | None
                 ) -> tuple[float, float, float]:
    """Wall, thread-CPU and garbage-collector µs per cycle over ``n`` cycles (after 200 to warm up)."""
    async with Runtime(FunctionModel(script, inline=True), workdir=workdir, store=store, builtin_tools=False,
                       on_event=listener if listen else None) as rt:
        for _ in range(200):
            await rt.run("hi")
        gc_s[0] = 0.0
        gc.callbacks.append(_gc_clock)
        c0, t0 = time.thread_time(), time.perf_counter()
        if prof is not None:
            prof.enable()
        for _ in range(n):
            r = await rt.run("hi")
            assert r.text == PARENT_TEXT, r.text
        if prof is not None:
            prof.disable()
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        gc.callbacks.remove(_gc_clock)
        await rt.events_delivered()
    return wall / n * 1e6, cpu / n * 1e6, gc_s[0] / n * 1e6


def steps(prof: cProfile.Profile, cpu_us: float, n: int) -> dict[str, float]:
    """The profile's own times grouped by step, scaled so they add up to ``cpu_us``."""
    raw: dict[str, float] = {}
    st: Any = pstats.Stats(prof)
    for (path, line, func), (_cc, _nc, tt, _ct, _callers) in st.stats.items():
        where = f"{path}:{line}({func})" if path != "~" else func
        raw[_step(where)] = raw.get(_step(where), 0.0) + tt
    total = sum(raw.values()) or 1.0
    return {k: round(v / total * cpu_us, 1) for k, v in sorted(raw.items(), key=lambda kv: -kv[1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="memory", choices=["memory", "sqlite"])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--listener", action="store_true", help="one on_event callback (counts the events)")
    ap.add_argument("--profile", action="store_true", help="the steps of a cycle with µs each (cProfile)")
    a = ap.parse_args()
    res: dict[str, Any] = {"bench": "cycle", "store": a.store, "listener": a.listener, "n": a.n}
    with tempfile.TemporaryDirectory() as d:
        url, res["store"] = store_url(a.store, d)
        runs = [asyncio.run(cycles(url, a.n, d, a.listener, None)) for _ in range(1 if a.profile else 3)]
        res["wall_us"] = round(statistics.median(r[0] for r in runs), 1)
        res["cpu_us"] = round(statistics.median(r[1] for r in runs), 1)
        res["gc_us"] = round(statistics.median(r[2] for r in runs), 1)  # (part of wall and CPU)
        if a.profile:
            prof = cProfile.Profile()
            asyncio.run(cycles(url, a.n, d, a.listener, prof))
            res["steps_cpu_us"] = steps(prof, res["cpu_us"], a.n)
    if a.listener:
        res["events_per_cycle"] = round(heard[0] / ((200 + a.n) * (2 if a.profile else 3)), 1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
