"""Crash benchmark: SIGKILL the crash scenario at N random points and check recovery each time.

    python bench/crash.py [N=300] [--max-delay 0.09]

Prints one line per failing kill point and a summary (kill points, failures, seconds).
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
    failures = 0
    rng = random.Random()
    for i in range(a.n):
        with tempfile.TemporaryDirectory() as d:
            delay = rng.uniform(0.0, a.max_delay)
            store = Path(d) / "state.db"
            completed, _ = test_crash.kill_at(store, delay)
            asyncio.run(crash_scenario.recover(store))
            bad = crash_scenario.check(store, completed)
            if bad:
                failures += 1
                print(f"kill point {i} at {delay * 1000:.1f} ms: {bad}")
    print(f"{a.n} kill points, {failures} failures, {time.perf_counter() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
