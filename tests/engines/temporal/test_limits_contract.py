"""Budgets shared by a tree, the same on both engines (the local asyncio engine and the Temporal engine).

Locally a child's limits are carved from what its parent has *left* when it is spawned, every model call is
charged to the run and to all its ancestors, and a run stops when it or an ancestor has spent its budget.
The Temporal engine must do the same across workflows (engines/temporal/limits.py).  The scripted model
reports fixed usage per call, so the token counts are exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Limits, Runtime
from subagents.messages import Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

from .conftest import runtime_on
from .scripts import nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]


def _usage(tokens: int) -> Usage:
    return Usage(input_tokens=tokens - 10, output_tokens=10)


def _script(req: ModelRequest) -> ModelResponse:
    """Roots: ``carve`` spends 60 then a foreground child; ``exhaust`` spends all 100 and spawns in the same
    reply; ``share`` spends 10 and spawns two background children, then 10 and waits.  Children spend 30 per
    call and nap forever."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    task = req.messages[0].text
    if req.agent.depth > 0:  # (a nap long enough for the tree's signals to reach a busy box's workflows)
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 1.0})], usage=_usage(30))
    spawn = {"agent_type": "general-purpose", "prompt": "spend", "description": "a spender"}
    if task == "share" and turns == 1:
        return ModelResponse(tool_calls=[ToolCall("wait", {"timeout_s": 60})], usage=_usage(10))
    if turns > 0:
        return ModelResponse(text="the root went on", usage=_usage(10))
    if task == "carve":
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", spawn)], usage=_usage(60))
    if task == "exhaust":
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", spawn)], usage=_usage(100))
    assert task == "share"
    return ModelResponse(tool_calls=[ToolCall("spawn_agent", {**spawn, "background": True}),
                                     ToolCall("spawn_agent", {**spawn, "background": True})], usage=_usage(10))


model = FunctionModel(_script, name="spender")


@pytest_asyncio.fixture(loop_scope="session", params=["local", "temporal"])
async def rt(request: pytest.FixtureRequest, temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
             ) -> AsyncIterator[Runtime]:
    async with runtime_on(request.param, temporal_env, workdir, f"sqlite:///{tmp_path / 'state.db'}", model,
                          [nap], max_threads=8) as runtime:
        yield runtime


def _tokens(rt: Runtime, run_id: str) -> int:
    r = rt.result(run_id)
    assert r is not None
    return r.usage.input_tokens + r.usage.output_tokens


async def test_a_child_is_carved_from_what_its_parent_has_left(rt: Runtime) -> None:
    root = await rt.run("carve", limits=Limits(max_turns=20, max_tokens=100, timeout_s=120))
    (child,) = [a for a in rt.agents() if a.parent_id == root.id]
    rec = rt.store.get_run(child.id)
    assert rec is not None
    assert rec.limits["max_tokens"] == 40  # 100 - the 60 the root had spent when it spawned
    assert 0 < rec.limits["timeout_s"] < 120  # the time the root had left
    kid = rt.result(child.id)
    assert kid is not None
    assert (kid.outcome, kid.limit, kid.error) == ("limit", "max_tokens", "Exceeded max_tokens=40 (tokens=60)")
    # the child's 60 tokens count against the root: no model call for it after its child came back
    assert (root.outcome, root.limit, root.turns) == ("limit", "max_tokens", 1)
    assert root.error == "Exceeded max_tokens=100 (tokens=120)"
    assert _tokens(rt, root.id) == 60  # a run's own usage stays its own


async def test_no_child_when_the_budget_is_used_up(rt: Runtime) -> None:
    root = await rt.run("exhaust", limits=Limits(max_turns=20, max_tokens=100))
    assert [a for a in rt.agents() if a.parent_id == root.id] == []  # refused: nothing recorded
    rt.store.flush()  # the local engine writes transcripts behind
    results = [b for m in rt.store.transcript(root.id) for b in m.tool_results]
    assert len(results) == 1
    assert results[0].is_error
    assert results[0].content.startswith("cannot spawn: the parent's budget is used up (Used up max_tokens=100 "
                                         "(tokens=100): no budget left for another model call)")
    assert (root.outcome, root.limit, root.turns) == ("limit", "max_tokens", 1)


async def test_siblings_share_what_their_parent_has_left(rt: Runtime) -> None:
    root = await rt.run("share", limits=Limits(max_turns=20, max_tokens=100))
    kids = [a for a in rt.agents() if a.parent_id == root.id]
    assert len(kids) == 2
    for k in kids:
        r = rt.result(k.id)
        assert r is not None
        assert (r.outcome, r.limit) == ("limit", "max_tokens")
        assert _tokens(rt, k.id) <= 90  # each was carved 90 (100 - the root's 10)
    # together they stop once the tree's 100 are spent (plus the calls in flight then), not at 20 + 2 x 90
    spent = _tokens(rt, root.id) + sum(_tokens(rt, k.id) for k in kids)
    assert spent <= 160
    assert (root.outcome, root.limit) == ("limit", "max_tokens")
