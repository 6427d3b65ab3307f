"""The checkpointer's catch-up (store/_checkpoint.py): past ``max_wal_pages`` it runs passive checkpoints one
after the other until one copies little, and only then asks the writer for its ``RESTART`` — so the writer's
own stop copies the frames of its last commits only.  Driven with a scripted connection (what each
``PRAGMA wal_checkpoint(PASSIVE)`` returns: busy, frames in the WAL, frames copied so far) and with a real file.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from subagents.store._checkpoint import CATCH_UP_LEFT, CATCH_UP_ROUNDS, Checkpointer


class Scripted:
    """A connection whose checkpoints return the scripted rows in turn."""

    def __init__(self, rows: list[tuple[int, int, int]]) -> None:
        self.rows = rows
        self.calls: list[str] = []

    def execute(self, sql: str) -> Any:
        self.calls.append(sql)
        row = self.rows.pop(0)

        class _Cursor:
            def fetchone(self) -> tuple[int, int, int]:
                return row

        return _Cursor()


def _idle(tmp_path: Path, max_wal_pages: int = 1000) -> Checkpointer:
    ck = Checkpointer(tmp_path / "x.db", interval_s=3600, max_wal_pages=max_wal_pages)
    ck.stop()  # its thread is not needed: _checkpoint is called directly
    ck._stopping = False
    return ck


def test_a_small_wal_takes_one_passive_checkpoint_and_no_restart(tmp_path: Path) -> None:
    ck = _idle(tmp_path)
    conn = Scripted([(0, 999, 999)])
    ck._checkpoint(conn)  # type: ignore[arg-type]
    assert conn.calls == ["PRAGMA wal_checkpoint(PASSIVE)"]
    assert (ck.checkpoints, ck.wal_pages, ck.restart_due) == (1, 999, False)


def test_past_the_bound_it_catches_up_until_a_round_copies_little_then_asks_for_the_restart(tmp_path: Path) -> None:
    ck = _idle(tmp_path)
    # the first copies 5,000 frames; 1,500 more were written meanwhile, then 300, then 40: it stops there
    conn = Scripted([(0, 5000, 5000), (0, 6500, 6500), (0, 6800, 6800), (0, 6840, 6840), (0, 9999, 9999)])
    ck._checkpoint(conn)  # type: ignore[arg-type]
    assert len(conn.calls) == 4
    assert 40 <= CATCH_UP_LEFT < 300
    assert ck.restart_due
    assert ck.checkpoints == 1  # one pass, counted once restart_due is decided


def test_a_writer_that_never_lets_it_catch_up_still_gets_its_restart(tmp_path: Path) -> None:
    ck = _idle(tmp_path)
    rows = [(0, 5000 + 2000 * i, 5000 + 2000 * i) for i in range(CATCH_UP_ROUNDS + 5)]
    conn = Scripted(rows)
    ck._checkpoint(conn)  # type: ignore[arg-type]
    assert len(conn.calls) == 1 + CATCH_UP_ROUNDS  # bounded: the RESTART copies what is left
    assert ck.restart_due


def test_a_wal_that_started_over_during_the_catch_up_ends_it(tmp_path: Path) -> None:
    ck = _idle(tmp_path)
    conn = Scripted([(0, 5000, 5000), (0, 120, 120), (0, 1, 1)])
    ck._checkpoint(conn)  # type: ignore[arg-type]
    assert len(conn.calls) == 2
    assert ck.restart_due


def test_on_a_real_file_written_meanwhile_the_catch_up_ends_and_the_restart_then_succeeds(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    w = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("PRAGMA wal_autocheckpoint=0")
    w.execute("CREATE TABLE t (x TEXT)")
    for _ in range(300):
        w.execute("INSERT INTO t VALUES (?)", ("x" * 8000,))  # ~3 pages a row
    stop = threading.Event()

    def keep_writing() -> None:
        while not stop.is_set():
            w.execute("INSERT INTO t VALUES (?)", ("y" * 8000,))

    writer = threading.Thread(target=keep_writing)
    ck = _idle(tmp_path, max_wal_pages=256)
    c = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    writer.start()
    try:
        ck._checkpoint(c)
    finally:
        stop.set()
        writer.join()
    assert ck.restart_due
    _, log, done = w.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert done == log  # everything the writer wrote is in the database file now
    busy, _, _ = w.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
    assert busy == 0
    assert w.execute("SELECT count(*) FROM t").fetchone()[0] > 300
    c.close()
    w.close()


def test_a_wal_grown_past_its_bound_is_checkpointed_without_waiting_for_the_interval(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    w = sqlite3.connect(db, isolation_level=None)
    w.execute("PRAGMA journal_mode=WAL")
    w.execute("PRAGMA wal_autocheckpoint=0")
    w.execute("CREATE TABLE t (x TEXT)")
    ck = Checkpointer(db, interval_s=3600, max_wal_pages=64)
    try:
        time.sleep(0.2)
        assert ck.checkpoints == 0  # a small WAL waits for the interval (an hour here)
        for _ in range(100):
            w.execute("INSERT INTO t VALUES (?)", ("x" * 8000,))  # ~300 pages: past the bound
        deadline = time.monotonic() + 10
        while ck.checkpoints < 1:
            assert time.monotonic() < deadline, "no checkpoint although the WAL passed max_wal_pages"
            time.sleep(0.01)
        assert ck.wal_pages >= 64
        assert ck.restart_due  # the writer is asked to start the WAL over
    finally:
        ck.stop()
        w.close()


def test_its_thread_checkpoints_when_kicked_and_ends_when_stopped(tmp_path: Path) -> None:
    """The thread runs on a bare ``_thread`` lock (the writer process imports no ``threading``): a kick wakes
    it long before its interval, kicks that pile up do not fail, stop waits for it to end, twice is harmless."""
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    ck = Checkpointer(path, interval_s=3600)
    try:
        running = ck.alive
        assert running
        for _ in range(3):
            ck.kick()  # (set while set: no error)
        deadline = time.monotonic() + 10
        while ck.checkpoints == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert ck.checkpoints >= 1
        assert ck.wal_pages > 0
    finally:
        ck.stop()
        conn.close()
    assert not ck.alive
    ck.stop()
    assert not ck.alive
