"""WAL checkpoints run off the writer thread, and the WAL stays bounded while writes go on."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str, task: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task=task)


def wal_size(db: Path) -> int:
    try:
        return os.path.getsize(f"{db}-wal")
    except FileNotFoundError:
        return 0


def test_the_writer_never_checkpoints_itself(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    try:
        assert s._w.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert s._ckpt.thread.is_alive()
    finally:
        s.close()
    assert not s._ckpt.thread.is_alive()


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_wal_past_its_bound_is_started_over_by_the_writer(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db, checkpoint_s=3600, max_wal_pages=64)  # checkpoints only when kicked; bound ~256 KB
    big = "x" * 20_000  # distinct tasks: ~20 KB of new pages per run
    try:
        for i in range(50):  # ~1 MB
            s.create_run(rec(f"a{i}", f"{i}:{big}"))
        s.flush()
        grown = wal_size(db)
        assert grown > 1_000_000
        s._ckpt.kick()  # a passive checkpoint sees the WAL past its bound ...
        wait_for(lambda: s._ckpt.checkpoints == 1)
        assert s._ckpt.restart_due
        s.create_run(rec("b", "t"))  # ... and the writer restarts it after its next commit
        s.flush()
        assert not s._ckpt.restart_due
        for i in range(25):  # ~0.5 MB more: written from the start of the WAL, the file does not grow
            s.create_run(rec(f"c{i}", f"{i}:{big}"))
        s.flush()
        assert wal_size(db) == grown
    finally:
        s.close()
    assert wal_size(db) == 0  # TRUNCATE at close
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 76
    finally:
        conn.close()


def test_without_restarts_the_same_writes_grow_the_wal(tmp_path: Path) -> None:
    """The control for the test above: with no checkpoint, the WAL grows with every write."""
    db = tmp_path / "state.db"
    s = SQLiteStore(db, checkpoint_s=3600)
    big = "x" * 20_000
    try:
        for i in range(50):
            s.create_run(rec(f"a{i}", f"{i}:{big}"))
        s.flush()
        grown = wal_size(db)
        for i in range(25):
            s.create_run(rec(f"c{i}", f"{i}:{big}"))
        s.flush()
        assert wal_size(db) > grown + 400_000
    finally:
        s.close()


def test_committed_writes_survive_without_a_checkpoint(tmp_path: Path) -> None:
    """Durability does not wait for the checkpointer: a reader sees the commit while it is only in the WAL."""
    db = tmp_path / "state.db"
    s = SQLiteStore(db, checkpoint_s=3600)
    try:
        s.create_run(rec("a", "t"))
        s.flush()
        assert s._ckpt.checkpoints == 0
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("SELECT run_id FROM runs").fetchall() == [("a",)]
        finally:
            conn.close()
    finally:
        s.close()
