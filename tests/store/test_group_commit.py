"""Group commit: while the writer commits, the store gathers; the next transaction carries all of it, folded
into a few statements (rather than a queue of small batches committed together, statement after statement)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

from subagents.store import RunRecord, _writer
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t")


async def test_writes_made_while_the_writer_is_busy_go_in_one_transaction(tmp_path: Path, monkeypatch: Any) -> None:
    commits: list[int] = []
    release = threading.Event()
    real = _writer.Writer._commit

    def slow(self: _writer.Writer, calls: list[Any]) -> None:
        if not commits:
            release.wait(5)  # the first transaction takes long
        commits.append(len(calls))
        real(self, calls)

    monkeypatch.setattr(_writer.Writer, "_commit", slow)
    db = tmp_path / "state.db"
    s = SQLiteStore(db, linger_s=0.001)
    try:
        s.create_run(rec("first"))
        await asyncio.sleep(0.02)  # handed over: the writer is busy with it
        for i in range(20):  # each after the batching delay: without group commit, 20 small batches
            s.update_run("first", {"turns": i})
            s.create_run(rec(f"r{i}"))
            await asyncio.sleep(0.003)
        assert commits == []
        release.set()
        for _ in range(200):  # no flush: the gathered batch is handed over once the writer is idle
            await asyncio.sleep(0.01)
            if len(commits) >= 2:
                break
        await asyncio.sleep(0.05)
        assert len(commits) == 2, commits
        assert commits[1] <= 4, commits  # one folded batch: a multi-row insert, one update (not 20 of each)
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("SELECT count(*), max(turns) FROM runs").fetchone() == (21, 19)
        finally:
            conn.close()
    finally:
        release.set()
        s.close()


async def test_flush_does_not_wait_for_the_gathering(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db", linger_s=10.0)  # a batching delay far longer than the test
    try:
        s.create_run(rec("a"))
        await asyncio.to_thread(s.flush)
        got = s.get_run("a")
        assert got is not None
    finally:
        s.close()
