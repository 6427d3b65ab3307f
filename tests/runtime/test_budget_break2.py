"""A sub-agent gets no more than its parent (continued from test_budget_break.py): hooks that send an agent back,
and teams as a way around max_threads, max_depth and max_turns."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from subagents import Limits, Runtime, SpawnError, Usage
from subagents.authority.hooks import HookInput, HookResult
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.limits import Budget, charge_tree, limits_from_record
from subagents.runtime.loop import MAX_STOP_HOOK_TURNS
from subagents.store.base import RunRecord

from .team_scripts import call, member_name, turns


def w(coro: Any) -> Any:
    return asyncio.wait_for(coro, 10)


def results(req: ModelRequest) -> list[tuple[bool, str]]:
    return [(r.is_error, r.content) for r in req.messages[-1].tool_results]


async def test_stop_hooks_that_always_object_end_at_max_turns_or_their_bound(workdir: Path) -> None:
    """A Stop hook that always sends the root back stops at its max_turns; a SubagentStop hook that always sends the
    child back stops at MAX_STOP_HOOK_TURNS in a row (the child's 50 default turns are more)."""
    calls = {0: 0, 1: 0}

    def fn(req: ModelRequest) -> ModelResponse:
        calls[req.agent.depth] += 1
        if req.agent.depth == 0 and turns(req) == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "kid"})])
        return ModelResponse(text="done")

    def again(inp: HookInput) -> HookResult | None:
        return HookResult("block", "not yet")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", builtin_tools=False,
                       hooks={"Stop": [again], "SubagentStop": [again]}) as rt:
        r = await w(rt.run("go", limits=Limits(max_turns=3)))
        kid = next(a for a in rt.agents() if a.depth == 1)
        kid_result = rt.result(kid.id)
    assert (r.outcome, r.limit, r.turns) == ("limit", "max_turns", 3)
    assert calls[0] == 3
    assert calls[1] == MAX_STOP_HOOK_TURNS + 1
    assert kid_result is not None
    assert kid_result.outcome == "ok"


async def test_teammates_take_thread_slots_and_cannot_go_deeper_than_max_depth(workdir: Path) -> None:
    """``spawn_agent(team=..., name=...)`` is a spawn like any other: a second teammate over max_threads=1 is
    refused, and a teammate at max_depth can neither spawn nor make a team of its own."""
    lead_saw: list[tuple[bool, str]] = []
    member_saw: list[tuple[bool, str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = member_name(req), turns(req)
        if me is not None:
            if n == 0:
                return ModelResponse(tool_calls=[call("spawn_agent", {"prompt": "deeper"}),
                                                 call("spawn_agent", {"prompt": "x", "team": "t", "name": "z"}, 1),
                                                 call("team_create", {"name": "mine"}, 2)])
            if n == 1:
                member_saw.extend(results(req))
            return ModelResponse(text=f"{me} done")
        if n == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "t"})])
        if n == 1:
            return ModelResponse(tool_calls=[call("spawn_agent", {"prompt": "work", "team": "t", "name": "a"}),
                                             call("spawn_agent", {"prompt": "work", "team": "t", "name": "b"}, 1)])
        if n == 2:
            lead_saw.extend(results(req))
        return ModelResponse(text="lead done")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", max_threads=1, max_depth=1) as rt:
        await w(rt.run("lead", agent="coordinator"))
        agents = rt.agents()
    assert [a.depth for a in agents if a.depth > 0] == [1]
    assert [e for e, _ in lead_saw] == [False, True], lead_saw
    assert "max_threads=1 reached" in lead_saw[1][1]
    assert len(member_saw) == 3
    assert all(err for err, _ in member_saw), member_saw


async def test_a_lead_and_a_teammate_that_keep_mailing_each_other_stop_at_the_leads_token_limit(
        workdir: Path) -> None:
    """Each mail that wakes a lead (or a teammate) counts ``max_turns`` afresh (docs/teams.md: a piece of work);
    its tokens, cost and deadline count its whole run: two agents that answer every message stop at those."""
    lead_calls = [0]

    def fn(req: ModelRequest) -> ModelResponse:
        me, n = member_name(req), turns(req)
        if me is not None:  # answer every message, then end the turn
            if req.messages[-1].role == "user" and not req.messages[-1].tool_results:
                return ModelResponse(tool_calls=[call("send_message", {"to": "lead", "text": "ping"}, n)])
            return ModelResponse(text="sent")
        lead_calls[0] += 1
        if n == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "t"})], usage=Usage(50, 50))
        if n == 1:
            return ModelResponse(tool_calls=[call("spawn_agent", {"prompt": "ping me", "team": "t", "name": "w"})],
                                 usage=Usage(50, 50))
        if lead_calls[0] < 40 and req.messages[-1].role == "user" and not req.messages[-1].tool_results:
            return ModelResponse(tool_calls=[call("send_message", {"to": "w", "text": "pong"}, n)], usage=Usage(50, 50))
        return ModelResponse(text="lead waiting", usage=Usage(50, 50))

    async with Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory://") as rt:
        r = await w(rt.run("lead", agent="coordinator", limits=Limits(max_turns=4, max_tokens=1000)))
    assert (r.outcome, r.limit) == ("limit", "max_tokens")
    assert 10 <= lead_calls[0] <= 11, lead_calls  # 100 tokens a call: past four turns, stopped by its tokens


async def test_a_python_spawn_under_a_finished_child_stays_in_its_spent_trees_budget(workdir: Path) -> None:
    """``rt.spawn(..., parent=P)`` with P a finished child whose loop was let go (and its root's too): P's loop,
    rebuilt for the spawn, got a budget of its own under no parent (dormant.py), so a tree that had spent all of
    its 500 tokens gave the new child 400 more."""
    new_calls = [0]

    def fn(req: ModelRequest) -> ModelResponse:
        if req.messages[0].text == "more":
            new_calls[0] += 1
            return ModelResponse(usage=Usage(50, 50), tool_calls=[call("list_agents", {}, turns(req))])
        if req.agent.depth == 0 and turns(req) == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "p"})], usage=Usage(50, 50))
        return ModelResponse(text="done", usage=Usage(200, 200))

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", builtin_tools=False) as rt:
        r = await w(rt.run("go", limits=Limits(max_tokens=500)))
        p = next(a for a in rt.agents() if a.depth == 1)
        refused = ""
        try:
            h = await rt.spawn("more", parent=p.id)
            await w(rt.wait([h.id]))
        except SpawnError as e:
            refused = str(e)
    assert (r.outcome, r.limit) == ("limit", "max_tokens")
    assert new_calls[0] == 0, new_calls  # was: 4 model calls, 400 tokens
    assert refused.startswith("cannot spawn: the parent's budget is used up")


async def test_a_parent_that_spent_its_budget_exactly_resumes_and_spawns_nothing_in_that_turn(workdir: Path
                                                                                               ) -> None:
    """The reply that uses up the last token is not over the limit, so its tool calls run: a resume_agent and a
    spawn_agent in it are refused (nothing left to carve), and the child's model is not called again."""
    kid_calls = [0]
    saw: list[tuple[bool, str]] = []
    ids: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            kid_calls[0] += 1
            return ModelResponse(text="kid done", usage=Usage(50, 50))
        n = turns(req)
        if n == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "kid", "background": True})],
                                 usage=Usage(50, 50))
        if n == 1:
            ids.append(json.loads(req.messages[-1].tool_results[0].content)["agent_id"])
            return ModelResponse(tool_calls=[call("wait", {})], usage=Usage(0, 0))
        if n == 2:  # 200 spent: this reply spends the last 100
            return ModelResponse(usage=Usage(50, 50), tool_calls=[
                call("resume_agent", {"agent_id": ids[0], "message": "more"}), call("spawn_agent", {"prompt": "k2"})])
        saw.extend(results(req))
        return ModelResponse(text="root done")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", builtin_tools=False) as rt:
        r = await w(rt.run("go", limits=Limits(max_tokens=300)))
        kids = [a for a in rt.agents() if a.depth == 1]
        rt.store.flush()
        last = rt.store.transcript(r.id)[-1].tool_results
    assert [x.is_error for x in last] == [True, True]
    assert last[0].content.startswith("cannot resume: the budget it shares with its parent and their tree is used up")
    assert last[1].content.startswith("cannot spawn: the parent's budget is used up")
    assert kid_calls[0] == 1
    assert len(kids) == 1
    assert (r.outcome, r.limit) == ("limit", "max_tokens")
    assert saw == []  # the root made no call after the one that spent its budget
    assert r.turns == 3


def test_a_stored_limit_that_is_no_longer_valid_is_dropped_alone() -> None:
    """A record with one bad limit (an older version's, or edited by hand) was restored with no limits at all:
    its max_tokens and max_cost_usd were lost with the bad one."""
    lim = limits_from_record({"max_turns": 5, "max_tokens": -3, "timeout_s": 10**12, "max_cost_usd": 1.5,
                              "gone_limit": 1})
    assert (lim.max_turns, lim.max_tokens, lim.timeout_s, lim.max_cost_usd) == (5, None, None, 1.5)


def test_a_restored_root_without_a_token_or_cost_limit_reads_no_runs_of_its_tree() -> None:
    """Charging a restored root with its tree's spending read every run of the tree (a tree of 100,000 runs: ~2 s
    at every start, bench/run.py's restore row 158 ms -> 1,965 ms); it counts only for a token or cost limit, and
    is read as the store's sums (Store.tree_spend, tests/store/test_tree_spend.py), since the root's last start."""
    root = RunRecord(run_id="r", agent_id="r", nickname="n", agent_type="general-purpose", task="t", started_at=1.0)
    asked: list[tuple[str, float]] = []

    def tree_spend(root_id: str, since: float) -> tuple[int, float]:
        asked.append((root_id, since))
        return 50, 0.5

    charge_tree(Budget(Limits(max_turns=5, timeout_s=60)), root, tree_spend)
    assert asked == []
    limited = Budget(Limits(max_tokens=1000))
    charge_tree(limited, root, tree_spend)
    assert (asked, limited.tokens, limited.cost) == ([("r", 1.0)], 50, 0.5)
