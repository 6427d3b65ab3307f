"""Resume on the Temporal engine: a finished run goes on with its conversation and one more message, as a
new workflow run under the same id (``AgentJob(resume=...)``), from a client or by a parent's ``resume_agent``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.shapes import WORKFLOW_NAME, ActivityOptions, AgentJob, AgentOutcome, ResumeStart
from subagents.engines.temporal.worker import build_worker
from subagents.limits import Limits
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.runtime import Runtime
from subagents.store import open_store

from .scripts import nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]


def _script(req: ModelRequest) -> ModelResponse:
    """A child (or a root ``hello``) answers ``answer <n>: <last user text>`` (n: its user messages so far);
    a root ``boss`` spawns a child, resumes it with ``again`` when it has answered, and repeats its answer
    (``boss bg``: in the background, collected with wait)."""
    task, last = req.messages[0].text, req.messages[-1]
    users = [m for m in req.messages if m.role == "user" and m.text]
    if req.agent.depth > 0 or task == "hello":
        return ModelResponse(text=f"answer {len(users)}: {users[-1].text.splitlines()[-1]}")
    turns = sum(1 for m in req.messages if m.role == "assistant")
    bg = task == "boss bg"
    if turns == 0:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "first",
                                                                   "background": bg})])
    if bg and turns == 1:
        return ModelResponse(tool_calls=[ToolCall("wait", {})])
    if turns == (2 if bg else 1):
        child = req.messages[2].tool_results[0].content
        ref = child.split('"agent_id": "')[1].split('"')[0] if bg else child.split("id ")[1].split(" ")[0]
        return ModelResponse(tool_calls=[ToolCall("resume_agent", {"agent_id": ref, "message": "again"})])
    if bg and turns == 3:
        return ModelResponse(tool_calls=[ToolCall("wait", {})])
    return ModelResponse(text=last.tool_results[-1].content.splitlines()[-1])


class Ctx:
    def __init__(self, env: WorkflowEnvironment, queue: str, store_url: str) -> None:
        self.client, self.queue, self.store_url = env.client, queue, store_url
        target = TemporalTarget(env.client.service_client.config.target_host, "default", queue)
        self.engine = TemporalEngine(env.client, target, ActivityOptions(max_attempts=2))

    async def resume(self, run_id: str, message: str, limits: dict[str, Any] | None = None) -> AgentOutcome:
        job = AgentJob(resume=ResumeStart(run_id, message, limits or {}, ActivityOptions(max_attempts=2)))
        handle = await self.client.start_workflow(WORKFLOW_NAME, job, id=run_id, task_queue=self.queue,
                                                  result_type=AgentOutcome)
        return await handle.result()

    def store(self) -> Any:
        return open_store(self.store_url, Path("."))


@pytest_asyncio.fixture(loop_scope="session")
async def ctx(temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path) -> AsyncIterator[Ctx]:
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    rt = Runtime(model=FunctionModel(_script), workdir=workdir, store=store_url, tools=[nap], permission_mode="yolo")
    queue = f"resume-{uuid.uuid4()}"
    try:
        async with build_worker(temporal_env.client, rt, queue):
            yield Ctx(temporal_env, queue, store_url)
    finally:
        await rt.aclose()


async def test_a_finished_root_resumes_with_its_conversation(ctx: Ctx) -> None:
    first = await ctx.engine.run("hello", limits=Limits(max_turns=3))
    assert first.text == "answer 1: hello"
    out = await ctx.resume(first.id, "and again")
    assert (out.result["id"], out.result["status"]) == (first.id, "completed")
    assert out.result["text"] == "answer 2: and again"
    assert out.result["turns"] == 1  # counts are per run, as on the local engine
    store = ctx.store()
    try:
        assert [(m.role, m.text) for m in store.transcript(first.id)] == [
            ("user", "hello"), ("assistant", "answer 1: hello"), ("user", "and again"),
            ("assistant", "answer 2: and again")]
        rec = store.get_run(first.id)
        assert (rec.status, rec.runs, rec.result_text, rec.nickname) == (
            "completed", 2, "answer 2: and again", first.nickname)
    finally:
        store.close()


async def test_a_running_or_unknown_run_is_refused(ctx: Ctx) -> None:
    with pytest.raises(WorkflowFailureError) as e:
        await ctx.resume(str(uuid.uuid4()), "hi")
    assert "no agent run has the id" in str(e.value.cause.cause)


@pytest.mark.parametrize("mode", ["boss", "boss bg"])
async def test_resume_agent_resumes_a_finished_child(ctx: Ctx, mode: str) -> None:
    result = await ctx.engine.run(mode, limits=Limits(max_turns=10))
    assert (result.status, result.text) == ("completed", "answer 2: again"), result
    store = ctx.store()
    try:
        (child_id,) = store.child_ids(result.id)
        child = store.get_run(child_id)
        assert (child.status, child.runs, child.result_text) == ("completed", 2, "answer 2: again")
        assert [m.role for m in store.transcript(child_id)] == ["user", "assistant", "user", "assistant"]
        anns = store.announcements_of(parent_id=result.id)
        assert sorted(a.id for a in anns) == ([f"{child_id}:1", f"{child_id}:2"] if mode == "boss bg" else [])
        assert all(a.delivered_at is not None for a in anns)
    finally:
        store.close()
