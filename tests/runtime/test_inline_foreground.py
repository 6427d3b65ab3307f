"""A foreground agent runs in the task that waits for it (engines/inline.py): no task of its own, and every
way of stopping it ends the same as when it had one.  Each test here breaks a foreground run mid-flight: the
user's task cancelled, the child closed from outside, the root closed, the runtime shut down, deadlines."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from subagents import Limits, Outcome, Runtime, Status
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def spawn(prompt: str, *, background: bool = False, **kw: Any) -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": prompt, "description": prompt,
                                    "background": background, **kw})


class Script:
    """Root: spawns one foreground child ``fg``; that child spawns a background grandchild ``bg`` and then
    waits for ``gate`` inside its model call; both record what they saw."""

    def __init__(self, *, grandchild: bool = True, **spawn_args: Any) -> None:
        self.spawn_args = spawn_args
        self.gate = asyncio.Event()
        self.child_waiting = asyncio.Event()
        self.grandchild = grandchild
        self.parent_saw: list[str] = []

    async def __call__(self, req: ModelRequest) -> ModelResponse:
        results = req.messages[-1].tool_results
        if req.agent.depth == 0:
            if not results:
                return ModelResponse(tool_calls=[spawn("fg", **self.spawn_args)])
            self.parent_saw.append(results[0].content)
            return ModelResponse(text="parent done")
        if req.messages[0].text == "bg":
            await asyncio.sleep(3600)
            return ModelResponse(text="never")
        if self.grandchild and not results:
            return ModelResponse(tool_calls=[spawn("bg", background=True)])
        self.child_waiting.set()
        await self.gate.wait()
        return ModelResponse(text="child done")


def nodes(rt: Runtime) -> dict[str, Any]:
    by_task = {n.task_text: n for n in rt.manager.nodes.values()}
    return {"root": by_task["go"], "fg": by_task["fg"], **({"bg": by_task["bg"]} if "bg" in by_task else {})}


async def running(rt: Runtime, script: Script) -> tuple[asyncio.Task[Any], dict[str, Any]]:
    """``rt.run("go")`` in a task of its own, once its foreground child waits in its model call."""
    t = asyncio.create_task(rt.run("go"))
    await asyncio.wait_for(script.child_waiting.wait(), 10)
    return t, nodes(rt)


def all_shut_down(n: dict[str, Any]) -> bool:
    return all(v.status is Status.SHUTDOWN for v in n.values())


def not_cancelled() -> None:
    """The test's own task carries no cancellation (none was left behind in it)."""
    me = asyncio.current_task()
    assert me is not None
    assert me.cancelling() == 0


async def test_a_foreground_run_and_its_foreground_child_make_no_task(workdir: Path) -> None:
    script = Script(grandchild=False)
    made: list[str] = []
    loop = asyncio.get_running_loop()

    def factory(lp: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(getattr(coro, "__qualname__", "?"))
        return asyncio.Task(coro, loop=lp, **kw)

    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://") as rt:
        script.gate.set()
        assert (await rt.run("warm up")).text == "parent done"
        loop.set_task_factory(factory)
        try:
            r = await rt.run("go")
        finally:
            loop.set_task_factory(None)
        assert r.text == 'parent done'
        assert r.status is Status.COMPLETED
        assert "child done" in script.parent_saw[-1]
        assert not [m for m in made if "drive" in m], made  # neither the root nor the child had a task
        fg = nodes(rt)["fg"]
        assert fg.status is Status.COMPLETED
        assert fg.task is None


async def test_cancelling_the_users_task_cancels_the_inline_tree_and_closes_background_descendants(
        workdir: Path) -> None:
    script = Script()
    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://") as rt:
        t, n = await running(rt, script)
        assert n["bg"].status is Status.RUNNING
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        for k in ("root", "fg", "bg"):
            assert n[k].status is Status.SHUTDOWN, (k, n[k].status)
            rec = rt.manager.store.get_run(n[k].id)
            assert rec is not None
            assert rec.status == "shutdown", (k, rec)
        assert not script.parent_saw


async def test_closing_the_inline_child_from_outside_gives_its_parent_the_cancelled_result(workdir: Path) -> None:
    script = Script()
    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://") as rt:
        t, n = await running(rt, script)
        closed = await rt.close(n["fg"].id)
        assert closed.outcome is Outcome.CANCELLED
        r = await asyncio.wait_for(t, 10)  # the user's task was not cancelled: its root went on
        assert r.text == 'parent done'
        assert r.status is Status.COMPLETED
        assert "outcome cancelled" in script.parent_saw[0], script.parent_saw
        assert n["bg"].status is Status.SHUTDOWN  # the closed child's subtree went with it
        not_cancelled()


async def test_closing_the_root_from_outside_returns_its_cancelled_result_to_the_caller(workdir: Path) -> None:
    script = Script()
    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://") as rt:
        t, n = await running(rt, script)
        await rt.close(n["root"].id)
        r = await asyncio.wait_for(t, 10)
        assert r.outcome is Outcome.CANCELLED
        assert all_shut_down(n), {k: v.status for k, v in n.items()}
        assert not script.parent_saw


async def test_closing_the_root_while_its_caller_is_cancelled_too_delivers_the_callers_cancel(
        workdir: Path) -> None:
    script = Script()
    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://") as rt:
        t, n = await running(rt, script)
        closing = asyncio.create_task(rt.close(n["root"].id))
        await asyncio.sleep(0)
        t.cancel()  # the caller's own cancel, on top of the one closing the tree
        with pytest.raises(asyncio.CancelledError):
            await t
        await asyncio.wait_for(closing, 10)
        assert all_shut_down(n), {k: v.status for k, v in n.items()}


async def test_shutting_the_runtime_down_ends_a_running_inline_tree(workdir: Path) -> None:
    script = Script()
    rt = Runtime(FunctionModel(script), workdir=workdir, store="memory://")
    t, n = await running(rt, script)
    await asyncio.wait_for(rt.aclose(), 10)
    r = await asyncio.wait_for(t, 10)
    assert r.outcome is Outcome.CANCELLED
    assert all_shut_down(n), {k: v.status for k, v in n.items()}


async def test_the_childs_own_deadline_ends_it_and_its_parent_goes_on(workdir: Path) -> None:
    script = Script(grandchild=False, run_timeout_s=0.2)
    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://") as rt:
        r = await asyncio.wait_for(rt.run("go"), 10)
        assert r.text == "parent done"
        assert "status timeout" in script.parent_saw[0] or "outcome timeout" in script.parent_saw[0], script.parent_saw
        assert nodes(rt)["fg"].result.outcome is Outcome.TIMEOUT
        not_cancelled()


async def test_the_parents_deadline_ends_the_inline_child_with_it(workdir: Path) -> None:
    script = Script()
    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://") as rt:
        r = await asyncio.wait_for(rt.run("go", limits=Limits(timeout_s=0.3)), 10)
        assert r.outcome is Outcome.TIMEOUT
        n = nodes(rt)
        assert n['fg'].status.is_final()
        assert n['fg'].status is not Status.COMPLETED
        assert n["bg"].status.is_final()
        assert not script.parent_saw
        not_cancelled()


async def test_closes_and_cancels_at_random_moments_leave_every_run_ended_and_the_caller_clean(workdir: Path) -> None:
    """A tree two deep (a foreground and a background child at each level, models that sleep 0-2 ms) closed or
    cancelled at random moments: nothing is left running, no cancellation leaks into the caller's task, and the
    caller gets CancelledError only when it was itself cancelled (600 rounds passed while this was written)."""
    rnd = random.Random(13)

    async def fn(req: ModelRequest) -> ModelResponse:
        await asyncio.sleep(rnd.choice([0, 0, 0.0005, 0.002]))
        depth = req.agent.depth
        if depth < 2 and not req.messages[-1].tool_results:
            return ModelResponse(tool_calls=[spawn(f"d{depth + 1}"), spawn(f"b{depth + 1}", background=True)])
        return ModelResponse(text=f"done {depth}")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        for _ in range(60):
            t = asyncio.create_task(rt.run("go"))
            await asyncio.sleep(rnd.random() * 0.01)
            how = rnd.choice(["cancel", "close_root", "close_child", "both", "none"])
            live = [n for n in rt.manager.nodes.values() if not n.status.is_final()]
            roots = [n for n in live if n.parent_id is None]
            kids = [n for n in live if n.depth >= 1]
            if how == "cancel":
                t.cancel()
            elif how == "close_root" and roots:
                await rt.close(roots[-1].id)
            elif how == "close_child" and kids:
                await rt.close(rnd.choice(kids).id)
            elif how == "both" and roots:
                closing = asyncio.create_task(rt.close(roots[-1].id))
                await asyncio.sleep(0)
                t.cancel()
                await closing
            try:
                await asyncio.wait_for(t, 10)
            except asyncio.CancelledError:
                assert how in ("cancel", "both"), how
            not_cancelled()
            for _ in range(5):  # (a background child may spawn its own after a wait began)
                await rt.wait(timeout=10)
            assert all(n.status.is_final() for n in rt.manager.nodes.values()), how


async def test_a_loop_of_instant_runs_leaves_the_event_loop_to_its_other_work(workdir: Path) -> None:
    """Nothing in a run on an instant inline model has to wait, so without a yield a loop of ``rt.run`` calls
    would hold the event loop for as long as it goes on (timers, the store's hand-offs, event subscribers
    starved).  Each run yields once as it ends; a foreground child's end inside the parent's turn does not
    (its parent's turn goes on: its next real model call waits anyway, and the root yields at its end)."""

    def instant(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 and not req.messages[-1].tool_results:
            return ModelResponse(tool_calls=[spawn("fg")])
        return ModelResponse(text="done")

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async with Runtime(FunctionModel(instant, inline=True), workdir=workdir, store="memory://",
                       builtin_tools=False) as rt:
        t = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        for _ in range(20):
            assert (await rt.run("go")).text == "done"
        seen = ticks - before
        t.cancel()
    assert 20 <= seen < 40, seen  # once per run (the child's end inside the parent's turn adds none)
