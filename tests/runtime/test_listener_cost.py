"""A listener never slows a run: ``rt.run`` does not wait for the store to commit the events it holds.

Before: with anyone listening (``on_event=``, ``rt.events()``), every ``rt.run`` waited until the
store had committed its last status (2.5–4.3 ms a cycle instead of ~0.3 ms).  Now the run returns at
once; the status events still reach listeners only once committed ("status before events"), and
``await rt.events_delivered()`` waits for them where the order matters (the CLI's ``--json``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.models import FunctionModel
from subagents.runtime.events import Event


@pytest.mark.timeout(30)
async def test_a_run_returns_while_the_store_cannot_commit_and_its_events_follow(workdir: Path) -> None:
    db = workdir.parent / "state.db"
    seen: list[str] = []

    def listen(e: Event) -> None:
        seen.append(e.kind)

    async with Runtime(model=FunctionModel(lambda req: "done"), workdir=workdir,
                       store=f"sqlite:///{db}", on_event=listen) as rt:
        await rt.run("warm up")
        await rt.events_delivered()
        seen.clear()
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the writer cannot commit until this ends
        try:
            result = await asyncio.wait_for(rt.run("go"), 2)  # before: waited for the commit
            assert result.text == "done"
            await asyncio.sleep(0.05)
            assert "subagent_completed" not in seen  # not committed yet, so not announced yet
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        await asyncio.wait_for(rt.events_delivered(), 10)
        assert seen[-1] == "subagent_completed"
        rec = rt.store.get_run(result.id)
        assert rec is not None
        assert rec.status == "completed"
