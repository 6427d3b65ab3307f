"""Item 2: under sustained load the SQLite writer's backlog is bounded, so a SIGKILL loses at most the
documented number of finished runs (````MAX_BACKLOG`` store operations, see docs/durability.md).

A subprocess starts many short FunctionModel runs at once and prints ``FINISHED <n>`` as each one
returns; right after the ``KILL_AFTER``-th returned it SIGKILLs itself (a kill from the test would
land late: the pipe holds thousands of lines).  The test reopens the store and counts the completed
records: lost = finished - recorded.  ``python tests/faults/test_store_backlog.py run STORE`` runs the load.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.models import FunctionModel
from subagents.store import sqlite as sqlite_store

RUNS = 5_000
AT_ONCE = 5000
KILL_AFTER = 3_000
DOC = Path(__file__).resolve().parents[2] / "docs" / "durability.md"


async def _load(store_path: Path) -> None:
    rt = Runtime(model=FunctionModel(lambda req: "done"), workdir=store_path.parent, store=f"sqlite:///{store_path}",
                 builtin_tools=False)
    finished = 0

    async def one(i: int) -> None:
        nonlocal finished
        r = await rt.run(f"task {i}")
        assert r.text == "done"
        finished += 1
        print(f"FINISHED {finished}", flush=True)
        if finished == KILL_AFTER:
            os.kill(os.getpid(), signal.SIGKILL)

    print("READY", flush=True)
    for start in range(0, RUNS, AT_ONCE):
        await asyncio.gather(*(one(i) for i in range(start, min(start + AT_ONCE, RUNS))))
    await rt.aclose()


def _completed(store_path: Path) -> int:
    s = sqlite_store.SQLiteStore(store_path)
    try:
        return len(s.list_runs(include_archived=True, status="completed"))
    finally:
        s.close()


@pytest.mark.timeout(60)
def test_a_sigkill_under_load_loses_at_most_the_documented_bound(tmp_path: Path) -> None:
    store_path = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, __file__, "run", str(store_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=50)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    elapsed = time.monotonic() - t0
    assert proc.returncode == -signal.SIGKILL, err
    finished = max((int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("FINISHED ")), default=0)
    assert finished >= KILL_AFTER, f"the load stopped after {finished} runs"
    recorded = _completed(store_path)
    lost = finished - recorded
    bound = sqlite_store.MAX_BACKLOG
    print(f"finished {finished} in {elapsed:.2f} s, recorded {recorded}, lost {lost} (bound {bound})")
    assert lost <= sqlite_store.MAX_BACKLOG


def test_the_doc_states_the_bound() -> None:
    text = DOC.read_text()
    m = re.search(r"a SIGKILL\s+loses\s+at\s+most\s+\*\*([\d,]+)\s+store\s+operations\*\*", text)
    assert m is not None, "docs/durability.md must state the loss bound"
    assert int(m.group(1).replace(",", "")) == sqlite_store.MAX_BACKLOG


if __name__ == "__main__":
    if sys.argv[1] == "run":
        asyncio.run(_load(Path(sys.argv[2])))
