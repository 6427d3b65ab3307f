"""A run records and starts at most 25 children at a time (agent_tools._STARTING).

A fan-out of hundreds in one turn would otherwise make one workflow task resolve every spawn at once,
past Temporal's deadlock detector (2 s), and its replay the same.  The cap is seen in the root's
workflow history: never more than 25 ``plan_spawn`` activities scheduled and not yet completed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from subagents import Limits
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

from .conftest import runtime_on

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

N = 30  # over the cap of 25: the first 25 start together, the rest once places free


def _script(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse(text="ok")
    turns = sum(1 for m in req.messages if m.role == "assistant")
    if turns == 0:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
            "agent_type": "general-purpose", "prompt": f"child {i}", "background": True}) for i in range(N)])
    if turns == 1:
        return ModelResponse(tool_calls=[ToolCall("wait", {"timeout_s": 120})])
    return ModelResponse(text=req.messages[-1].tool_results[0].content.splitlines()[0])


async def test_a_fan_out_of_30_starts_its_children_25_at_a_time(temporal_env: WorkflowEnvironment, workdir: Path,
                                                               tmp_path: Path) -> None:
    async with runtime_on("temporal", temporal_env, workdir, f"sqlite:///{tmp_path / 'state.db'}",
                          FunctionModel(_script), [], max_threads=100) as rt:
        result = await rt.run("fan out", limits=Limits(max_turns=5))
        assert result.text == f"[wait: {N} finished, 0 still running; timed_out=false]"
        history = await temporal_env.client.get_workflow_handle(result.id).fetch_history()
    plans: set[int] = set()
    outstanding = peak = scheduled = 0
    for ev in history.events:
        if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if ev.activity_task_scheduled_event_attributes.activity_type.name == "subagents.plan_spawn":
                plans.add(ev.event_id)
                scheduled += 1
                outstanding += 1
                peak = max(peak, outstanding)
        elif (ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
              and ev.activity_task_completed_event_attributes.scheduled_event_id in plans):
            outstanding -= 1
    assert scheduled == N
    assert peak == 25  # the cap, and reached: the children are started in batches
