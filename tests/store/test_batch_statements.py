"""The SQLite writer runs a batch with a number of statement executions that does not grow with the batch.

Each execution is a trip out of the Python interpreter and back: the writer thread releases the GIL for it
and must take it back from the event loop (up to a switch interval, 5 ms, when the loop is busy).  So a
batch of many announcements, deliveries or deletes must go in a few multi-row statements, not one
``executemany`` step per row.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from subagents.store import AnnouncementRecord, RunRecord, _writer
from subagents.store.sqlite import SQLiteStore


def _rec(run_id: str, parent: str | None = None) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t",
                     parent_id=parent, system_prompt=f"prompt of {run_id[:3]}")


def _executions(monkeypatch: Any) -> list[str]:
    """Every statement execution the writer asks SQLite for, one per trip out of the interpreter
    (``executemany`` counts once per row; what triggers do inside SQLite is not a trip)."""
    seen: list[str] = []
    real = _writer.Writer._commit

    def counted(self: _writer.Writer, calls: list[Any]) -> None:
        if calls:
            seen.append("BEGIN")
            for sql, params, many in calls:
                seen.extend([sql] * (len(params) if many else 1))
            seen.append("COMMIT")
        real(self, calls)

    monkeypatch.setattr(_writer.Writer, "_commit", counted)
    return seen


def _batch(s: SQLiteStore, n: int, tag: str) -> None:
    """``n`` children of one parent finish with announcements that are then delivered, all in one batch each."""
    parent = f"{tag}-parent"
    s.create_run(_rec(parent))
    for i in range(n):
        s.create_run(_rec(f"{tag}-{i:05d}", parent))
    s.flush()
    for i in range(n):
        cid = f"{tag}-{i:05d}"
        s.finish_run(cid, {"status": "completed", "ended_at": 1.0 + i, "result_text": "ok"},
                      AnnouncementRecord(f"{cid}:1", parent, cid, f"result {i}", 2.0 + i))
    s.flush()
    for i in range(n):
        s.mark_delivered(f"{tag}-{i:05d}:1", 3.0 + i)
    s.flush()
    for i in range(n):
        s.delete_run(f"{tag}-{i:05d}")
    s.flush()


async def test_statement_executions_do_not_grow_with_the_batch(tmp_path: Path, monkeypatch: Any) -> None:
    seen = _executions(monkeypatch)
    # in an event loop, with room for it all in the backlog: one batch per flush
    s = SQLiteStore(tmp_path / "state.db", linger_s=10.0, max_backlog=100_000)
    try:
        _batch(s, 10, "small")
        small = len(seen)
        seen.clear()
        _batch(s, 400, "large")
        large = len(seen)
        assert large <= small + 4, (small, large, seen[:20])
        conn = sqlite3.connect(tmp_path / "state.db")
        try:  # and the batch did what it says: the children are gone with their delivered announcements
            assert conn.execute("SELECT count(*) FROM runs").fetchone() == (2,)
            assert conn.execute("SELECT count(*) FROM announcements").fetchone() == (0,)
            # each deleted child gave back its use of the prompt it shares with its parent (which keeps one)
            assert conn.execute("SELECT text, refs FROM prompts ORDER BY text").fetchall() == [
                ("prompt of lar", 1), ("prompt of sma", 1)]
        finally:
            conn.close()
    finally:
        s.close()


async def test_a_long_step_of_the_event_loop_keeps_the_writer_fed(tmp_path: Path) -> None:
    """A burst of writes in one step of the event loop (a parent spawning many children in one turn) is
    handed to the idle writer as it grows, not only when the loop gets to the batching delay's timer."""
    db = tmp_path / "state.db"
    s = SQLiteStore(db, linger_s=0.002, max_backlog=400)
    try:
        for i in range(150):  # under the backlog bound: nothing blocks, the loop never yields
            s.create_run(_rec(f"burst-{i:04d}"))
        deadline = time.monotonic() + 5
        committed = 0
        while committed == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # noqa: ASYNC251 (on purpose: the loop stays in this step, its timer cannot run)
            conn = sqlite3.connect(db)
            try:
                committed = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            finally:
                conn.close()
        assert committed >= 50, committed
        s.flush()
        assert len(s.list_runs()) == 150
    finally:
        s.close()
