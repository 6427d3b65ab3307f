"""Python opcodes per delegation cycle or per fan-out child, by function: a cost map the box's noise cannot move.

    python bench/opcodes.py cycle  [--store memory|sqlite] [--n 200] [--top 40] [--listener]
    python bench/opcodes.py fanout [--store memory|sqlite] [--n 400] [--top 40] [--threads M]

Timings on this project's machines move by 20-40% between runs of the same code minutes apart (see
docs/benchmarks.md), so a change worth 3-5% cannot be seen in them without dozens of alternated runs.  This
counts the bytecode instructions the interpreter executes instead (``sys.settrace`` with
``f_trace_opcodes``), per function, over two sizes of the same workload — ``n // 4`` and ``n`` cycles, or
children — and prints the difference divided by the difference in size: what one more cycle or child costs,
without the start-up both share.  Two runs of the same code agree to within a few opcodes in ten thousand —
except with the SQLite store *and* a listener, where how many batches a cycle takes (and so how many commit
callbacks and event bursts) depends on the writer process's pace: there runs differ by up to ~5%; compare
medians of a few runs.

What it does not see: time in C (builtins, the garbage collector, system calls, cache misses — in a large
fan-out everything costs about twice its micro-benchmark), and the SQLite writer process's work.  Read it as
"how much Python runs", next to the timed benchmarks, not instead of them: a Python loop replaced by C calls
counts fewer opcodes and can still be slower (a record's 12 fields merged with ``dict(zip(...)).update()``
instead of a loop: 283 opcodes fewer per cycle, 2.5 -> 4.2 µs per run under ``timeit``; not kept).
Dataclass ``__init__`` methods (generated, file ``<string>``) are named by their class.  Tracing makes the
run ~30x slower.  ``--threads M``: a fan-out whose children run M at a time, the others queued (the
100,000-children row of bench/run.py): its queue costs ~5% more Python per child than room for all.

The workloads are the timed ones: ``cycle`` is :mod:`cycle`'s (a foreground child per parent run), ``fanout``
is :mod:`ours`'s (one parent turn spawns ``n`` background children, then waits for them).
One JSON line: ``{"opcodes": per unit, "top": [[opcodes, share, "where"], ...], ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ours
from _common import PARENT_TEXT, store_url

from authority import script
from subagents import Runtime
from subagents.models import FunctionModel

Key = tuple[str, int, str]
Tracer = Callable[[FrameType, str, Any], Any]


def counting(cnt: collections.Counter[Key]) -> Tracer:
    """A ``sys.settrace`` function that adds one to ``cnt[function]`` per opcode executed in it."""

    def on_call(frame: FrameType, event: str, arg: Any) -> Tracer | None:
        if event != "call":
            return None
        co = frame.f_code
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        if co.co_filename == "<string>":  # generated code: a dataclass's method is named by its class
            owner = frame.f_locals.get("self")
            key = (f"<{type(owner).__name__}>" if owner is not None else "<generated>", co.co_firstlineno, co.co_name)
        else:
            key = (co.co_filename, co.co_firstlineno, co.co_name)

        def local(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == "opcode":
                cnt[key] += 1
            return local

        return local

    return on_call


async def traced(cnt: collections.Counter[Key], work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work()`` with every opcode of this thread counted into ``cnt``."""
    sys.settrace(counting(cnt))
    try:
        await work()
    finally:
        sys.settrace(None)


async def cycle_run(store: str, n: int, listen: bool) -> collections.Counter[Key]:
    """Opcodes of ``n`` delegation cycles (after 50 untraced ones)."""
    cnt: collections.Counter[Key] = collections.Counter()
    with tempfile.TemporaryDirectory() as d:
        async with Runtime(FunctionModel(script, inline=True), workdir=d, store=store_url(store, d)[0],
                           builtin_tools=False, on_event=(lambda e: None) if listen else None) as rt:
            for _ in range(50):
                await rt.run("hi")

            async def work() -> None:
                for _ in range(n):
                    r = await rt.run("hi")
                    assert r.text == PARENT_TEXT, r.text

            await traced(cnt, work)
    return cnt


async def fanout_run(store: str, n: int, threads: int | None = None) -> collections.Counter[Key]:
    """Opcodes of one parent run that spawns ``n`` background children and waits for them (after one of 10);
    ``threads``: that many at a time, the others queued (``when_full="queue"``)."""
    cnt: collections.Counter[Key] = collections.Counter()
    s = ours.Script()
    with tempfile.TemporaryDirectory() as d:
        async with ours.make_runtime(FunctionModel(s, inline=True), d, store_url(store, d)[0],
                                     max_threads=threads or n + 16, when_full="queue") as rt:
            s.n = 10
            assert (await rt.run("fanout")).text == PARENT_TEXT
            s.n = n

            async def work() -> None:
                r = await rt.run("fanout")
                assert r.text == PARENT_TEXT, (r.outcome, r.error, r.text)

            await traced(cnt, work)
    assert s.calls["child"] == 10 + n
    return cnt


def where(key: Key) -> str:
    path, line, name = key
    for cut in ("/src/", "/lib/python3", "/bench/"):
        if cut in path:
            path = path.split(cut, 1)[1]
            break
    return f"{path}:{line}({name})"


def per_unit(small: collections.Counter[Key], big: collections.Counter[Key], units: int, top: int
             ) -> dict[str, Any]:
    """What one more cycle or child adds: ``(big - small) / units``, by function, the largest first."""
    diff = {k: (big[k] - small.get(k, 0)) / units for k in big.keys() | small.keys()}
    total = sum(diff.values())
    ranked = sorted(diff.items(), key=lambda kv: -kv[1])[:top]
    return {"opcodes": round(total, 1),
            "top": [[round(v, 1), round(v / total, 4) if total else 0.0, where(k)] for k, v in ranked]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("workload", choices=["cycle", "fanout"])
    ap.add_argument("--store", choices=["memory", "sqlite"], default="sqlite")
    ap.add_argument("--n", type=int, default=None, help="cycles (default 200) or children (default 400)")
    ap.add_argument("--top", type=int, default=40, help="how many functions to list")
    ap.add_argument("--listener", action="store_true", help="cycle: with one on_event callback")
    ap.add_argument("--threads", type=int, default=None,
                    help="fanout: children running at a time (max_threads), the others queued; default all")
    a = ap.parse_args(argv)
    n = a.n if a.n is not None else (200 if a.workload == "cycle" else 400)
    if n < 4:
        ap.error("--n must be at least 4 (it is measured at n // 4 and at n)")
    if a.threads is not None and a.threads < 1:
        ap.error("--threads must be at least 1")
    small = max(1, n // 4)

    def run(k: int) -> collections.Counter[Key]:
        if a.workload == "cycle":
            return asyncio.run(cycle_run(a.store, k, a.listener))
        return asyncio.run(fanout_run(a.store, k, a.threads))

    res = per_unit(run(small), run(n), n - small, a.top)
    out = {"bench": "opcodes", "workload": a.workload, "store": a.store, "listener": a.listener, "threads": a.threads,
           "per": "cycle" if a.workload == "cycle" else "child", "sizes": [small, n], **res}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
