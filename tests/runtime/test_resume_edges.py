"""Resuming at the edges of the lifecycle (found by trying to break it; each test fails on the code before the fix):
a child closed or interrupted while it waited for a slot, a closed runtime, a tree whose budget is spent, a full
pool, and the clock of a child that waited in the queue."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from subagents import Limits, Runtime, SpawnError, Status, Usage, UserError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def runtime(workdir: Path, fn: Any, store: str = "memory://", **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store=store, builtin_tools=False, **kw)


def user_texts(req: ModelRequest) -> list[str]:
    return [b.text for m in req.messages if m.role == "user" for b in m.content if b.kind == "text"]


def w(coro: Any) -> Any:
    return asyncio.wait_for(coro, 10)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_child_closed_while_queued_is_resumed_with_its_task(workdir: Path, tmp_path: Path, kind: str
                                                                  ) -> None:
    store = "memory://" if kind == "memory" else f"sqlite:///{tmp_path}/s.db"
    seen: list[list[str]] = []
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0:
            await asyncio.Event().wait()  # the root idles: the test spawns under it
        if req.messages[0].text == "blocker":
            await gate.wait()
            return ModelResponse(text="blocker done")
        seen.append(user_texts(req))
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, store=store, max_threads=1, when_full="queue") as rt:
        root = await rt.spawn("root")
        a = await rt.spawn("blocker", parent=root.id)
        b = await rt.spawn("count the python files", parent=root.id)
        assert b.queued
        assert (await w(rt.close(b.id))).error == "closed before it started"
        gate.set()
        await w(rt.wait([a.id]))
        await rt.resume(b.id, "go on")
        assert (await w(rt.wait([b.id])))[b.id].text == "ok"
        await rt.close(root.id)
    assert len(seen) == 1
    assert seen[0][0] == "count the python files\n\ngo on", seen  # was: only "go on"


async def test_a_child_interrupted_in_the_queue_is_resumed_with_its_task_in_a_new_process(workdir: Path,
                                                                                          tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    seen: list[list[str]] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 or req.messages[0].text == "blocker":
            await asyncio.Event().wait()
        seen.append(user_texts(req))
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, store=store, max_threads=1, when_full="queue") as rt:
        root = await rt.spawn("root")
        await rt.spawn("blocker", parent=root.id)
        b = await rt.spawn("count the python files", parent=root.id)
        assert b.queued
        rt.interrupting("SIGTERM")
    async with runtime(workdir, fn, store=store) as rt2:
        assert rt2.result(b.id).outcome == "interrupted"
        await rt2.resume(b.id, "go on")
        await w(rt2.wait([b.id]))
    assert seen[-1][0] == "count the python files\n\ngo on", seen


async def test_resume_on_a_closed_runtime_is_refused(workdir: Path) -> None:
    calls: list[int] = []

    def fn(req: ModelRequest) -> ModelResponse:
        calls.append(len(req.messages))
        return ModelResponse(text=f"answer {len(calls)}")

    rt = runtime(workdir, fn)
    async with rt:
        r = await rt.run("x")
    with pytest.raises(UserError, match="this Runtime is closed; create a new one"):
        await rt.resume(r.id, "again")
    await asyncio.sleep(0.05)
    assert calls == [1]  # was: a model call on the closed runtime, and the stored result replaced
    assert rt.status(r.id) is Status.COMPLETED
    assert rt.result(r.id).text == "answer 1"


async def test_a_child_resumed_after_its_root_ended_stays_in_the_trees_budget(workdir: Path) -> None:
    spent = [0]

    async def fn(req: ModelRequest) -> ModelResponse:
        spent[0] += 100
        if req.agent.depth == 1:
            return ModelResponse(text="working", usage=Usage(80, 20), tool_calls=[ToolCall("list_agents", {})])
        if not any(m.role == "assistant" for m in req.messages):
            return ModelResponse(usage=Usage(80, 20), tool_calls=[ToolCall(
                "spawn_agent", {"agent_type": "general-purpose", "prompt": "k", "description": "k"})])
        return ModelResponse(text="root done", usage=Usage(80, 20))

    async with runtime(workdir, fn) as rt:
        await w(rt.run("go", limits=Limits(max_tokens=500)))
        kid = next(a.id for a in rt.agents() if a.depth == 1)
        assert rt.result(kid).outcome == "limit"
        assert spent[0] == 500
        with pytest.raises(SpawnError, match="cannot resume: the budget it shares with its parent and their tree is "
                                             "used up"):
            await rt.resume(kid, "keep going")  # was: a fresh budget, 4 more turns, 900 tokens for the tree
        assert spent[0] == 500


async def test_a_child_resumed_after_its_root_ended_gets_what_the_tree_has_left(workdir: Path) -> None:
    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="child done", usage=Usage(80, 20))
        if not any(m.role == "assistant" for m in req.messages):
            return ModelResponse(usage=Usage(80, 20), tool_calls=[ToolCall(
                "spawn_agent", {"agent_type": "general-purpose", "prompt": "k", "description": "k"})])
        return ModelResponse(text="root done", usage=Usage(80, 20))

    async with runtime(workdir, fn) as rt:
        assert (await w(rt.run("go", limits=Limits(max_tokens=1000)))).text == "root done"  # 300 spent
        kid = next(a.id for a in rt.agents() if a.depth == 1)
        await rt.resume(kid, "once more")
        res = (await w(rt.wait([kid])))[kid]
    assert res.text == "child done"
    node = rt.manager.nodes[kid]
    assert node.limits.max_tokens == 700  # carved from the root's 1,000 minus the 300 its tree spent


async def test_resume_into_a_full_pool_says_why_in_a_resumes_terms(workdir: Path) -> None:
    gates: dict[str, asyncio.Event] = {}

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0:
            await asyncio.Event().wait()
        await gates.setdefault(req.messages[0].text, asyncio.Event()).wait()
        return ModelResponse(text="done")

    async with runtime(workdir, fn, max_threads=1, when_full="queue") as rt:
        root = await rt.spawn("root")
        a = await rt.spawn("a", parent=root.id)
        gates.setdefault("a", asyncio.Event()).set()
        await w(rt.wait([a.id]))
        b = await rt.spawn("b", parent=root.id)
        with pytest.raises(SpawnError) as e:
            await rt.resume(a.id, "more")
        gates.setdefault("b", asyncio.Event()).set()
        await w(rt.wait([b.id]))
        await rt.close(root.id)
    msg = str(e.value)
    assert "a resumed agent does not wait in the queue for a slot" in msg, msg
    assert "foreground spawn" not in msg, msg
    assert "run it in the background" not in msg, msg


async def test_time_queued_for_a_slot_is_not_the_childs_own(workdir: Path) -> None:
    """A queued child's ``timeout_s`` starts when it starts (it timed out at once, with no model call, before)."""
    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0:
            await asyncio.Event().wait()
        await asyncio.sleep(0.6 if req.messages[0].text == "blocker" else 0.01)
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, max_threads=1, when_full="queue") as rt:
        root = await rt.spawn("root")
        a = await rt.spawn("blocker", parent=root.id)
        b = await rt.spawn("quick job", parent=root.id, limits=Limits(timeout_s=0.5))
        assert b.queued
        res = await w(rt.wait([a.id, b.id]))
        await rt.close(root.id)
    assert (res[b.id].outcome, res[b.id].text) == ("ok", "ok"), (res[b.id].outcome, res[b.id].error)


async def test_time_queued_for_a_slot_still_counts_against_the_parents_deadline(workdir: Path) -> None:
    seen: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0:
            await asyncio.Event().wait()
        seen.append(req.messages[0].text)
        await asyncio.sleep(0.6 if req.messages[0].text == "blocker" else 0.01)
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, max_threads=1, when_full="queue") as rt:
        root = await rt.spawn("root", limits=Limits(timeout_s=0.4))
        a = await rt.spawn("blocker", parent=root.id)
        b = await rt.spawn("quick job", parent=root.id, limits=Limits(timeout_s=5))
        assert b.queued
        res = await w(rt.wait([a.id, b.id]))
    assert res[b.id].outcome == "timeout", (res[b.id].outcome, res[b.id].error)
    assert "quick job" not in seen  # its deadline (its parent's) had passed when its slot came


async def test_a_resumed_run_is_this_processs_before_its_status_says_running(workdir: Path, tmp_path: Path) -> None:
    """A run another (dead) process left final, resumed here: its owner was not rewritten, so once its status said
    running a third process opening the store took it for an orphan and adopted it too (two `runs resume` at once:
    the record counted 3 runs for 2)."""
    from subagents.store.sqlite import SQLiteStore

    store = f"sqlite:///{tmp_path}/s.db"
    async with runtime(workdir, lambda req: ModelResponse(text="ok"), store=store) as rt:
        r = await rt.run("first")
    s = SQLiteStore(tmp_path / "s.db")
    s.update_run(r.id, {"owner": "gone-host:999999999:x"})  # the process that ran it is gone
    s.close()
    async with runtime(workdir, lambda req: ModelResponse(text="again"), store=store) as rt2:
        await rt2.resume(r.id, "more")  # (its task has not run a step yet)
        rt2.store.flush()
        rec = rt2.store.get_run(r.id)
        assert rec is not None
        assert rec.owner == rt2.store.owner  # was: still the dead process's
        assert (await w(rt2.wait([r.id])))[r.id].text == "again"
        rt2.store.flush()
        rec = rt2.store.get_run(r.id)
        assert rec is not None
        assert (rec.runs, rec.owner) == (2, rt2.store.owner)
