"""Closing a run while one of its activities runs ends it as closed (``shutdown`` / ``cancelled``), not as failed."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.activities import AgentActivities
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.shapes import ActivityOptions, AgentOutcome, AgentStart, Prepared, WorkflowFinish
from subagents.engines.temporal.worker import build_worker
from subagents.limits import Limits
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.runtime import Runtime
from subagents.store import open_store

from .scripts import nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]


def _script(req: ModelRequest) -> ModelResponse:
    """``quick``: answers at once; ``slow model``: the model call takes 2 s; ``slow tool``: the tool call takes
    2 s; ``hold``: spawns a background child that naps forever, then naps forever too."""
    if req.agent.depth > 0 or (req.messages[0].text == "hold" and len(req.messages) > 1):
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.05})])
    if req.messages[0].text == "hold":
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "forever",
                                                                  "background": True})])
    if req.messages[0].text == "quick":
        return ModelResponse(text="done quickly")
    if req.messages[0].text == "slow model":
        time.sleep(2)
        return ModelResponse(text="too late")
    if len(req.messages) == 1:
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 2})])
    return ModelResponse(text="too late")


@asynccontextmanager
async def _engine(env: WorkflowEnvironment, workdir: Path, tmp_path: Path) -> AsyncIterator[tuple[TemporalEngine, str]]:
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    rt = Runtime(model=FunctionModel(_script), workdir=workdir, store=store_url, tools=[nap], permission_mode="yolo")
    queue = f"close-{uuid.uuid4()}"
    target = TemporalTarget(env.client.service_client.config.target_host, "default", queue)
    try:
        async with build_worker(env.client, rt, queue):
            yield TemporalEngine(env.client, target, ActivityOptions(max_attempts=1)), store_url
    finally:
        await rt.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def engine(temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
                 ) -> AsyncIterator[tuple[TemporalEngine, str]]:
    async with _engine(temporal_env, workdir, tmp_path) as e:
        yield e


@pytest.mark.parametrize("prompt", ["slow model", "slow tool"])
async def test_closing_during_an_activity_ends_the_run_as_closed(engine: tuple[TemporalEngine, str], prompt: str
                                                                 ) -> None:
    eng, store_url = engine
    run_id = await eng.start(prompt, limits=Limits(max_turns=5))
    store = open_store(store_url, Path("."))
    try:
        for _ in range(200):  # until the run is recorded running (its first model call has begun)
            rec = store.get_run(run_id)
            if rec is not None and rec.status == "running" and (prompt == "slow model" or store.transcript(run_id)[1:]):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # well inside the 2 s activity
        result = await eng.close(run_id)
        assert (result.status, result.outcome, result.error) == ("shutdown", "cancelled", "closed before it finished")
        rec = store.get_run(run_id)
        assert rec is not None
        assert (rec.status, rec.outcome) == ("shutdown", "cancelled")
    finally:
        store.close()


async def test_closing_right_after_a_child_is_recorded_ends_the_child_too(engine: tuple[TemporalEngine, str]) -> None:
    eng, store_url = engine
    for _ in range(3):  # the close lands between the child's record and its workflow's start, or just after
        run_id = await eng.start("hold", limits=Limits(max_turns=1000))
        store = open_store(store_url, Path("."))
        try:
            for _ in range(400):
                if store.child_ids(run_id):
                    break
                await asyncio.sleep(0.01)
            result = await eng.close(run_id)
            assert (result.status, result.outcome) == ("shutdown", "cancelled")
            (child_id,) = store.child_ids(run_id)
            for _ in range(200):
                child = store.get_run(child_id)
                if child is not None and child.is_final:
                    break
                await asyncio.sleep(0.05)
            assert child is not None
            assert (child.status, child.outcome) == ("shutdown", "cancelled")
        finally:
            store.close()


# The activities, each slowed by 1 s (an unannotated ``self``: Temporal leaves it out of the arguments).
_PREPARE, _FINISH = AgentActivities.prepare, AgentActivities.finish


@activity.defn(name="subagents.prepare")
async def _slow_prepare(self, start: AgentStart) -> Prepared:  # type: ignore[no-untyped-def]
    await asyncio.sleep(1)
    return await _PREPARE(self, start)


@activity.defn(name="subagents.finish")
async def _slow_finish(self, fin: WorkflowFinish) -> AgentOutcome:  # type: ignore[no-untyped-def]
    await asyncio.sleep(1)
    return await _FINISH(self, fin)


_SLOWED = {"prepare": _slow_prepare, "finish": _slow_finish}


@pytest.mark.parametrize(("slowed", "prompt", "ends"), [
    ("prepare", "slow tool", ("shutdown", "cancelled", "closed before it finished")),
    ("finish", "quick", ("completed", "ok", None)),
])
async def test_closing_while_the_run_is_prepared_or_finished_still_records_it(
        temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        slowed: str, prompt: str, ends: tuple[str, str, str | None]) -> None:
    """The close lands while the ``prepare`` or the ``finish`` activity runs (slowed here to 1 s): the cancelled
    activity comes back as an ``ActivityError``, not an ``asyncio.CancelledError``.  A run closed while prepared is
    still recorded, then ended as closed; a run whose end is being recorded ends as it ended (the close came late);
    never a failed workflow ("Workflow cancelled") with its record left running."""
    monkeypatch.setattr(AgentActivities, slowed, _SLOWED[slowed])
    async with _engine(temporal_env, workdir, tmp_path) as (eng, store_url):
        run_id = await eng.start(prompt, limits=Limits(max_turns=5))
        await asyncio.sleep(0.5)  # the workflow waits on the slowed activity
        result = await eng.close(run_id)
        assert (result.status, result.outcome, result.error) == ends
        store = open_store(store_url, Path("."))
        try:
            rec = store.get_run(run_id)
            assert rec is not None
            assert (rec.status, rec.outcome) == ends[:2]
        finally:
            store.close()
