"""Crash benchmark: SIGKILL the crash scenario at N random points and check recovery each time.

    python bench/crash.py [N=300] [--max-delay 0.13]

Prints one line per failing kill point and a summary: kill points, failures, lost results (a child
that completed but whose result the root never received), re-runs of finished children (a child run
again, or spawned anew, after it had completed) — both must be 0 — and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "store"))

import crash_scenario  # noqa: E402
import test_crash  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="?", default=300)
    ap.add_argument("--max-delay", type=float, default=test_crash.RUN_S)
    a = ap.parse_args()
    t0 = time.perf_counter()
    failures = lost = reruns = 0
    rng = random.Random()
    for i in range(a.n):
        with tempfile.TemporaryDirectory() as d:
            delay = rng.uniform(0.0, a.max_delay)
            store = Path(d) / "state.db"
            completed, _ = test_crash.kill_at(store, delay)
            asyncio.run(crash_scenario.recover(store))
            bad = crash_scenario.check(store, completed)
            n_lost, n_reruns = crash_scenario.tally(store, completed)
            lost += n_lost
            reruns += n_reruns
            if bad:
                failures += 1
                print(f"kill point {i} at {delay * 1000:.1f} ms: {bad}")
    print(f"{a.n} kill points, {failures} failures, {lost} lost results, {reruns} re-runs of finished children, "
          f"{time.perf_counter() - t0:.1f} s")
    return 1 if failures or lost or reruns else 0


if __name__ == "__main__":
    sys.exit(main())
