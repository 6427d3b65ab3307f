"""The crash test on PostgreSQL: SIGKILL a process running a tree of background agents on a PostgreSQL store
at random points, reopen the database in a fresh Runtime (restore: the dead process's runs are orphaned at
once, by its process identity), let everything finish and check every guarantee of
:func:`crash_scenario.check` — as ``test_crash.py`` does on SQLite.  A killed process's connections drop;
the server rolls back the transaction it was committing, so what it had reported committed must be there."""

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

import pg

sys.path.insert(0, str(Path(__file__).parent))
import crash_scenario

SCENARIO = Path(__file__).parent / "crash_scenario.py"
RUN_S = 0.3  # a whole scenario takes about this long after READY on PostgreSQL (0.26-0.47 s measured, with close)


def kill_at(url: str, workdir: Path, delay: float) -> set[str]:
    """Run the scenario on ``url`` and SIGKILL it ``delay`` s after READY; the children it reported completed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(SCENARIO), "run", url, str(workdir)], stdout=subprocess.PIPE,
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
    return {ln.split()[1] for ln in out.splitlines() if ln.startswith("COMPLETED ")}


def test_crash_at_12_random_points_on_postgres(pg_server: pg.PgServer, tmp_path: Path) -> None:
    rng = random.Random(int(time.time()))
    failures: dict[str, list[str]] = {}
    completed_any = 0
    for i in range(12):
        delay = rng.uniform(0.0, RUN_S)
        url = pg_server.new_database()
        workdir = tmp_path / f"k{i}"
        workdir.mkdir()
        try:
            completed = kill_at(url, workdir, delay)
            completed_any += bool(completed)
            asyncio.run(crash_scenario.recover(url, workdir))
            bad = crash_scenario.check(url, completed)
        finally:
            pg_server.drop_database(url)
        if bad:
            failures[f"kill at {delay * 1000:.1f} ms"] = bad
    assert failures == {}
    assert completed_any > 0  # some kills came after children had completed (else the check proves little)


@pytest.mark.slow
def test_a_whole_run_on_postgres_passes_the_check(pg_url: str, tmp_path: Path) -> None:
    completed = kill_at(pg_url, tmp_path, 3.0)  # killed long after it finished
    asyncio.run(crash_scenario.recover(pg_url, tmp_path))
    assert crash_scenario.check(pg_url, completed) == []
    assert len(completed) == crash_scenario.JOBS + 1
