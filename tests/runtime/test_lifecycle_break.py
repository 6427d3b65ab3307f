"""The sub-agent lifecycle tools as an adversarial model uses them: reach, references, waits, labels, budgets."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from subagents import Limits, Runtime, SpawnError
from subagents.exceptions import LimitExceeded
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.control import LABEL_MAX
from subagents.runtime.limits import Budget
from subagents.store import RunRecord


def runtime(workdir: Path, fn: Any, **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", builtin_tools=False, **kw)


def bg(prompt: str, **kw: Any) -> ToolCall:
    return ToolCall("spawn_agent", {"prompt": prompt, "background": True, **kw})


def last_results(req: ModelRequest) -> list[str]:
    return [r.content for r in req.messages[-1].tool_results]


async def test_an_agent_of_another_tree_is_unknown_and_its_id_is_not_shown(workdir: Path) -> None:
    gate = asyncio.Event()
    said: list[str] = []
    other: dict[str, str] = {}

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.messages[0].text in ("other root", "other child"):
            await gate.wait()
            return ModelResponse(text="other")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("close_agent", {"agent_id": other["nickname"]})])
        said.extend(last_results(req))
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        root = await rt.spawn("other root", background=True)
        kid = await rt.spawn("other child", parent=root.id, background=True)
        other.update(nickname=kid.nickname)
        await rt.run("mine")
        gate.set()
    assert said == [f"no agent with id or nickname {kid.nickname!r}; call list_agents to see the agents you can reach"]


async def test_a_short_id_names_the_callers_own_child_whatever_other_trees_hold(workdir: Path) -> None:
    gate = asyncio.Event()
    said: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.messages[0].text == "other":
            await gate.wait()
            return ModelResponse(text="other")
        if req.agent.depth == 1:
            return ModelResponse(text="mine done")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[bg("mine")])
        if len(req.messages) == 3:  # ids are time-ordered: their first 8 characters are shared by the other tree's
            prefix = json.loads(last_results(req)[0])["agent_id"][:8]
            return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": [prefix]})])
        said.extend(last_results(req))
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        await rt.spawn("other", background=True)
        await rt.run("root")
        gate.set()
    assert said[0].startswith("[wait: 1 finished, 0 still running; timed_out=false]")


async def test_wait_takes_each_agent_once_however_often_it_is_named(workdir: Path) -> None:
    release = asyncio.Event()
    said: list[str] = []
    child: dict[str, str] = {}

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await release.wait()
            return ModelResponse(text="child findings")
        n = len(req.messages)
        if n == 1:
            return ModelResponse(tool_calls=[bg("child")])
        if n == 3:
            child.update(json.loads(last_results(req)[0]))
            ids = [child["agent_id"], child["nickname"]] * 50_000
            return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": ids, "timeout_s": 0.01})])
        said.extend(last_results(req))
        if n == 5:
            release.set()
            return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": [child["agent_id"]] * 3})])
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        await rt.run("root")
    timed_out, finished = said
    assert timed_out.startswith("[wait: 0 finished, 1 still running (timed out after 0.01s): general-purpose-")
    assert timed_out.endswith("); timed_out=true]")
    assert timed_out.count("general-purpose-") == 1
    assert finished.startswith("[wait: 1 finished, 0 still running; timed_out=false]")
    assert finished.count("child findings") == 1


async def test_a_label_is_one_line_of_printable_text_and_a_description_is_cut_to_label_size(workdir: Path) -> None:
    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="ok")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[bg("a", label="\x1b[2J\x1b]0;pwned\x07scan\x00 the\u202etests\u2028now"),
                                             bg("b", description="describe\n" * 10_000),
                                             bg("line one\nline two\x1b[31m")])
        if len(req.messages) == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        await rt.run("root")
        labels = {a.label[:1]: a.label for a in rt.agents() if a.depth == 1}
    assert labels["["] == "[2J ]0;pwned scan the tests now"
    assert len(labels["d"]) == LABEL_MAX
    assert labels["d"].startswith("describe describe ")
    assert labels["d"].endswith("…")
    assert labels["l"] == "line one line two [31m"


async def test_an_announcement_reaches_a_parent_that_is_being_resumed(workdir: Path) -> None:
    release = asyncio.Event()
    second_run: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await release.wait()
            return ModelResponse(text="child findings")
        n = len(req.messages)
        if n == 1:
            return ModelResponse(tool_calls=[bg("child")])
        if n == 3:
            return ModelResponse(text="first run done")
        second_run.extend(m.text for m in req.messages[4:])
        return ModelResponse(text="second run done")

    async with runtime(workdir, fn) as rt:
        first = await rt.run("root")
        release.set()  # the child ends just as its parent is resumed, before the parent's run is under way
        h = await rt.resume(first.id, "continue")
        await rt.wait([h.id], timeout=5)
        left = rt.manager.nodes[first.id].followups_
    assert any("child findings" in t and "<subagent-notification>" in t for t in second_run)
    assert not left


async def test_resuming_a_child_after_its_trees_deadline_is_refused_like_a_spent_budget(workdir: Path) -> None:
    calls: list[int] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        calls.append(req.agent.depth)
        if req.agent.depth == 1:
            return ModelResponse(text="child")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "child"})])
        return ModelResponse(text="root done")

    async with runtime(workdir, fn) as rt:
        await rt.run("root", limits=Limits(timeout_s=0.3))
        kid = next(a for a in rt.agents() if a.depth == 1)
        await asyncio.sleep(0.4)
        with pytest.raises(SpawnError) as e:
            await rt.resume(kid.id, "more")
    assert str(e.value).startswith("cannot resume: the budget it shares with its parent and their tree is used up "
                                   "(Exceeded timeout_s=0.3 (timeout=")
    assert calls == [0, 1, 0]


def test_a_budget_past_its_deadline_carves_nothing() -> None:
    parent = Budget(Limits(timeout_s=5.0), now=time.monotonic() - 10)
    child = Budget(Limits(), parent=parent)
    with pytest.raises(LimitExceeded) as e:
        child.carve(Limits(max_turns=3))
    assert e.value.limit == "timeout_s"
    assert "its parent's budget, shared by the whole tree below it, is spent" in str(e.value)


def test_restart_starts_the_clock_again_under_the_parents_deadline() -> None:
    parent = Budget(Limits(timeout_s=100.0), now=1_000.0)
    child = Budget(Limits(timeout_s=10.0), parent=parent, now=1_000.0)
    child.restart(now=1_050.0)
    assert (child.started, child.deadline, child.inherited) == (1_050.0, 1_060.0, False)
    child.restart(now=1_095.0)
    assert (child.deadline, child.inherited) == (1_100.0, True)


async def test_list_agents_of_a_big_tree_fits_one_output_and_keeps_the_capacity_line(workdir: Path) -> None:
    ready = asyncio.Event()
    said: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            if req.messages[0].text == "busy":
                await asyncio.Event().wait()
            return ModelResponse(text="ok")
        if len(req.messages) == 1:
            await ready.wait()
            return ModelResponse(tool_calls=[ToolCall("list_agents", {})])
        said.extend(last_results(req))
        return ModelResponse(text="done")

    async with runtime(workdir, fn, max_threads=1_000) as rt:
        root = await rt.spawn("root", background=True)
        for i in range(600):
            await rt.spawn(f"child {i}", parent=root.id, background=True)
        busy = await rt.spawn("busy", parent=root.id, background=True)
        await asyncio.sleep(0.05)
        ready.set()
        await rt.wait([root.id], timeout=10)
        await rt.close(busy.id)
    lines = said[0].splitlines()
    assert len(said[0]) < 50_000
    assert "[you]" in lines[0]
    assert f"({busy.id}) type=general-purpose status=running" in said[0]
    assert lines[-2].startswith("[")
    assert "more agents of this tree not shown" in lines[-2]
    assert lines[-1].startswith("capacity: ")


async def test_a_call_of_the_same_turn_starts_no_agent_under_a_parent_being_closed(workdir: Path) -> None:
    go = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.messages[0].text == "parent" and len(req.messages) == 1:
            await go.wait()  # its turn's calls and the close below are woken together: the two background spawns,
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "slow"}), bg("late 1"),  # started
                                             bg("late 2")])  # as tasks behind the foreground one, run after close
        await asyncio.Event().wait()  # began: they found their parent being closed
        return ModelResponse(text="never")

    async with runtime(workdir, fn) as rt:
        root = await rt.spawn("root", background=True)
        parent = await rt.spawn("parent", parent=root.id, background=True)
        await asyncio.sleep(0.01)

        async def close_it() -> None:
            await go.wait()
            await rt.close(parent.id)

        closing = asyncio.create_task(close_it())
        await asyncio.sleep(0)
        go.set()
        await closing
        await asyncio.sleep(0.01)
        left = [a.label for a in rt.agents() if a.depth == 2 and not a.status.is_final()]
        slots = rt.manager.running_slots
    assert left == []
    assert slots == 0


async def test_waiting_on_a_stored_run_whose_owner_died_returns_without_it(workdir: Path) -> None:
    async with runtime(workdir, lambda req: ModelResponse(text="x")) as rt:
        rt.store.create_run(RunRecord(run_id="orphan-run", agent_id="orphan-run", nickname="orphan",
                                      agent_type="general-purpose", task="t", status="running",
                                      owner="gone-host:1:token", created_at=time.time()))
        rt.store.flush()
        got = await asyncio.wait_for(rt.wait(["orphan-run"]), 5)  # (it polled forever: no one will finish it)
    assert got == {}


async def test_foreground_children_nest_as_deep_as_max_depth_allows(workdir: Path) -> None:
    deepest: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        d = req.agent.depth
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": f"level {d + 1}"})])
        if d == 100:
            deepest.append(req.messages[-1].tool_results[0].content)
        return ModelResponse(text=f"level {d} done")

    async with runtime(workdir, fn, max_depth=100, max_threads=110) as rt:
        r = await rt.run("level 0")
    assert r.text == "level 0 done"
    assert deepest[0].startswith("tool 'spawn_agent' is not available to agent type 'general-purpose'")


async def test_a_grandchild_is_not_resumed_under_a_child_being_closed_in_the_same_turn(workdir: Path) -> None:
    ids: dict[str, str] = {}
    said: list[str] = []
    resumed, ended = asyncio.Event(), asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        task, n = req.messages[0].text, len(req.messages)
        if task == "root" and n == 1:
            return ModelResponse(tool_calls=[bg("child")])
        if task == "root" and n == 3:
            ids["child"] = json.loads(last_results(req)[0])["agent_id"]
            await ended.wait()
            return ModelResponse(tool_calls=[ToolCall("close_agent", {"agent_id": ids["child"]}),
                                             ToolCall("resume_agent", {"agent_id": ids["grandchild"],
                                                                       "message": "go"})])
        if task == "root":
            said.extend(last_results(req))
            return ModelResponse(text="root done")
        if task == "child" and n == 1:
            return ModelResponse(tool_calls=[bg("grandchild")])
        if task == "child":
            await asyncio.sleep(0.05)  # the grandchild has ended
            ids["grandchild"] = json.loads(req.messages[2].tool_results[0].content)["agent_id"]
            ended.set()
            await asyncio.Event().wait()
        if n > 1:  # the grandchild resumed: it would run on under its closed parent, its status already final
            resumed.set()
        return ModelResponse(text="grandchild done")

    async with runtime(workdir, fn) as rt:
        await rt.run("root")
    assert said[1] == (f"{rt.manager.nodes[ids['child']].nickname}, the parent of "
                       f"{rt.manager.nodes[ids['grandchild']].nickname} (or its ancestor), is being closed: "
                       f"{rt.manager.nodes[ids['grandchild']].nickname} is not resumed under it; wait for the close "
                       "to end, then resume it")
    assert not resumed.is_set()


async def test_a_python_spawn_under_a_parent_being_closed_is_refused(workdir: Path) -> None:
    """``rt.spawn(parent=X)`` while X is being closed: the close already cancelled X's subtree, so an agent started
    now would run on under a closed parent, holding a slot."""
    async def fn(req: ModelRequest) -> ModelResponse:
        await asyncio.Event().wait()
        return ModelResponse(text="never")

    async with runtime(workdir, fn) as rt:
        root = await rt.spawn("root", background=True)
        parent = await rt.spawn("parent", parent=root.id, background=True)
        await asyncio.sleep(0.01)
        closing = asyncio.create_task(rt.close(parent.id))
        await asyncio.sleep(0)  # the close has begun (its subtree is being cancelled)
        with pytest.raises(SpawnError, match="is being closed: no agent starts under it"):
            await rt.spawn("late", parent=parent.id, background=True)
        await closing


async def test_a_queued_childs_clock_starts_when_it_runs_even_after_a_message_reached_it(workdir: Path) -> None:
    """With ``when_full="queue"``, a ``send_input`` to a child still waiting for a slot built its loop, and with it
    its clock: queued longer than its own ``timeout_s``, it ended "timeout" without one model call."""
    gate = asyncio.Event()
    seen: list[list[str]] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0:
            await asyncio.Event().wait()
        if req.messages[0].text == "a":
            await gate.wait()
            return ModelResponse(text="a done")
        seen.append([m.text for m in req.messages])
        return ModelResponse(text="b done")

    async with runtime(workdir, fn, max_threads=1, when_full="queue") as rt:
        root = await rt.spawn("root", background=True)
        await rt.spawn("a", parent=root.id, background=True)
        b = await rt.spawn("b", parent=root.id, background=True, limits=Limits(timeout_s=0.5))
        assert b.queued
        await rt.send_input(b.id, "extra")
        await asyncio.sleep(0.7)  # queued for longer than its own timeout
        gate.set()
        done = await rt.wait([b.id], timeout=10)
    assert (done[b.id].outcome.value, done[b.id].text) == ("ok", "b done")
    assert seen[0][0] == "b"  # it ran its task (not ended at once by a clock started while it was queued)
    assert any("extra" in text for msgs in seen for text in msgs)  # and the message reached it


async def test_a_runtime_whose_restore_fails_closes_its_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ``async with`` does not call __aexit__ when __aenter__ raises: the SQLite writer process and the store stayed
    # open (a shipped store with a row that cannot be read fails the restore).
    from subagents.exceptions import StoreError
    from subagents.runtime import runtime as runtime_module

    def broken(*args: Any, **kwargs: Any) -> None:
        raise StoreError("the run store is damaged")

    monkeypatch.setattr(runtime_module, "restore_runs", broken)
    rt = Runtime(FunctionModel(lambda req: "x"), workdir=tmp_path, store=f"sqlite:///{tmp_path / 'state.db'}")
    with pytest.raises(StoreError, match="damaged"):
        async with rt:
            pass
    proc = rt.store._w.proc  # type: ignore[attr-defined]
    assert proc is None or proc.poll() is not None
    assert rt.store._closed  # type: ignore[attr-defined]
