"""``[agents] when_full = "queue"``: background spawns over ``max_threads`` wait for a slot, first in first out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from owner_ids import mine
from subagents import Runtime, SpawnError, Status
from subagents.config import load_settings
from subagents.exceptions import ConfigError
from subagents.messages import Message
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.runtime.runtime import AgentHandle
from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


def spawn(prompt: str, *, background: bool = True) -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": prompt, "description": prompt,
                                    "background": background})


class Children:
    """The children's model: counts how many run at once and the order they start in; ``gate`` holds them.
    A root agent (it holds no slot) idles until the runtime closes it: the tests spawn under it."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.gate = gate
        self.now = 0
        self.peak = 0
        self.started: list[str] = []

    async def __call__(self, req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0:
            await asyncio.Event().wait()
        self.started.append(req.messages[0].text)
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            if self.gate is not None:
                await self.gate.wait()
            for _ in range(3):
                await asyncio.sleep(0)
            return ModelResponse(text=f"done: {req.messages[0].text}")
        finally:
            self.now -= 1


def runtime(workdir: Path, fn: Any, **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", builtin_tools=False, **kw)


async def under_root(rt: Runtime, prompt: str, *, background: bool = True) -> AgentHandle:
    """Spawn a sub-agent (depth 1: it needs a slot) under one idle root agent."""
    roots = [a for a in rt.agents() if a.depth == 0]
    root = roots[0].id if roots else (await rt.spawn("idle root", background=True)).id
    return await rt.spawn(prompt, background=background, parent=root)


async def test_a_queued_child_is_recorded_and_starts_when_a_slot_frees(workdir: Path) -> None:
    gate = asyncio.Event()
    kids = Children(gate)
    events: list[Event] = []
    async with runtime(workdir, kids, max_threads=1, when_full="queue", on_event=events.append) as rt:
        a = await under_root(rt, "a", background=True)
        b = await under_root(rt, "b", background=True)
        assert (a.queued, b.queued) == (False, True)
        for _ in range(5):
            await asyncio.sleep(0)
        assert kids.started == ["a"]
        assert rt.status(b.id) is Status.PENDING_INIT
        assert rt.manager.running_slots == 1
        assert any(e.kind == "subagent_queued" and e.agent_id == b.id and e.data["ahead"] == 0 for e in events)
        gate.set()
        done = await rt.wait([a.id, b.id], timeout=10)
    assert kids.started == ["a", "b"]
    assert done[b.id].text == "done: b"
    assert kids.peak == 1


async def test_queued_children_start_first_in_first_out(workdir: Path) -> None:
    gate = asyncio.Event()
    kids = Children(gate)
    async with runtime(workdir, kids, max_threads=2, when_full="queue") as rt:
        handles = [await under_root(rt, f"t{i}", background=True) for i in range(10)]
        assert [h.queued for h in handles] == [False] * 2 + [True] * 8
        assert [rt.manager.slots.ahead(rt.manager.nodes[h.id]) for h in handles[2:]] == list(range(8))
        gate.set()
        await rt.wait([h.id for h in handles], timeout=10)
    assert kids.started == [f"t{i}" for i in range(10)]
    assert kids.peak == 2


async def test_a_hundred_background_spawns_with_four_threads_all_complete(workdir: Path) -> None:
    kids = Children()
    seen: dict[str, Any] = {}

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            return await kids(req)
        turn = sum(m.role == "assistant" for m in req.messages)
        if turn == 0:
            return ModelResponse(tool_calls=[spawn(f"job {i}") for i in range(100)])
        if turn == 1:
            out = [json.loads(r.content) for r in req.messages[-1].tool_results]
            seen["spawned"] = out
            return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": [o["agent_id"] for o in out]})])
        seen["waited"] = req.messages[-1].tool_results[0].content
        return ModelResponse(text="all done")

    async with runtime(workdir, fn, max_threads=4, when_full="queue") as rt:
        r = await rt.run("fan out")
        assert r.text == "all done"
        assert rt.manager.running_slots == 0
        assert not rt.manager.slots.waiting
    spawned = seen["spawned"]
    assert [o["status"] for o in spawned] == ["running"] * 4 + ["queued"] * 96
    assert spawned[4]["queued"].startswith("queued: 0 agents ahead of it; it starts when a slot frees")
    assert spawned[99]["queued"].startswith("queued: 95 agents ahead of it")
    assert seen["waited"].startswith("[wait: 100 finished, 0 still running")
    assert len(kids.started) == 100
    assert kids.started == [f"job {i}" for i in range(100)]
    assert kids.peak == 4


async def test_closing_a_queued_child_cancels_it_before_it_starts(workdir: Path) -> None:
    gate = asyncio.Event()
    kids = Children(gate)
    async with runtime(workdir, kids, max_threads=1, when_full="queue") as rt:
        a = await under_root(rt, "a", background=True)
        b = await under_root(rt, "b", background=True)
        c = await under_root(rt, "c", background=True)
        d = await under_root(rt, "d", background=True)
        r = await rt.close(b.id)
        assert r.outcome == "cancelled"
        assert r.error == "closed before it started"
        assert rt.manager.slots.ahead(rt.manager.nodes[c.id]) == 0
        gate.set()
        await rt.wait([a.id, c.id, d.id], timeout=10)
        assert kids.started == ["a", "c", "d"]  # b never ran
        assert rt.status(b.id) is Status.SHUTDOWN
        assert rt.manager.running_slots == 0
        assert not rt.manager.slots.waiting


async def test_shutdown_finishes_queued_children_without_running_them(workdir: Path) -> None:
    gate = asyncio.Event()
    kids = Children(gate)
    async with runtime(workdir, kids, max_threads=1, when_full="queue") as rt:
        handles = [await under_root(rt, f"t{i}", background=True) for i in range(4)]
        for _ in range(5):
            await asyncio.sleep(0)
    assert kids.started == ["t0"]
    assert all(rt.manager.nodes[h.id].status.is_final() for h in handles)
    assert not rt.manager.slots.waiting


async def test_a_foreground_spawn_over_the_limit_is_refused_and_says_why(workdir: Path) -> None:
    gate = asyncio.Event()
    kids = Children(gate)
    async with runtime(workdir, kids, max_threads=1, when_full="queue") as rt:
        a = await under_root(rt, "a", background=True)
        with pytest.raises(SpawnError, match="a foreground spawn cannot wait for a slot; run it in the "
                                             "background or wait for one to finish"):
            await under_root(rt, "b", background=False)
        gate.set()
        await rt.wait([a.id], timeout=10)


async def test_a_sub_agent_holding_a_slot_cannot_queue_a_child(workdir: Path) -> None:
    results: list[str] = []
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 2:
            await gate.wait()
            return ModelResponse(text="leaf")
        if req.agent.depth == 1:
            if len(req.messages) == 1:
                return ModelResponse(tool_calls=[spawn("x"), spawn("y")])
            results.extend(r.content for r in req.messages[-1].tool_results)
            gate.set()
            return ModelResponse(text="mid")
        return ModelResponse(text="root")

    async with runtime(workdir, fn, max_threads=2, when_full="queue") as rt:
        mid = await under_root(rt, "mid", background=True)
        await rt.wait([mid.id], timeout=10)
    assert json.loads(results[0])["status"] == "running"
    assert "max_threads=2 reached" in results[1]
    assert "a sub-agent that holds a slot cannot queue a child" in results[1]


async def test_refuse_is_the_default_and_unchanged(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUBAGENTS_WHEN_FULL", raising=False)
    gate = asyncio.Event()
    kids = Children(gate)
    async with runtime(workdir, kids, max_threads=1) as rt:
        assert rt.settings.when_full == "refuse"
        a = await under_root(rt, "a", background=True)
        with pytest.raises(SpawnError) as e:
            await under_root(rt, "b", background=True)
        assert "max_threads=1 reached: 1 sub-agents are running" in str(e.value)
        assert "foreground" not in str(e.value)
        assert not rt.manager.slots.waiting
        gate.set()
        await rt.wait([a.id], timeout=10)


def test_the_setting_comes_from_file_env_and_argument(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUBAGENTS_WHEN_FULL", raising=False)
    assert load_settings(workdir).when_full == "refuse"
    (workdir / ".subagents").mkdir()
    cfg = workdir / ".subagents" / "config.toml"
    cfg.write_text('[agents]\nwhen_full = "queue"\n', encoding="utf-8")
    s = load_settings(workdir)
    assert (s.when_full, s.sources["agents.when_full"]) == ("queue", str(cfg))
    cfg.write_text("", encoding="utf-8")
    s = load_settings(workdir, env={"SUBAGENTS_WHEN_FULL": "queue"})
    assert (s.when_full, s.sources["agents.when_full"]) == ("queue", "env SUBAGENTS_WHEN_FULL")
    rt = runtime(workdir, lambda req: "x", when_full="queue")
    assert (rt.settings.when_full, rt.manager.cfg.when_full, rt.manager.slots.when_full) == ("queue",) * 3


def test_a_bad_value_is_a_clear_error(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUBAGENTS_WHEN_FULL", raising=False)
    with pytest.raises(ConfigError, match="when_full"):
        runtime(workdir, lambda req: "x", when_full="wait")
    (workdir / ".subagents").mkdir()
    (workdir / ".subagents" / "config.toml").write_text('[agents]\nwhen_full = "block"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[agents\] when_full must be one of 'refuse', 'queue', got \"block\""):
        load_settings(workdir)
    (workdir / ".subagents" / "config.toml").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="SUBAGENTS_WHEN_FULL"):
        load_settings(workdir, env={"SUBAGENTS_WHEN_FULL": "later"})


DEAD = mine("vm-that-is-gone:999999999:deadbeef")


async def test_restored_background_runs_beyond_max_threads_queue(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    try:
        s.create_run(RunRecord(run_id="root", agent_id="root", nickname="nick-root", agent_type="general-purpose",
                               task="fan out", status="completed", outcome="ok", owner=DEAD, root_id="root", runs=1,
                               created_at=1.0))
        for i in range(5):
            s.create_run(RunRecord(run_id=f"kid{i}", agent_id=f"kid{i}", nickname=f"nick-{i}",
                                   agent_type="general-purpose", task=f"kid {i}", status="running", owner=DEAD,
                                   root_id="root", parent_id="root", depth=1, background=True, runs=1,
                                   created_at=2.0 + i))
            s.append_messages(f"kid{i}", 0, [Message.user(f"kid {i}")])
    finally:
        s.close()
    kids = Children()
    async with Runtime(model=FunctionModel(kids), workdir=tmp_path, store=f"sqlite:///{db}", builtin_tools=False,
                       max_threads=2, when_full="queue") as rt:
        done = await rt.wait([f"kid{i}" for i in range(5)], timeout=10)
    assert sorted(done) == [f"kid{i}" for i in range(5)]
    assert kids.started == [f"kid {i}" for i in range(5)]
    assert kids.peak == 2
