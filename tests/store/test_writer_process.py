"""The SQLite store's writer process: started lazily, reaped at close, its failures and its parent's death."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subagents.exceptions import StoreError
from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str, task: str = "t") -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task=task)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.01)


def test_a_store_opened_and_closed_without_writes_starts_no_process(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    assert s.list_runs() == []
    assert s.get_run("x") is None
    s.close()
    assert s._w.proc is None


def test_the_writer_starts_on_the_first_write_and_is_reaped_at_close(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    s.create_run(rec("a"))
    s.flush()
    proc = s._w.proc
    assert proc is not None
    assert proc.poll() is None
    assert [r.run_id for r in s.list_runs()] == ["a"]
    s.close()
    assert proc.returncode == 0  # reaped (no zombie left), exited cleanly
    assert not (tmp_path / "state.db-wal").exists() or os.path.getsize(tmp_path / "state.db-wal") == 0


def test_a_killed_writer_fails_every_later_call_with_a_clear_error(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    try:
        s.create_run(rec("a"))
        s.flush()
        proc = s._w.proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for i in range(100):  # a write may still reach the pipe before the death is seen: flush sees it
            with contextlib.suppress(StoreError):
                s.create_run(rec(f"b{i}"))
        with pytest.raises(StoreError) as e:
            s.flush()
        msg = str(e.value)
        assert "writer process" in msg
        assert "SIGKILL" in msg
        assert "open a new one" in msg
        with pytest.raises(StoreError, match="writer process"):  # every later call, the same error
            s.update_run("a", {"turns": 1})
        with pytest.raises(StoreError, match="writer process"):
            s.get_run("a")
    finally:
        with pytest.raises(StoreError, match="writer process"):  # closing says it too, and still cleans up
            s.close()
    s2 = SQLiteStore(tmp_path / "state.db")  # what was committed is intact
    try:
        assert s2.get_run("a") is not None
    finally:
        s2.close()


async def test_a_killed_writer_wakes_an_event_loop_waiting_for_room(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db", max_backlog=10)
    try:
        s.create_run(rec("a"))
        s.flush()
        proc = s._w.proc
        assert proc is not None
        blocker = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the writer waits for the lock: the backlog stays up
        try:
            for i in range(8):
                s.create_run(rec(f"b{i}"))
            waiter = asyncio.ensure_future(s.room())
            await asyncio.sleep(0.05)
            assert not waiter.done()
            os.kill(proc.pid, signal.SIGKILL)
            await asyncio.wait_for(waiter, 5)  # woken by the writer's end, not left hanging
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        with pytest.raises(StoreError, match="writer process"):
            s.create_run(rec("c"))
    finally:
        with contextlib.suppress(StoreError):
            s.close()


PARENT = """
import os, signal, sys
from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore
s = SQLiteStore(sys.argv[1])
for i in range(50):
    s.create_run(RunRecord(run_id=f"r{i}", agent_id=f"r{i}", nickname="n", agent_type="explore", task="t"))
s.flush()
print(s._w.proc.pid, flush=True)
s.create_run(RunRecord(run_id="late", agent_id="late", nickname="n", agent_type="explore", task="t"))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_when_its_parent_is_killed_the_writer_exits_and_the_committed_data_is_intact(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    out = subprocess.run([sys.executable, "-c", PARENT, str(db)], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL, out.stderr
    writer_pid = int(out.stdout.split()[0])
    wait_gone(writer_pid)  # never left running
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        ids = {r[0] for r in conn.execute("SELECT run_id FROM runs")}
    finally:
        conn.close()
    assert {f"r{i}" for i in range(50)} <= ids  # everything flushed before the kill


def test_a_sigint_to_the_process_group_does_not_stop_the_writer(tmp_path: Path) -> None:
    """A Ctrl-C in a terminal reaches the whole group: the store, not the signal, decides when the writer ends."""
    s = SQLiteStore(tmp_path / "state.db")
    try:
        s.create_run(rec("a"))
        s.flush()
        proc = s._w.proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.1)
        assert proc.poll() is None
        s.create_run(rec("b"))
        s.flush()
        assert {r.run_id for r in s.list_runs()} == {"a", "b"}
    finally:
        s.close()


async def test_commit_callbacks_and_flush_from_an_event_loop(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    try:
        seen: list[str | None] = []
        done = asyncio.Event()
        s.create_run(rec("a"))

        def committed() -> None:
            r = s.get_run("a")
            seen.append(None if r is None else r.run_id)
            done.set()

        assert s.on_commit(committed)
        await asyncio.wait_for(done.wait(), 5)  # read by the loop itself: no thread in this process
        assert seen == ["a"]
        import threading
        # no writer or checkpointer thread (the tool-call pool's idle workers of earlier tests may linger)
        assert [t.name for t in threading.enumerate() if t.name.startswith(("subagents-store", "subagents-ckpt"))] == []
    finally:
        s.close()


def test_checkpoints_run_in_the_writer_process(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db, checkpoint_s=3600, max_wal_pages=64)
    big = "x" * 20_000
    try:
        for i in range(50):
            s.create_run(rec(f"a{i}", f"{i}:{big}"))
        s.flush()
        st = s._w.stats()
        assert st["autocheckpoint"] == 0
        assert st["temp_store"] == 2  # MEMORY: a big statement's journal never goes to a temporary file
        assert st["checkpointer_alive"]
        grown = os.path.getsize(f"{db}-wal")
        s._w.stats(kick=True)
        deadline = time.monotonic() + 10
        while s._w.stats()["checkpoints"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        s.create_run(rec("b"))  # the writer restarts the WAL after its next commit
        s.flush()
        assert not s._w.stats()["restart_due"]
        for i in range(25):
            s.create_run(rec(f"c{i}", f"{i}:{big}"))
        s.flush()
        assert os.path.getsize(f"{db}-wal") == grown  # written from the start of the WAL again
    finally:
        s.close()
    assert os.path.getsize(f"{db}-wal") == 0 if os.path.exists(f"{db}-wal") else True
