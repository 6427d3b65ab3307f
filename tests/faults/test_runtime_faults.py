"""Reliability of the runtime's own bookkeeping: budgets, waiting, events, nicknames (issue #12).

Each test failed on the code before its fix; the comment above it says how.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from subagents import AgentDefinition, Limits, Outcome, Runtime, SpawnError, Status, Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.models.pricing import Prices


def spawn(prompt: str, *, background: bool = False, agent_type: str = "general-purpose") -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": agent_type, "prompt": prompt, "description": prompt[:20],
                                    "background": background})


def sqlite_runtime(workdir: Path, fn: Any, **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store=f"sqlite:///{workdir.parent}/state.db", **kw)


def fan_out(spent: list[int], *, n: int, child_calls: int, child_tokens: int, background: bool) -> Any:
    """A root that spawns ``n`` children in one turn; each child makes ``child_calls`` calls."""

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            spent.append(child_tokens)
            turn = len(req.messages) // 2 + 1
            if turn < child_calls:
                return ModelResponse("working", [ToolCall("list_dir", {})], usage=Usage(child_tokens, 0))
            return ModelResponse("part done", usage=Usage(child_tokens, 0))
        spent.append(10)
        if len(req.messages) == 1:
            return ModelResponse("fan out", [spawn(f"part {i}", background=background) for i in range(n)],
                                 usage=Usage(10, 0))
        if background and len(req.messages) == 3:
            return ModelResponse("", [ToolCall("wait", {})], usage=Usage(10, 0))
        return ModelResponse("done", usage=Usage(10, 0))

    return fn


# Before: the first child reserved all that was left of the root's budget, so its siblings were refused
# and the root itself stopped with "limit" at its next call while it had spent 20 of 2,000 tokens.
@pytest.mark.parametrize("background", [False, True])
async def test_siblings_share_the_roots_budget_instead_of_the_first_taking_it_all(workdir: Path,
                                                                                  background: bool) -> None:
    spent: list[int] = []
    fn = fan_out(spent, n=4, child_calls=1, child_tokens=300, background=background)
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        r = await rt.run("go", limits=Limits(max_tokens=2000))
        children = [n for n in rt.manager.nodes.values() if n.depth == 1]
    assert r.outcome is Outcome.OK, r.error
    assert len(children) == 4
    assert all(c.result and c.result.outcome is Outcome.OK for c in children)
    assert sum(spent) == 4 * 300 + (30 if background else 20)


@pytest.mark.parametrize("background", [False, True])
async def test_a_tree_never_spends_more_than_its_roots_budget_plus_the_calls_in_flight(workdir: Path,
                                                                                      background: bool) -> None:
    spent: list[int] = []
    fn = fan_out(spent, n=4, child_calls=100, child_tokens=400, background=background)
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        r = await rt.run("go", limits=Limits(max_tokens=2000))
        children = [n for n in rt.manager.nodes.values() if n.depth == 1]
    assert r.outcome is Outcome.LIMIT
    assert all(c.result and c.result.outcome is Outcome.LIMIT for c in children)
    # the shared pool ran dry: at most one call per agent was already under way when it did
    assert 2000 <= sum(spent) <= 2000 + 400 * len(children) + 10, spent
    assert any("budget, shared by the whole tree below it, is spent" in (c.result.error or "")
               for c in children if c.result), [c.result.error for c in children if c.result]


# Before: ``max_cost_usd`` was silently ignored for a model with no known price.
async def test_a_cost_limit_on_an_unpriced_model_is_refused_at_start(workdir: Path) -> None:
    calls: list[int] = []

    def fn(req: ModelRequest) -> ModelResponse:
        calls.append(1)
        return ModelResponse("hi", usage=Usage(10, 10))

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        with pytest.raises(SpawnError) as e:
            await rt.run("go", limits=Limits(max_cost_usd=0.5))
    msg = str(e.value)
    assert "max_cost_usd" in msg
    assert "price" in msg
    assert "[pricing." in msg
    assert calls == []  # refused before any model call


async def test_a_child_on_an_unpriced_model_under_a_cost_limit_is_refused_with_a_tool_error(workdir: Path) -> None:
    seen: list[str] = []
    child_calls: list[int] = []

    def root(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse("", [spawn("look around", agent_type="explore")], usage=Usage(10, 10))
        seen.append(req.messages[-1].tool_results[0].content)
        return ModelResponse("root done", usage=Usage(10, 10))

    def child(req: ModelRequest) -> ModelResponse:
        child_calls.append(1)
        return ModelResponse("child ran")

    priced = FunctionModel(root, name="priced", prices=Prices(input=1.0, output=1.0))
    async with Runtime(model=priced, workdir=workdir, store="memory://") as rt:
        rt.set_model_override("explore", FunctionModel(child, name="local-llm"))
        r = await rt.run("go", limits=Limits(max_cost_usd=1.0))
    assert r.outcome is Outcome.OK
    assert child_calls == []
    assert "'local-llm' has no known price" in seen[0]
    assert '[pricing."local-llm"]' in seen[0]


# Before: ``rt.wait`` raised "no agent with id" for a finished run that ``rt.runs()`` lists but this
# process had not loaded (``status`` and ``result`` fell back to the store; ``wait`` did not).
async def test_wait_on_a_finished_run_of_an_earlier_process_returns_its_result(workdir: Path) -> None:
    async with sqlite_runtime(workdir, lambda req: "the answer") as rt:
        first = await rt.run("go")
    async with sqlite_runtime(workdir, lambda req: "other") as rt2:
        ids = [rec.run_id for rec in rt2.runs()]
        assert first.id in ids
        got = await rt2.wait([first.id], timeout=5)
        assert got[first.id].text == "the answer"
        assert got[first.id].status is Status.COMPLETED
        with pytest.raises(Exception, match="no agent"):
            await rt2.wait(["0123456789abcdef-not-an-id"])


# Before: ``rt.events()`` subscribed only at its first ``__anext__``: events published between the call
# and the first iteration were lost.
async def test_events_subscribes_when_called(workdir: Path) -> None:
    async with Runtime(model=FunctionModel(lambda req: "hi"), workdir=workdir, store="memory://") as rt:
        stream = rt.events()  # subscribed now
        await rt.run("go")  # every event of this run is published before the first iteration below
        kinds: list[str] = []

        async def consume() -> None:
            async for e in stream:
                kinds.append(e.kind)
                if e.kind == "subagent_completed":
                    return

        await asyncio.wait_for(consume(), 2)
    assert kinds[0] == "subagent_spawned"
    assert kinds[-1] == "subagent_completed"


# Before: resuming an agent gave it back its old nickname even when a live agent had taken it since,
# so two live agents answered to one name and ``send_input`` went to the wrong one.
async def test_a_resumed_agent_never_shares_a_nickname_with_a_live_one(workdir: Path) -> None:
    gate = asyncio.Event()
    got: dict[str, list[str]] = {}

    async def fn(req: ModelRequest) -> ModelResponse:
        who = req.messages[0].text
        texts = [m.text for m in req.messages if m.role == "user"]
        got[who] = texts
        if "stay" in who and not gate.is_set():
            await gate.wait()
        return ModelResponse(f"{who} done")

    scout = AgentDefinition("scout", "looks around", "You look.", nickname_candidates=["scout"])
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", agents=[scout]) as rt:
        a = await rt.spawn("first", agent="scout")
        await rt.wait([a.id])
        assert a.nickname == "scout"
        b = await rt.spawn("stay b", agent="scout")  # before: took the name 'scout' that a's end released
        a2 = await rt.resume(a.id, "again stay")
        live = [s.nickname for s in rt.agents() if not s.status.is_final()]
        assert len(live) == len(set(live)) == 2, live
        assert a2.nickname != b.nickname
        await rt.send_input(b.nickname, "for b only")
        gate.set()
        await rt.wait([a.id, b.id])
    assert any("for b only" in t for t in got["stay b"])


# Before: every root agent of every run was named ``general-purpose-ada``.
async def test_root_agents_of_successive_runs_get_distinct_nicknames(workdir: Path) -> None:
    names = []
    for _ in range(3):
        async with sqlite_runtime(workdir, lambda req: "ok") as rt:
            names.append((await rt.run("go")).nickname)
    assert len(set(names)) == 3, names
