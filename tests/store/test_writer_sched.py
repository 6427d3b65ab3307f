"""The writer process yields the CPU to the runtime: ``SCHED_BATCH`` (no preemption when a batch wakes it) and a
lower priority (the runtime's wake-up preempts it at once), for its checkpointer thread too."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from subagents.store._writer_main import WRITER_NICE
from subagents.store.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="scheduling classes are Linux's")


def _sched(pid: int, tid: int) -> tuple[int, int]:
    """(nice, policy) of one thread, from /proc (fields 19 and 41 of its stat line)."""
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[16]), int(fields[38])


def test_writer_threads_run_batch_class_and_niced(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "runs.db")
    try:
        s.renew_lease("o", 1.0, 2.0)
        s.flush()
        pid = s._w.stats()["pid"]
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        assert len(tids) >= 2  # the writer and its checkpointer
        own_nice = os.getpriority(os.PRIO_PROCESS, 0)
        for tid in tids:
            nice, policy = _sched(pid, tid)
            assert policy == os.SCHED_BATCH
            assert nice == min(19, own_nice + WRITER_NICE)
    finally:
        s.close()
