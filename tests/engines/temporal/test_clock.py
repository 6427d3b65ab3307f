"""``timeout_s`` stops while a person decides (as locally: runtime/loop.py ``hold_clock``), on the Temporal engine:
the run's clock and its ancestors' (engines/temporal/approvals.py ``within``).  Answered through the engine
(``TemporalEngine.decide``) 3 s after the request, with ``timeout_s=2``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Limits, Runtime
from subagents.authority.approvals import Decision
from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.worker import build_worker
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store import open_store
from subagents.tools.base import tool

from .scripts import nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]


@tool(category="edit")
def prod(name: str) -> str:
    """Prod a thing (an edit: permission mode default asks first).

    Args:
        name: what to prod.
    """
    return f"prodded {name}"


def _script(req: ModelRequest) -> ModelResponse:
    """``prod``: prods ``a`` then answers; ``child``: a foreground child prods ``a``; ``slow``: naps 3 s."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    task = req.messages[0].text
    if turns == 0 and task == "child":
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
            "agent_type": "general-purpose", "prompt": "prod", "description": "a prodder"})])
    if turns == 0 and task == "slow":
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 3})])
    if turns == 0:
        return ModelResponse(tool_calls=[ToolCall("prod", {"name": "a"})])
    return ModelResponse(text=" | ".join(r.content for m in req.messages for r in m.tool_results))


@pytest_asyncio.fixture(loop_scope="session")
async def engine(temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path) -> AsyncIterator[TemporalEngine]:
    worker_rt = Runtime(model=FunctionModel(_script, name="prodder"), workdir=workdir,
                        store=f"sqlite:///{tmp_path / 'state.db'}", tools=[prod, nap], permission_mode="default")
    target = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", f"clock-{uuid.uuid4()}")
    try:
        async with build_worker(temporal_env.client, worker_rt, target.task_queue):
            yield TemporalEngine(temporal_env.client, target)
    finally:
        await worker_rt.aclose()


async def _answer_late(engine: TemporalEngine, runs: Callable[[], list[str]], after_s: float) -> None:
    """Find the request of one of ``runs()`` and allow it ``after_s`` seconds later."""
    deadline = time.monotonic() + 30
    while not (found := [(r, p) for r in runs() for p in await engine.approvals(r)]):
        assert time.monotonic() < deadline, "no approval request came"
        await asyncio.sleep(0.05)
    ((run_id, req),) = found
    await asyncio.sleep(after_s)
    assert await engine.decide(run_id, req["id"], Decision.allow()) == "allowed once"


async def test_the_clock_stops_while_a_person_decides(engine: TemporalEngine) -> None:
    run_id = await engine.start("prod", limits=Limits(max_turns=10, timeout_s=2))
    await _answer_late(engine, lambda: [run_id], 3.0)
    result = await asyncio.wait_for(engine.result(run_id), 60)
    assert (result.status, result.text) == ("completed", "prodded a")
    assert result.duration_s >= 3.0  # longer than its timeout_s: the person's 3 s did not count


async def test_a_childs_request_stops_its_parents_clock_too(engine: TemporalEngine, workdir: Path, tmp_path: Path
                                                           ) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", workdir)  # the worker's: the child's id is there
    try:
        run_id = await engine.start("child", limits=Limits(max_turns=10, timeout_s=2))
        await _answer_late(engine, lambda: [r.run_id for r in store.list_runs(root_id=run_id)], 3.0)
        result = await asyncio.wait_for(engine.result(run_id), 60)
    finally:
        store.close()
    assert result.status == "completed"
    assert "general-purpose · status completed · outcome ok" in result.text  # the child's (carved timeout < 2 s)
    assert result.text.endswith("\nprodded a")


async def test_the_clock_still_runs_otherwise(engine: TemporalEngine) -> None:
    run_id = await engine.start("slow", limits=Limits(max_turns=10, timeout_s=1))
    result = await asyncio.wait_for(engine.result(run_id), 60)
    assert (result.status, result.limit, result.error) == ("errored", "timeout_s", "Exceeded timeout_s=1")
