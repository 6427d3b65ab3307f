"""Shared bits of the benchmarks: canned texts, RSS probes, summaries, the store to use.

Every measurement script prints exactly ONE JSON line on stdout, so the driver (``run.py``)
can run each in a fresh process and collect the results.
"""

from __future__ import annotations

import importlib.util
import resource
import statistics
from pathlib import Path
from typing import Any

CHILD_TEXT = "child-done: 42"
PARENT_TEXT = "parent-done: child said 42"
BARE_TEXT = "bare-done"

ROOT = Path(__file__).resolve().parent.parent


def rss_now_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, round(p / 100.0 * (len(xs) - 1))))
    return xs[k]


def summ_us(samples_s: list[float]) -> dict[str, Any]:
    us = [s * 1e6 for s in samples_s]
    tenth = max(1, len(us) // 10)
    return {
        "median_us": statistics.median(us),
        "mean_us": statistics.fmean(us),
        "p10_us": pct(us, 10),
        "p90_us": pct(us, 90),
        "n": len(us),
        "first10pct_median_us": statistics.median(us[:tenth]),
        "last10pct_median_us": statistics.median(us[-tenth:]),
    }


def sqlite_available() -> bool:
    """True once the durable SQLite store (``subagents.store.sqlite``) exists in the tree."""
    try:
        return importlib.util.find_spec("subagents.store.sqlite") is not None
    except (ImportError, ValueError):
        return False


def store_url(kind: str, workdir: str) -> tuple[str, str]:
    """``(url, label)`` for ``--store sqlite|memory``; sqlite falls back to memory (labelled) if absent."""
    if kind == "sqlite":
        if sqlite_available():
            return f"sqlite:///{workdir}/state.db", "sqlite"
        return "memory://", "memory (sqlite store not in tree yet)"
    return "memory://", "memory"
