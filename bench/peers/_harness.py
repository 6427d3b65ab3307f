"""Measurement harness for the peer frameworks (runs in bench/peers/.venv, never imports subagents).

Each peer script defines ``Impl`` with ``name``, ``version``, async ``cycle()``, ``bare()``,
``fanout(n)`` (each returning the final text) and ``counts()``, and calls ``main(Impl)``:

    python bench_x.py seq [--iters 2000] [--warmup 200]   -> cycle / bare medians (µs)
    python bench_x.py fanout N [--warmup-n 10]            -> wall ms, RSS before, peak RSS (MB)

Exactly one JSON line is printed.  The texts are the same as ``bench/_common.py``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time

CHILD_TEXT = "child-done: 42"
PARENT_TEXT = "parent-done: child said 42"
BARE_TEXT = "bare-done"


def rss_now_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _pct(xs, p):
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, round(p / 100.0 * (len(xs) - 1))))]


def _summ(samples):
    us = [s * 1e6 for s in samples]
    return {"median_us": statistics.median(us), "mean_us": statistics.fmean(us),
            "p10_us": _pct(us, 10), "p90_us": _pct(us, 90), "n": len(us)}


async def _seq(impl, iters, warmup):
    for _ in range(warmup):
        assert await impl.cycle() == PARENT_TEXT
        assert await impl.bare() == BARE_TEXT
    pc = time.perf_counter
    before = dict(impl.counts())
    cyc, bare = [], []
    for _ in range(iters):
        t0 = pc()
        out = await impl.cycle()
        cyc.append(pc() - t0)
        assert out == PARENT_TEXT, out
    for _ in range(iters):
        t0 = pc()
        out = await impl.bare()
        bare.append(pc() - t0)
        assert out == BARE_TEXT, out
    assert impl.counts()["child"] - before["child"] == iters
    return cyc, bare


async def _fan(impl, n, warmup_n):
    assert await impl.cycle() == PARENT_TEXT
    assert await impl.fanout(warmup_n) == PARENT_TEXT
    rss0 = rss_now_mb()
    before = impl.counts()["child"]
    t0 = time.perf_counter()
    out = await impl.fanout(n)
    dt = time.perf_counter() - t0
    assert out == PARENT_TEXT, out
    assert impl.counts()["child"] - before == n
    return dt, rss0


def main(make_impl):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("seq")
    s.add_argument("--iters", type=int, default=2000)
    s.add_argument("--warmup", type=int, default=200)
    f = sub.add_parser("fanout")
    f.add_argument("n", type=int)
    f.add_argument("--warmup-n", type=int, default=10)
    a = ap.parse_args()
    impl = make_impl()
    res = {"framework": impl.name, "version": impl.version, "cmd": a.cmd, "python": sys.version.split()[0]}
    if a.cmd == "seq":
        cyc, bare = asyncio.run(_seq(impl, a.iters, a.warmup))
        res["cycle"], res["bare"] = _summ(cyc), _summ(bare)
    else:
        dt, rss0 = asyncio.run(_fan(impl, a.n, a.warmup_n))
        res.update(n=a.n, wall_ms=dt * 1e3, per_child_us=dt / a.n * 1e6, rss_before_mb=rss0,
                   peak_rss_mb=peak_rss_mb())
    res["model_calls"] = impl.counts()
    print(json.dumps(res))
