"""The store watch of a remote engine (runtime/remote_events.py) polls: a child that starts and ends between two
polls is never seen ``running``.  It still gets its ``run_start`` (before its turns and its ``run_end``), as on the
local engine; a child that never started (stopped while queued) gets none.  Before, the first case had no
``run_start`` (``tests/engines/temporal/test_remote_events.py`` failed about one run in three)."""

from __future__ import annotations

import time

from subagents.runtime.events import Event, EventBus
from subagents.runtime.remote_events import StoreWatch
from subagents.store import RunRecord
from subagents.store.memory import MemoryStore


def _record(store: MemoryStore, run_id: str, parent: str | None, *, started: bool) -> None:
    now = time.time()
    store.create_run(RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t",
                               parent_id=parent, root_id="root", depth=0 if parent is None else 1, created_at=now))
    fields = {"started_at": now} if started else {}
    store.update_run(run_id, {"status": "running", **fields} if started else {"status": "pending_init"})
    store.finish_run(run_id, {"status": "completed" if started else "shutdown", "outcome": "completed" if started
                              else "cancelled", "ended_at": now + 0.01}, None)


def test_a_run_that_started_and_ended_between_two_polls_still_starts() -> None:
    store, bus = MemoryStore(), EventBus()
    seen: list[Event] = []
    bus.on(seen.append)
    _record(store, "root", None, started=True)
    _record(store, "kid", "root", started=True)
    _record(store, "queued", "root", started=False)
    watch = StoreWatch(store, bus)
    watch.watch("root")
    watch.poll()
    kinds = {rid: [e.kind for e in seen if e.agent_id == rid] for rid in ("root", "kid", "queued")}
    for rid in ("root", "kid"):
        assert kinds[rid][:3] == ["subagent_spawned", "subagent_status_changed", "run_start"], kinds[rid]
        assert kinds[rid].index("run_start") < kinds[rid].index("run_end")
        assert kinds[rid].count("run_start") == 1
    assert "run_start" not in kinds["queued"]
    assert "run_end" in kinds["queued"]
