"""How many store writes a child costs: one as it is created (already ``running`` when it starts at once), one
as it ends; a queued child is recorded ``pending_init`` and written again when it takes a slot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents import Runtime, Status
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store.base import RunRecord
from subagents.store.memory import MemoryStore


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.created: dict[str, tuple[str, float | None, int]] = {}
        self.updates: list[tuple[str, dict[str, Any]]] = []

    def create_run(self, rec: RunRecord) -> None:
        self.created[rec.run_id] = (rec.status, rec.started_at, rec.runs)
        super().create_run(rec)

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        self.updates.append((run_id, dict(fields)))
        super().update_run(run_id, fields)


def fanout(n: int) -> Any:
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            return ModelResponse(text="child done")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": f"task {i}", "description": f"c{i}", "background": True})
                for i in range(n)])
        if len(req.messages) == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        return ModelResponse(text="all done")
    return fn


async def test_a_child_that_starts_at_once_is_written_once_before_its_end(workdir: Path) -> None:
    store = CountingStore()
    async with Runtime(model=FunctionModel(fanout(3)), workdir=workdir, store=store) as rt:
        r = await rt.run("go")
    assert r.text == "all done"
    assert len(store.created) == 4
    for run_id, (status, started_at, runs) in store.created.items():
        assert (status, runs) == ("running", 1)
        assert started_at is not None
        rec = store.get_run(run_id)
        assert rec is not None
        assert rec.status == "completed"
        assert rec.runs == 1
        assert rec.created_at == rec.started_at <= (rec.ended_at or 0)
    assert [f for _, f in store.updates if f.get("status") == "running"] == []  # no second write as it starts


async def test_a_queued_child_is_recorded_pending_then_running_when_it_takes_a_slot(workdir: Path) -> None:
    store = CountingStore()
    async with Runtime(model=FunctionModel(fanout(3)), workdir=workdir, store=store, max_threads=1,
                       when_full="queue") as rt:
        r = await rt.run("go")
        kids = [a for a in rt.agents() if a.depth == 1]
        assert len(kids) == 3
        assert all(rt.status(k.id) is Status.COMPLETED for k in kids)
    assert r.text == "all done"
    queued = [rid for rid, (status, _, _) in store.created.items() if status == "pending_init"]
    assert len(queued) == 2  # one slot: the first child starts at once, the others wait for it
    for rid in queued:
        starts = [f for run_id, f in store.updates if run_id == rid and f.get("status") == "running"]
        assert len(starts) == 1
        assert starts[0]["runs"] == 1
