"""A watched cycle on the SQLite store queues one event gate per batch the store commits, not one per status.

Each status change is a commit point: the events after it wait until the store has committed it.  The store
gathers writes into batches committed whole, so a gate still closed whose batch is the one being gathered
already covers a later commit point (it opens only once that batch is committed).  Before: every commit
point asked the store for a callback and queued a gate (six per watched cycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.models import FunctionModel
from subagents.runtime.events import Event

from .test_events_cycle import script  # the watched cycle: a foreground spawn, the child answers


@pytest.mark.timeout(60)
async def test_a_batch_of_watched_cycles_asks_the_store_for_one_commit_callback(workdir: Path) -> None:
    statuses: list[tuple[str, str | None]] = []  # (the status announced, what the store held then)

    def listen(e: Event) -> None:
        if e.kind == "subagent_status_changed":
            rec = rt.store.get_run(e.agent_id)
            statuses.append((e.data["status"], rec.status if rec is not None else None))

    async with Runtime(model=FunctionModel(script), workdir=workdir, store=f"sqlite:///{workdir.parent}/s.db",
                       builtin_tools=False, on_event=listen) as rt:
        store: Any = rt.store
        asked: list[object] = []
        on_commit = store.on_commit

        def counting(cb: Any) -> bool:
            asked.append(cb)
            return bool(on_commit(cb))

        store.on_commit = counting
        batches = store.gathering
        for _ in range(20):
            assert (await rt.run("hi")).text == "parent done"
        await rt.events_delivered()  # (asks for one callback itself, and hands the last batch over)
        batches = store.gathering - batches  # the batches these cycles' writes went in
    assert len(statuses) == 20 * 4
    rank = {"running": 1, "completed": 2}
    assert all(held is not None and rank[held] >= rank[said] for said, held in statuses), statuses
    assert batches >= 1
    assert len(asked) <= batches + 1  # one gate per batch (it was one per status change: 6 a cycle, 120)
