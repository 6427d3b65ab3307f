"""Group commit: while the writer commits, the store gathers; the next transaction carries all of it, folded
into a few statements (rather than a queue of small batches committed together, statement after statement).
The busy-writer case is tested in test_writer_process_batches.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t")


async def test_flush_does_not_wait_for_the_gathering(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db", linger_s=10.0)  # a batching delay far longer than the test
    try:
        s.create_run(rec("a"))
        await asyncio.to_thread(s.flush)
        got = s.get_run("a")
        assert got is not None
    finally:
        s.close()
