"""The crash test: SIGKILL a process running a tree of background agents at random points, then recover.

Each kill point runs ``crash_scenario.py run`` in a subprocess, kills it ``delay`` seconds after it
said READY (delays spread over the whole run), reopens the store in a fresh Runtime and checks every
guarantee (:func:`crash_scenario.check`).  The default suite uses 32 kill points; the ``slow`` variant
200; ``python bench/crash.py N`` runs N.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import crash_scenario

SCENARIO = Path(__file__).parent / "crash_scenario.py"
RUN_S = 0.13  # a whole scenario takes about this long after READY on a quiet machine


def kill_at(store_path: Path, delay: float) -> tuple[set[str], bool]:
    """Run the scenario and SIGKILL it ``delay`` s after READY; (children it reported completed, finished first)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(SCENARIO), "run", str(store_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line == "READY\n", (line, proc.stderr.read() if proc.stderr else "")
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    finished = proc.returncode == 0
    return {ln.split()[1] for ln in out.splitlines() if ln.startswith("COMPLETED ")}, finished


def crash_and_recover(tmp: Path, delay: float) -> list[str]:
    store_path = tmp / "state.db"
    completed, _ = kill_at(store_path, delay)
    asyncio.run(crash_scenario.recover(store_path))
    return crash_scenario.check(store_path, completed)


def delays(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.0, RUN_S) for _ in range(n)]


def run_kill_points(tmp_path: Path, n: int, seed: int) -> None:
    failures = {}
    for i, d in enumerate(delays(n, seed)):
        tmp = tmp_path / f"k{i}"
        tmp.mkdir()
        bad = crash_and_recover(tmp, d)
        if bad:
            failures[f"kill at {d * 1000:.1f} ms"] = bad
    assert failures == {}


def test_crash_at_32_random_points(tmp_path: Path) -> None:
    run_kill_points(tmp_path, 32, seed=int(time.time()))


@pytest.mark.slow
def test_crash_at_200_random_points(tmp_path: Path) -> None:
    run_kill_points(tmp_path, 200, seed=int(time.time()) + 1)
