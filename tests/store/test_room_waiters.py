"""Runs waiting for room in the SQLite store's backlog (``SQLiteStore.room``): thousands may wait in a
fan-out; the writer wakes them in one pass and with one hand-over to their event loop, not one per run."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from subagents.store import RunRecord, _writer
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t")


async def test_the_runs_waiting_for_room_are_woken_together_with_one_hand_over(tmp_path: Path,
                                                                                 monkeypatch: Any) -> None:
    release = threading.Event()
    real = _writer.Writer._commit

    def slow(self: _writer.Writer, calls: list[Any]) -> None:
        release.wait(5)  # the writer is behind until the test lets it go
        real(self, calls)

    monkeypatch.setattr(_writer.Writer, "_commit", slow)
    s = SQLiteStore(tmp_path / "state.db", linger_s=0.001, max_backlog=20)
    loop = asyncio.get_running_loop()
    handed: list[Any] = []
    real_threadsafe = loop.call_soon_threadsafe

    def counting(cb: Any, *args: Any, **kw: Any) -> Any:
        handed.append(getattr(cb, "__name__", cb))
        return real_threadsafe(cb, *args, **kw)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    try:
        for i in range(15):  # over half the bound: room() waits
            s.create_run(rec(f"r{i}"))
        woken: list[int] = []

        async def waiter(i: int) -> None:
            await s.room()
            woken.append(i)

        tasks = [asyncio.ensure_future(waiter(i)) for i in range(200)]
        await asyncio.sleep(0.05)
        assert woken == []  # all wait: the backlog is over half its bound
        release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert woken == list(range(200))  # first come, first woken
        assert handed.count("_resolve") == 1  # one hand-over for the 200 waiters
    finally:
        release.set()
        s.close()
