"""Processes that open one new SQLite store at the same moment (two ``subagents worker`` s sharing a store): each
waits for the other, none fails.  SQLite answers ``PRAGMA journal_mode=WAL`` "database is locked" at once, without
its busy handler, while another connection holds a lock: one of two workers started together failed (1 in ~12)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from subagents.store.sqlite import SQLiteStore

OPEN = """
import sys, time
from subagents.store.sqlite import SQLiteStore
t0 = float(sys.argv[2])
while time.time() < t0:
    pass
SQLiteStore(sys.argv[1]).close()
print("opened")
"""


def test_a_new_store_opens_while_another_connection_holds_it_a_moment(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    holder = sqlite3.connect(p, isolation_level=None, check_same_thread=False)  # (another process creating it)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE scratch (x)")
    threading.Timer(0.3, lambda: (holder.execute("ROLLBACK"), holder.close())).start()
    t0 = time.monotonic()
    store = SQLiteStore(p, timeout=5.0)  # was: "is locked by another process (database is locked)" at once
    try:
        assert time.monotonic() - t0 >= 0.25  # it waited for the holder
        assert store._rconn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        store.close()


def test_processes_opening_one_new_store_together_all_succeed(tmp_path: Path) -> None:
    for i in range(8):
        p = tmp_path / f"s{i}.db"
        t0 = time.time() + 0.5  # (after the interpreters' start: the opens meet)
        procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(p), str(t0)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
        outs = [proc.communicate(timeout=60) for proc in procs]
        assert all(out.strip() == "opened" for out, _ in outs), [err[-400:] for _, err in outs]
