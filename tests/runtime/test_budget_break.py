"""A sub-agent gets no more than its parent: limits and authority tried by an adversarial model and caller.

Each test judges by effect (model calls made, tokens spent, a run refused); the ones marked "was:" failed on the
code before their fix."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any

import pytest

from subagents import Limits, Runtime, SpawnError, Usage
from subagents.authority.hooks import HookInput, HookResult
from subagents.limits import MAX_TIMEOUT_S
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.models.pricing import Prices
from subagents.runtime.limits import Budget
from subagents.runtime.loop import MAX_STOP_HOOK_TURNS


def runtime(workdir: Path, fn: Any, store: str = "memory://", **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store=store, builtin_tools=False, **kw)


def w(coro: Any) -> Any:
    return asyncio.wait_for(coro, 10)


def spawn(prompt: str, **kw: Any) -> ToolCall:
    return ToolCall("spawn_agent", {"prompt": prompt, **kw})


def first_turn(req: ModelRequest) -> bool:
    return not any(m.role == "assistant" for m in req.messages)


async def test_a_resume_with_a_cost_limit_on_a_model_with_no_price_is_refused(workdir: Path) -> None:
    """A spawn with a cost limit on an unpriced model is refused (the cost could not be counted); a resume was
    not: ``rt.resume(id, limits=Limits(max_cost_usd=...))`` ran, and every call of the run went uncharged."""
    calls: list[int] = []

    def fn(req: ModelRequest) -> ModelResponse:
        calls.append(req.agent.depth)
        if req.agent.depth == 0 and first_turn(req):
            return ModelResponse(tool_calls=[spawn("kid")], usage=Usage(100, 100))
        return ModelResponse(text="done", usage=Usage(100, 100))

    async with runtime(workdir, fn) as rt:
        with pytest.raises(SpawnError, match="cannot be enforced"):
            await rt.run("go", limits=Limits(max_cost_usd=0.01))  # the spawn path refuses it
        root = await w(rt.run("go"))
        kid = next(a.id for a in rt.agents() if a.depth == 1)
        before = len(calls)
        for ref in (kid, root.id):
            with pytest.raises(SpawnError, match=r"cannot be enforced: the model .* has no known price"):
                await rt.resume(ref, "spend", limits=Limits(max_cost_usd=0.000001))  # was: ran, uncharged
        await asyncio.sleep(0.05)
    assert len(calls) == before


async def test_a_priced_tree_under_a_cost_limit_resumes_its_agents(workdir: Path) -> None:
    """(The check above refuses only what cannot be counted: a priced model resumes under a cost limit.)"""
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 and first_turn(req):
            return ModelResponse(tool_calls=[spawn("kid")], usage=Usage(100, 100))
        return ModelResponse(text="done", usage=Usage(100, 100))

    async with Runtime(model=FunctionModel(fn, prices=Prices(1.0, 1.0)), workdir=workdir, store="memory://",
                       builtin_tools=False) as rt:
        await w(rt.run("go", limits=Limits(max_cost_usd=1.0)))
        kid = next(a.id for a in rt.agents() if a.depth == 1)
        await rt.resume(kid, "more")
        res = (await w(rt.wait([kid])))[kid]
    assert res.text == "done"
    assert res.cost_usd == pytest.approx(0.0002)


async def test_a_grandchild_resumed_while_its_parent_is_being_resumed_spends_from_the_parents_new_run(
        workdir: Path) -> None:
    """``rt.resume(mid, limits=max_tokens=150)`` then, before mid's run is under way, ``rt.resume(leaf)``: the leaf
    was carved from the root's (unlimited) budget, not mid's, and spent 1,000 tokens under a parent allowed 150."""
    leaf_calls = [0]

    def fn(req: ModelRequest) -> ModelResponse:
        task = req.messages[0].text
        if task == "root":
            return ModelResponse(tool_calls=[spawn("mid")]) if first_turn(req) else ModelResponse(text="root done")
        if task == "mid":
            return ModelResponse(tool_calls=[spawn("leaf")]) if first_turn(req) else ModelResponse(text="mid done")
        if first_turn(req):
            return ModelResponse(text="leaf done")
        leaf_calls[0] += 1
        if leaf_calls[0] >= 10:
            return ModelResponse(text="leaf done again", usage=Usage(50, 50))
        return ModelResponse(usage=Usage(50, 50), tool_calls=[ToolCall("list_agents", {})])

    async with runtime(workdir, fn) as rt:
        await w(rt.run("root"))
        mid = next(a.id for a in rt.agents() if a.depth == 1)
        leaf = next(a.id for a in rt.agents() if a.depth == 2)
        await rt.resume(mid, "again", limits=Limits(max_tokens=150))
        await rt.resume(leaf, "burn")  # (no await in between: mid's run has not started yet)
        res = (await w(rt.wait([leaf, mid])))[leaf]
    assert res.usage.input_tokens + res.usage.output_tokens <= 200, res  # was: 1,000 tokens
    assert (res.outcome, res.limit) == ("limit", "max_tokens")


def test_carving_under_a_deadline_moved_by_an_approval_is_capped_at_the_largest_timeout() -> None:
    """A root at the largest ``timeout_s`` (a year) whose clock was held for an approval (``release_clock`` moves
    the deadline on): what is left is more than a year, and building the child's Limits from it raised UserError
    (a crash of the spawn, not a refusal or a capped child)."""
    parent = Budget(Limits(timeout_s=MAX_TIMEOUT_S))
    assert parent.deadline is not None
    parent.deadline += 60.0  # what release_clock does after a person took a minute to decide
    carved = parent.carve(Limits(max_turns=3))  # was: UserError "Limits.timeout_s must be at most 31622400"
    assert carved.timeout_s == MAX_TIMEOUT_S
    assert carved.max_turns == 3
    child = Budget(carved, parent=parent)
    assert child.deadline is not None
    assert child.deadline <= parent.deadline


@pytest.mark.parametrize("bad", [-1, 0, math.nan, math.inf, -math.inf, 1e30, MAX_TIMEOUT_S + 1, "10", True, [5]])
async def test_a_bad_run_timeout_from_the_model_is_a_tool_error_and_spawns_nothing(workdir: Path, bad: object
                                                                                   ) -> None:
    seen: list[tuple[bool, str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            return ModelResponse(text="child ran")
        if first_turn(req):
            return ModelResponse(tool_calls=[spawn("kid", run_timeout_s=bad)])
        seen.extend((r.is_error, r.content) for r in req.messages[-1].tool_results)
        return ModelResponse(text="root done")

    async with runtime(workdir, fn) as rt:
        r = await w(rt.run("root"))
        kids = [a for a in rt.agents() if a.depth == 1]
    assert r.text == "root done"
    assert kids == []
    assert len(seen) == 1
    assert seen[0][0], seen
    assert "run_timeout_s" in seen[0][1]


async def test_a_run_timeout_past_the_parents_deadline_ends_the_child_at_the_parents_deadline(workdir: Path
                                                                                             ) -> None:
    """``run_timeout_s`` of a year under a parent with half a second: the background child stops at the parent's
    deadline (judged by the clock: it did not run on after it)."""
    ended: list[float] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            try:
                await asyncio.sleep(5)
            finally:
                ended.append(time.monotonic())
            return ModelResponse(text="child ran on")
        if first_turn(req):
            return ModelResponse(tool_calls=[spawn("kid", run_timeout_s=MAX_TIMEOUT_S, background=True)])
        return ModelResponse(text="root done")

    async with runtime(workdir, fn) as rt:
        t0 = time.monotonic()
        await w(rt.run("root", limits=Limits(timeout_s=0.4)))
        kid = next(a for a in rt.agents() if a.depth == 1)
        res = (await w(rt.wait([kid.id])))[kid.id]
    assert (res.outcome, res.limit) == ("timeout", "timeout_s")
    assert res.error == "Exceeded its parent's timeout_s (the tree's deadline)"
    assert ended
    assert ended[0] - t0 < 1.5


async def test_a_teammate_idle_hook_cannot_keep_a_teammate_going_past_its_stop_hook_bound(workdir: Path) -> None:
    """A Stop hook may send an agent back MAX_STOP_HOOK_TURNS times in a row; a TeammateIdle hook that always
    blocks sent a teammate back without end (each time a new run: its turn count starts again, so max_turns never
    stops it).  The hook here gives in after 40 tries, so the run ends either way."""
    tries = [0]
    calls = [0]

    def more(inp: HookInput) -> HookResult | None:
        tries[0] += 1
        return HookResult("block", "keep working") if tries[0] <= 40 else None

    def fn(req: ModelRequest) -> ModelResponse:
        calls[0] += 1
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory", builtin_tools=False,
                       hooks={"TeammateIdle": [more]}) as rt:
        team = rt.create_team("t")
        team.spawn("dev", "work")
        assert await team.wait_idle(timeout=10)
        team.shutdown()
    assert calls[0] <= MAX_STOP_HOOK_TURNS + 1, calls  # was: 41 model calls


async def test_a_child_resumed_in_a_new_process_stays_in_its_spent_trees_budget(workdir: Path, tmp_path: Path
                                                                                 ) -> None:
    """The same tree as test_resume_edges' "stays in the tree's budget", across a restart: the adopted root's
    budget started at zero, so its child, resumed, spent a whole new budget in a tree whose budget was used up."""
    calls = [0]

    def fn(req: ModelRequest) -> ModelResponse:
        calls[0] += 1
        if req.agent.depth == 1:
            return ModelResponse(text="working", usage=Usage(80, 20), tool_calls=[ToolCall("list_agents", {})])
        if first_turn(req):
            return ModelResponse(usage=Usage(80, 20), tool_calls=[spawn("k")])
        return ModelResponse(text="root done", usage=Usage(80, 20))

    store = f"sqlite:///{tmp_path / 'state.db'}"
    async with runtime(workdir, fn, store=store) as rt:
        await w(rt.run("go", limits=Limits(max_tokens=500)))
        kid = next(a.id for a in rt.agents() if a.depth == 1)
    spent = calls[0]
    assert spent == 5
    async with runtime(workdir, fn, store=store) as rt2:
        refused = ""
        try:
            await rt2.resume(kid, "keep going")
            await w(rt2.wait([kid]))
        except SpawnError as e:
            refused = str(e)
    assert calls[0] == spent, f"{calls[0] - spent} more model calls in a tree whose budget was spent"  # was: 4 more
    assert refused.startswith("cannot resume: the budget it shares with its parent and their tree is used up")
