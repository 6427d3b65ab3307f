"""Commit callbacks of the SQLite store: asked on an event loop, they run on that loop, in order, together.

The writer thread hands a batch's callbacks to the loop once (one round trip of the GIL to a busy loop,
not one per callback); a callback that fails is reported to the loop and does not stop the others.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


def _rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t")


async def _settle(until: Any) -> None:
    for _ in range(500):
        if until():
            return
        await asyncio.sleep(0.01)


async def test_callbacks_asked_on_a_loop_run_on_it_in_order(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    calls: list[tuple[int, int]] = []
    try:
        for i in range(5):
            s.create_run(_rec(f"r{i}"))
            assert s.on_commit(lambda i=i: calls.append((i, threading.get_ident())))
        await _settle(lambda: len(calls) == 5)
        assert [i for i, _ in calls] == [0, 1, 2, 3, 4]
        assert {t for _, t in calls} == {threading.get_ident()}, "called on the loop's thread"
        assert len(s.list_runs()) == 5  # (and only after the runs were committed)
    finally:
        s.close()


async def test_a_failing_callback_is_reported_and_the_others_still_run(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    s = SQLiteStore(tmp_path / "state.db", linger_s=0.05)  # one batch for all three
    ran: list[str] = []

    def boom() -> None:
        raise ValueError("listener bug")

    try:
        s.create_run(_rec("a"))
        s.on_commit(lambda: ran.append("first"))
        s.on_commit(boom)
        s.on_commit(lambda: ran.append("last"))
        await _settle(lambda: len(ran) == 2)
        assert ran == ["first", "last"]
        assert any(isinstance(c.get("exception"), ValueError) for c in reported), reported
    finally:
        loop.set_exception_handler(None)
        s.close()


def test_without_a_loop_the_writer_calls_them(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    done = threading.Event()
    try:
        s.create_run(_rec("a"))
        s.on_commit(done.set)
        s.flush()
        assert done.wait(5)
    finally:
        s.close()
