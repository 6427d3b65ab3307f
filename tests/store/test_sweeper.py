"""Cleanup policies with a fake clock (no sleeps), eviction from memory, and events after commits."""

from __future__ import annotations

import time
from pathlib import Path

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.runtime.sweeper import Sweeper
from subagents.store import AnnouncementRecord, MemoryStore, RunRecord, Store
from subagents.store.sqlite import SQLiteStore


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def rec(run_id: str, **kw: object) -> RunRecord:
    d: dict[str, object] = {"nickname": run_id, "agent_type": "explore", "task": "t", "status": "completed",
                            "ended_at": 1000.0, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, **d)  # type: ignore[arg-type]


def test_keep_archives_after_archive_after_minutes(store: Store) -> None:
    store.create_run(rec("k"))
    store.create_run(rec("running", status="running"))
    store.flush()
    clock = Clock(1000.0)
    sw = Sweeper(store, archive_after_minutes=10, clock=clock)
    assert sw.sweep().archived == []
    store.flush()
    got = store.get_run("k")
    assert got is not None
    assert (got.archive_at, got.archived) == (1600.0, False)
    clock.t = 1599.0
    assert sw.sweep().archived == []
    clock.t = 1600.0
    assert sw.sweep().archived == ["k"]
    store.flush()
    assert [r.run_id for r in store.list_runs()] == ["running"]
    assert [r.run_id for r in store.list_runs(include_archived=True)] == ["k", "running"]  # still readable


def test_delete_waits_until_the_result_was_delivered(store: Store) -> None:
    store.create_run(rec("fg", cleanup="delete"))  # foreground: delivered as it ended
    store.create_run(rec("bg", cleanup="delete", background=True, parent_id="p"))
    store.finish_run("bg", {}, AnnouncementRecord("bg:1", "p", "bg", "done", 1.0))
    store.flush()
    sw = Sweeper(store, archive_after_minutes=10, clock=Clock(1000.0))
    assert sw.sweep().deleted == ["fg"]
    store.mark_delivered("bg:1", 2.0)
    store.flush()
    assert sw.sweep().deleted == ["bg"]
    store.flush()
    assert store.list_runs(include_archived=True) == []


def _parent_spawns_once(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse(text="child done")
    if req.messages[-1].tool_results:
        return ModelResponse(text="parent done")
    return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "go",
                                                              "description": "d"})])


async def test_finished_trees_are_evicted_and_results_come_from_the_store(tmp_path: Path) -> None:
    async with Runtime(model=FunctionModel(_parent_spawns_once), workdir=tmp_path, builtin_tools=False,
                       store=f"sqlite:///{tmp_path / 'state.db'}") as rt:
        assert rt.manager.retention is not None
        rt.manager.retention.keep_trees = 2
        first = await rt.run("one")
        for _ in range(4):
            await rt.run("again")
        assert len(rt.manager.nodes) == 4  # two trees of two agents stay in memory
        assert rt.manager.find(first.id) is None
        again = rt.result(first.id)
        assert again is not None
        assert (again.id, again.status, again.text, again.turns) == (first.id, first.status, "parent done", 2)
        h = await rt.resume(first.id, "once more")  # re-created from the store
        assert (await rt.wait([h.id], timeout=10))[h.id].text == "parent done"


async def test_status_events_are_published_only_after_the_commit(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    reader = SQLiteStore(db)  # another connection: sees only what is committed
    mismatches: list[str] = []

    def on_event(ev: Event) -> None:
        if ev.kind in ("subagent_status_changed", "subagent_spawned"):
            r = reader.get_run(ev.agent_id)
            want = ev.data.get("status", "pending_init")
            rank = {"pending_init": 0, "running": 1}
            if r is None or rank.get(r.status, 2) < rank.get(want, 2):  # the store may already be further on
                mismatches.append(f"{ev.kind} {want} published while the store held {r and r.status}")

    try:
        async with Runtime(model=FunctionModel(_parent_spawns_once), workdir=tmp_path, builtin_tools=False,
                           store=store, on_event=on_event) as rt:
            for _ in range(5):
                await rt.run("go")
    finally:
        reader.close()
    assert mismatches == []


def test_the_sweeper_clock_defaults_to_time() -> None:
    sw = Sweeper(MemoryStore())
    assert abs(sw.clock() - time.time()) < 5
