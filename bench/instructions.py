"""Machine instructions per delegation cycle or per fan-out child — C included — next to the plain-asyncio floor's.

    python bench/instructions.py cycle  [--store memory|sqlite] [--listener] [--n 400] [--top 25]
    python bench/instructions.py fanout [--store memory|sqlite] [--n 2000] [--top 25]

The timed benchmarks move by 20-40% between runs minutes apart on this project's machines, and
:mod:`opcodes` counts only Python's bytecode (not the C under it: dicts, frames, allocation, the
collector).  This runs each workload under valgrind's ``cachegrind`` (``--cache-sim=no``: instructions
only, ~50x slower) at two sizes — ``n // 4`` and ``n`` — and divides the difference by the difference in
size: the instructions one more cycle (or child) executes, without the start-up both share.  The plain-asyncio
floor of the timed benchmarks (:func:`authority.floor_cycle`, :func:`ours._fanout_floor`) is counted the
same way, so ``x_floor`` is issue 13's "x the floor" ratio in instructions: what the box's noise cannot move.
Two runs of the same code agree to within ~0.1% with the memory store; with the SQLite store and a listener,
how many batches (so commit callbacks and event bursts) a cycle takes depends on the writer process's pace:
runs differ by up to ~5-9% there — compare medians of three.

What it does not count: the SQLite store's writer process (not traced: see ``store_writer.py``), system
calls' time in the kernel, and cache misses — a memory-slow machine pays more per instruction in a large
fan-out than in a cycle.  Needs ``valgrind`` (Debian: ``apt-get install valgrind``).
One JSON line: ``{"instructions": per unit, "floor_instructions": ..., "x_floor": ..., "top": [[n, share,
"C function"], ...]}`` (``_PyEval_EvalFrameDefault`` is the interpreter running Python code).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ours
from _common import PARENT_TEXT, store_url

from authority import floor_cycle
from subagents.models import FunctionModel


# -- the workloads, run in the process valgrind watches ----------------------------------------------
async def _cycles(store: str, k: int, listen: bool) -> None:
    import cycle  # (its listener and warm-up: the timed benchmark's)

    with tempfile.TemporaryDirectory() as d:
        await cycle.cycles(store_url(store, d)[0], k, d, listen, None)


async def _cycle_floor(k: int) -> None:
    for _ in range(k):
        assert await floor_cycle() == PARENT_TEXT


async def _fanout(store: str, k: int) -> None:
    s = ours.Script()
    with tempfile.TemporaryDirectory() as d:
        async with ours.make_runtime(FunctionModel(s, inline=True), d, store_url(store, d)[0], max_threads=k + 16,
                                     when_full="refuse") as rt:
            s.n = 10
            assert (await rt.run("fanout")).text == PARENT_TEXT
            s.n = k
            r = await rt.run("fanout")
            assert r.text == PARENT_TEXT, (r.outcome, r.error, r.text)
    assert s.calls["child"] == 10 + k


def _child(what: str, k: int, store: str, listen: bool) -> None:
    if what == "cycle":
        asyncio.run(_cycles(store, k, listen))
    elif what == "cycle-floor":
        asyncio.run(_cycle_floor(k))
    elif what == "fanout":
        asyncio.run(_fanout(store, k))
    else:
        asyncio.run(ours._fanout_floor(k, k + 16))


# -- counting ------------------------------------------------------------------------------------
def read_counts(path: str) -> collections.Counter[str]:
    """Instructions by C function from a cachegrind output file (``fn=`` lines, then ``line count`` lines)."""
    out: collections.Counter[str] = collections.Counter()
    fn = "?"
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                fn = line[3:].strip()
            elif line[:1].isdigit():
                parts = line.split()
                if len(parts) >= 2:
                    out[fn] += int(parts[1])
    return out


def count(what: str, k: int, store: str, listen: bool) -> collections.Counter[str]:
    """Run workload ``what`` of size ``k`` under cachegrind; its instructions by function."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}", sys.executable,
               __file__, "--child", what, str(k), store, "1" if listen else "0"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(out):
            raise SystemExit(f"instructions.py: {what} under valgrind failed (exit {p.returncode}):\n"
                             f"{p.stderr[-2000:]}")
        return read_counts(out)


def per_unit(small: collections.Counter[str], big: collections.Counter[str], units: int) -> dict[str, float]:
    return {k: (big[k] - small.get(k, 0)) / units for k in big.keys() | small.keys()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("workload", choices=["cycle", "fanout"])
    ap.add_argument("--store", choices=["memory", "sqlite"], default="sqlite")
    ap.add_argument("--n", type=int, default=None, help="cycles (default 400) or children (default 2000)")
    ap.add_argument("--top", type=int, default=25, help="how many C functions to list")
    ap.add_argument("--listener", action="store_true", help="cycle: with one on_event callback")
    a = ap.parse_args(argv)
    n = a.n if a.n is not None else (400 if a.workload == "cycle" else 2000)
    if n < 4:
        ap.error("--n must be at least 4 (it is measured at n // 4 and at n)")
    if a.listener and a.workload != "cycle":
        ap.error("--listener applies to the cycle workload only")
    if shutil.which("valgrind") is None:
        ap.error("valgrind is not installed (Debian: apt-get install valgrind); it counts the instructions")
    small = n // 4
    floor_what = "cycle-floor" if a.workload == "cycle" else "fanout-floor"
    floor_n = n * 4 if a.workload == "cycle" else n  # (a floor cycle is ~10x shorter: more of them, same noise)
    ours_ = per_unit(count(a.workload, small, a.store, a.listener), count(a.workload, n, a.store, a.listener),
                     n - small)
    floor = per_unit(count(floor_what, floor_n // 4, a.store, False), count(floor_what, floor_n, a.store, False),
                     floor_n - floor_n // 4)
    total, floor_total = sum(ours_.values()), sum(floor.values())
    ranked = sorted(ours_.items(), key=lambda kv: -kv[1])[:a.top]
    out = {"bench": "instructions", "workload": a.workload, "store": a.store, "listener": a.listener,
           "per": "cycle" if a.workload == "cycle" else "child", "sizes": [small, n],
           "instructions": round(total), "floor_instructions": round(floor_total),
           "x_floor": round(total / floor_total, 2) if floor_total > 0 else None,
           "top": [[round(v), round(v / total, 4) if total else 0.0, k] for k, v in ranked]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1")
    else:
        main()
