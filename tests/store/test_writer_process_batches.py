"""Group commit and back-pressure with the writer in its own process (the writer held up by a lock)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t")


async def test_writes_made_while_the_writer_is_busy_go_in_few_transactions(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db, linger_s=0.001)
    try:
        s.create_run(rec("zero"))
        s.flush()
        before = s._w.stats()["commits"]
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the writer's next transaction waits for this lock
        s.create_run(rec("first"))
        await asyncio.sleep(0.02)
        for i in range(20):  # each after the batching delay: without group commit, 20 small transactions
            s.update_run("first", {"turns": i})
            s.create_run(rec(f"r{i}"))
            await asyncio.sleep(0.003)
        blocker.execute("COMMIT")
        blocker.close()
        s.flush()
        assert s._w.stats()["commits"] - before <= 3  # the held one, then what gathered meanwhile
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("SELECT count(*), max(turns) FROM runs").fetchone() == (22, 19)
        finally:
            conn.close()
    finally:
        s.close()


async def test_runs_waiting_for_room_are_woken_in_order_once_the_writer_catches_up(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db, max_backlog=20)
    try:
        s.create_run(rec("zero"))
        s.flush()
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        for i in range(15):  # over half the bound: room() waits
            s.create_run(rec(f"r{i}"))
        woken: list[int] = []

        async def waiter(i: int) -> None:
            await s.room()
            woken.append(i)

        tasks = [asyncio.ensure_future(waiter(i)) for i in range(200)]
        await asyncio.sleep(0.05)
        assert woken == []
        blocker.execute("COMMIT")
        blocker.close()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert woken == list(range(200))  # first come, first woken
    finally:
        s.close()


async def test_a_flush_from_another_thread_while_the_loop_reads_replies_counts_each_reply_once(tmp_path: Path) -> None:
    """A model or tool thread may flush while the event loop's reader takes the writer's replies: each reply is
    answered once (before, both could parse the same bytes: 'pop from an empty deque' in a later flush)."""
    from subagents.store import RunRecord
    from subagents.store.sqlite import SQLiteStore

    s = SQLiteStore(tmp_path / "state.db", linger_s=0.0)
    try:
        for round_ in range(40):
            for i in range(25):
                s.create_run(RunRecord(run_id=f"r{round_}-{i}", agent_id="a", nickname="n", agent_type="explore",
                                       task="t"))
            await asyncio.gather(asyncio.to_thread(s.flush), asyncio.to_thread(s.flush), asyncio.sleep(0))
        s.flush()
        assert len(s.list_runs()) == 1000
        assert s._w.inflight == 0
    finally:
        s.close()
