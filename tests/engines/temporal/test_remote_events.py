"""``rt.events()`` tells the same story on both engines: the same kinds, in the same order, with the same
usage — on the Temporal engine read back from the store the workers write (runtime/remote_events.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Limits, Runtime
from subagents.messages import Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event

from .conftest import runtime_on

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

KINDS = ("run_start", "turn_start", "assistant_text", "model_end", "tool_start", "tool_end", "run_end")


def _script(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse(text="done", usage=Usage(input_tokens=3, output_tokens=4))
    if not any(m.role == "assistant" for m in req.messages):
        return ModelResponse(text="asking a kid", tool_calls=[ToolCall("spawn_agent", {
            "agent_type": "general-purpose", "prompt": "kid", "description": "a kid"})],
            usage=Usage(input_tokens=10, output_tokens=5))
    return ModelResponse(text="root got it", usage=Usage(input_tokens=20, output_tokens=2))


@pytest_asyncio.fixture(loop_scope="session", params=["local", "temporal"])
async def rt(request: pytest.FixtureRequest, temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
             ) -> AsyncIterator[Runtime]:
    async with runtime_on(request.param, temporal_env, workdir, f"sqlite:///{tmp_path / 'state.db'}",
                          FunctionModel(_script, name="eventful"), []) as runtime:
        yield runtime


async def test_the_event_sequence_with_model_usage(rt: Runtime) -> None:
    seen: list[Event] = []

    async def collect() -> None:
        async for ev in rt.events():
            seen.append(ev)

    reader = asyncio.ensure_future(collect())
    await asyncio.sleep(0)
    result = await rt.run("go", limits=Limits(max_turns=5))
    await rt.events_delivered()
    for _ in range(200):
        if any(e.kind == "subagent_completed" and e.agent_id == result.id for e in seen):
            break
        await asyncio.sleep(0.05)
    reader.cancel()
    root = [e for e in seen if e.agent_id == result.id and e.kind in KINDS and not e.data.get("delta")]
    kid = [e for e in seen if e.parent_id == result.id and e.kind in KINDS and not e.data.get("delta")]
    assert [e.kind for e in root] == ["run_start", "turn_start", "assistant_text", "model_end", "tool_start",
                                      "tool_end", "turn_start", "assistant_text", "model_end", "run_end"]
    assert [e.kind for e in kid] == ["run_start", "turn_start", "assistant_text", "model_end", "run_end"]
    ends = [e.data for e in root if e.kind == "model_end"]
    assert [(d["usage"]["input_tokens"], d["usage"]["output_tokens"], d["tool_calls"], d["model"]) for d in ends] \
        == [(10, 5, 1, "eventful"), (20, 2, 0, "eventful")]
    starts = [e.data["usage"]["input_tokens"] for e in root if e.kind == "turn_start"]
    assert starts == [0, 10]  # the run's usage so far
    (kid_end,) = [e.data for e in kid if e.kind == "model_end"]
    assert kid_end["usage"]["output_tokens"] == 4
