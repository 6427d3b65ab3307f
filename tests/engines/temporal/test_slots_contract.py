"""``max_threads`` / ``when_full``, the same on both engines (the local asyncio engine and the Temporal engine).

Locally :class:`~subagents.runtime.slots.SlotPool` bounds the sub-agents running at once; on Temporal the
tree's root workflow keeps the ledger (engines/temporal/slots.py).  The peak is measured from the store's
records (each child's ``started_at`` .. ``ended_at``), so it is what really ran at once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store.base import RunRecord

from .conftest import runtime_on
from .scripts import nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

_REFUSED_TAIL = ("; wait for one to finish (wait) or close one (close_agent), or raise [agents] max_threads / "
                 "Runtime(max_threads=...)")


def _script(req: ModelRequest) -> ModelResponse:
    """A root ``spawn N`` spawns N background children in one reply, then waits for all and answers; a root
    ``deep`` spawns one foreground child that spawns three background grandchildren.  Every other child naps
    0.4 s, then answers."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    task = req.messages[0].text
    if task == "middle":
        if turns == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": f"leaf {i}", "description": f"leaf {i}",
                "background": True}) for i in range(3)])
        if turns == 1:
            return ModelResponse(tool_calls=[ToolCall("wait", {"timeout_s": 60})])
        return ModelResponse(text="middle done")
    if req.agent.depth > 0:
        if turns == 0:
            return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.4})])
        return ModelResponse(text=f"done {task}")
    if turns == 0:
        if task == "deep":
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "middle", "description": "middle"})])
        n = int(task.split()[1])
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
            "agent_type": "general-purpose", "prompt": f"child {i}", "description": f"child {i}", "background": True})
            for i in range(n)])
    if turns == 1 and task != "deep":
        return ModelResponse(tool_calls=[ToolCall("wait", {"timeout_s": 60})])
    return ModelResponse(text="all done")


model = FunctionModel(_script, name="slots")


@pytest_asyncio.fixture(loop_scope="session", params=["local", "temporal"])
async def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _peak(recs: list[RunRecord]) -> int:
    """The most children running at once (from their recorded start and end)."""
    edges = sorted([(r.started_at or 0.0, 1) for r in recs] + [(r.ended_at or 0.0, -1) for r in recs],
                   key=lambda e: (e[0], e[1]))
    peak = now = 0
    for _, d in edges:
        now += d
        peak = max(peak, now)
    return peak


def _kids(rt: Runtime, root_id: str, parent_id: str) -> list[RunRecord]:
    rt.store.flush()  # the local engine writes behind
    return [r for r in rt.store.list_runs(root_id=root_id) if r.parent_id == parent_id]


def _results(rt: Runtime, run_id: str) -> list[tuple[str, bool]]:
    rt.store.flush()
    return [(b.content, b.is_error) for m in rt.store.transcript(run_id) for b in m.tool_results]


@pytest_asyncio.fixture(loop_scope="session")
async def queueing(engine: str, temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
                   ) -> AsyncIterator[Runtime]:
    async with runtime_on(engine, temporal_env, workdir, f"sqlite:///{tmp_path / 'state.db'}", model, [nap],
                          max_threads=2, when_full="queue") as rt:
        yield rt


@pytest_asyncio.fixture(loop_scope="session")
async def refusing(engine: str, temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
                   ) -> AsyncIterator[Runtime]:
    async with runtime_on(engine, temporal_env, workdir, f"sqlite:///{tmp_path / 'state.db'}", model, [nap],
                          max_threads=2, when_full="refuse") as rt:
        yield rt


async def test_queue_mode_runs_at_most_max_threads_at_once_and_all_complete(queueing: Runtime) -> None:
    rt = queueing
    root = await rt.run("spawn 5")
    assert (root.status, root.text) == ("completed", "all done")
    kids = _kids(rt, root.id, root.id)
    assert len(kids) == 5
    assert {r.status for r in kids} == {"completed"}
    assert _peak(kids) <= 2
    spawned = [json.loads(c) for c, err in _results(rt, root.id)[:5]]
    assert [s["status"] for s in spawned] == ["running", "running", "queued", "queued", "queued"]
    assert [s.get("queued") for s in spawned[2:]] == [
        f"queued: {i} agents ahead of it; it starts when a slot frees (max_threads=2)" for i in range(3)]


async def test_refuse_mode_refuses_the_third_with_the_local_text(refusing: Runtime) -> None:
    rt = refusing
    root = await rt.run("spawn 3")
    assert root.status == "completed"
    kids = _kids(rt, root.id, root.id)
    assert len(kids) == 2  # the refused one was never recorded
    (refused,) = [c for c, err in _results(rt, root.id)[:3] if err]
    assert refused.startswith("max_threads=2 reached: 2 sub-agents are running (")
    assert refused.endswith(_REFUSED_TAIL)
    for k in kids:
        assert f"{k.nickname} (general-purpose, depth 1, " in refused


async def test_a_sub_agent_holding_a_slot_cannot_queue_its_children(queueing: Runtime) -> None:
    """Depth 2 asks the root's ledger: the middle child holds one of the 2 slots, its first grandchild the
    other; the next two are refused (a sub-agent holding a slot may not queue), as locally."""
    rt = queueing
    root = await rt.run("deep")
    assert root.status == "completed"
    (middle,) = _kids(rt, root.id, root.id)
    leaves = _kids(rt, root.id, middle.run_id)
    assert len(leaves) == 1
    refused = [c for c, err in _results(rt, middle.run_id)[:3] if err]
    assert len(refused) == 2
    for text in refused:
        assert text.startswith("max_threads=2 reached: 2 sub-agents are running (")
        assert text.endswith("; a sub-agent that holds a slot cannot queue a child (it could wait for it forever); "
                             "wait for one to finish" + _REFUSED_TAIL)
