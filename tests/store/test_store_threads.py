"""The SQLite store used from a model or tool thread while its event loop writes too.

The store belongs to the event loop that first wrote to it: a flush or a write from another thread is handed to
that loop and waited for.  Before, a thread that flushed while the loop was handing over its *first* batch (no
reply reader and no batching timer yet) ran on its own: it returned before that batch was sent — a SIGKILL right
after lost writes the flush had promised — and its writes to the pipe could race the loop's (a frame sent twice:
the writer answered more batches than were sent, ``pop from an empty deque``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t")


def committed(db: Path) -> set[str]:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return {r[0] for r in conn.execute("SELECT run_id FROM runs")}
    finally:
        conn.close()


@pytest.mark.timeout(60)
async def test_a_flush_from_a_thread_during_the_first_hand_over_waits_for_its_commit(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db, linger_s=0.001)
    handing, seen = threading.Event(), []
    submit = s._w.submit

    def slow_submit(batch: Any) -> None:  # the loop is between taking the batch and sending it
        handing.set()
        time.sleep(0.3)
        submit(batch)

    s._w.submit = slow_submit  # type: ignore[method-assign]

    def model_thread() -> None:
        handing.wait(5)
        s.flush()  # what a crash test's model does before it SIGKILLs its process
        seen.append(committed(db))

    try:
        s.create_run(rec("root"))
        s.create_run(rec("child"))
        t = threading.Thread(target=model_thread)
        t.start()
        await asyncio.sleep(0.01)  # the batching timer fires: the loop hands the batch over
        await asyncio.to_thread(t.join)  # (the loop runs meanwhile: the thread's flush is handed to it)
        assert seen == [{"root", "child"}]  # flushed means committed, whichever thread asked
    finally:
        s._w.submit = submit  # type: ignore[method-assign]
        s.close()


@pytest.mark.timeout(60)
async def test_writes_from_a_thread_and_the_loop_at_once_are_each_committed_once(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db, linger_s=0.0005)
    errors: list[BaseException] = []

    def tool_thread(prefix: str) -> None:
        try:
            for i in range(300):
                s.create_run(rec(f"{prefix}{i}"))
                s.update_run(f"{prefix}{i}", {"turns": 1})
                if i % 7 == 0:
                    s.flush()
        except BaseException as e:  # (reported below)
            errors.append(e)

    try:
        threads = [threading.Thread(target=tool_thread, args=(p,)) for p in ("t", "u")]
        s.create_run(rec("first"))  # the loop owns the store
        for t in threads:
            t.start()
        for i in range(300):
            s.create_run(rec(f"loop{i}"))
            s.update_run(f"loop{i}", {"turns": 1})
            if i % 5 == 0:
                await asyncio.sleep(0)
        for t in threads:
            await asyncio.to_thread(t.join)
        s.flush()
        assert errors == []
        assert (s._w.inflight, s._w.backlog) == (0, 0)
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("SELECT count(*), sum(turns) FROM runs").fetchone() == (901, 900)
        finally:
            conn.close()
    finally:
        s.close()


@pytest.mark.timeout(60)
def test_a_thread_whose_write_was_handed_to_a_loop_that_stopped_does_it_itself(tmp_path: Path) -> None:
    """The home loop stops (its ``asyncio.run`` ends) after a thread handed it a write, before running it: the
    thread does not wait forever, it writes itself once the loop is gone (and the write is made once)."""
    db = tmp_path / "state.db"
    s = SQLiteStore(db, linger_s=0.001)
    stopping = threading.Event()
    results: list[str] = []

    def home() -> None:  # a callback of the loop (it blocks the loop on purpose while the thread hands over)
        s.create_run(rec("first"))  # this loop is the store's home now
        s.flush()
        loop = asyncio.get_running_loop()
        def late() -> None:
            stopping.wait(5)
            s.create_run(rec("late"))
            results.append("done")

        t = threading.Thread(target=late)
        t.start()
        stopping.set()
        while not loop._ready:  # type: ignore[attr-defined]  # the thread's write is queued on this loop...
            time.sleep(0.001)
        loop.stop()  # ...and the loop stops before its next step runs it

    loop = asyncio.new_event_loop()
    try:
        loop.call_soon(home)
        loop.run_forever()
    finally:
        loop.close()
    try:
        deadline = time.monotonic() + 10
        while not results and time.monotonic() < deadline:
            time.sleep(0.01)
        assert results == ["done"]
        s.flush()
        assert committed(db) == {"first", "late"}
    finally:
        s.close()
