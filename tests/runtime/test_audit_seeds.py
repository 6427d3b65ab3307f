"""Seed statements the audit (docs/seed-audit.md) found implemented but not shown by a test of their own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from subagents import Outcome, Runtime, Status
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.store.memory import MemoryStore
from subagents.tools import repo_map as repo_map_mod


def spawn(agent_type: str, prompt: str, **kw: Any) -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": agent_type, "prompt": prompt, "description": prompt[:20], **kw})


def last_results(req: ModelRequest) -> list[str]:
    return [r.content for r in req.messages[-1].tool_results]


def runtime(workdir: Path, fn: Any, **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", **kw)


async def test_a_child_stopped_by_its_turn_limit_hands_back_its_partial_work_marked_incomplete(workdir: Path) -> None:
    """Seed 000: "the parent receives a truncated result with an indication that the agent did not complete
    normally"."""
    (workdir / ".subagents" / "agents").mkdir(parents=True)
    (workdir / ".subagents" / "agents" / "looper.md").write_text(
        "---\nname: looper\ndescription: loops\ntools: list_dir\nmax_turns: 2\n---\nYou loop.\n")
    got: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text=f"partial finding {len(req.messages)}", tool_calls=[ToolCall("list_dir", {})])
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("looper", "loop")])
        got.extend(last_results(req))
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
    assert r.outcome is Outcome.OK
    header, rest = got[0].split("\n", 1)
    assert "· looper · status errored · outcome limit (max_turns)" in header
    assert rest.startswith("partial finding 3\n")  # the definition's max_turns: 2 stopped it; its last text kept
    assert rest.endswith("[the agent did not complete normally: Exceeded max_turns=2 (turns=3); the text above is "
                         "its partial work]")


async def test_the_run_record_holds_seed_003s_fields_and_session_keys(workdir: Path) -> None:
    """Seed 003's SubagentRunRecord: runId, childSessionKey ``agent:<type>:subagent:<uuid>``, requesterSessionKey,
    task, cleanup, label, createdAt <= startedAt <= endedAt, outcome."""
    store = MemoryStore()

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="found it")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", "look around", label="Look around", cleanup="delete")])
        return ModelResponse(text="ok")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store=store) as rt:
        root = await rt.run("go")
        child = next(rec for rec in rt.runs() if rec.parent_id == root.id)
    assert child.child_session_key == f"agent:explore:subagent:{child.run_id}"
    assert child.requester_session_key == f"agent:general-purpose:subagent:{root.id}"
    assert (child.task, child.label, child.cleanup, child.status, child.outcome) == (
        "look around", "Look around", "delete", "completed", "ok")
    assert child.started_at is not None
    assert child.ended_at is not None
    assert child.created_at <= child.started_at <= child.ended_at


async def test_status_goes_pending_init_then_running_then_completed(workdir: Path) -> None:
    """Seed 001's status progression: PendingInit -> Running -> Completed, told to the parent as events."""
    events: list[Event] = []
    async with runtime(workdir, lambda req: "ok", on_event=events.append) as rt:
        h = await rt.spawn("x", agent="explore")
        assert rt.status(h.id) is Status.PENDING_INIT  # created, not yet running
        res = await rt.wait([h.id])
        await rt.events_delivered()
    assert res[h.id].status is Status.COMPLETED
    mine = [e for e in events if e.agent_id == h.id]
    assert mine[0].kind == "subagent_spawned"
    assert [e.data["status"] for e in mine if e.kind == "subagent_status_changed"] == ["running", "completed"]
    assert mine[-1].kind == "subagent_completed"


async def test_a_child_works_in_the_parents_filesystem(workdir: Path) -> None:
    """Seed 002: a subagent "shares the filesystem with the parent": what a child writes, the parent reads."""
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            if len(req.messages) == 1:
                return ModelResponse(tool_calls=[ToolCall("write_file", {"path": "notes/found.txt",
                                                                         "content": "pytest\n"})])
            return ModelResponse(text="wrote notes/found.txt")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("general-purpose", "find the test framework")])
        if len(req.messages) == 3:
            return ModelResponse(tool_calls=[ToolCall("read_file", {"path": "notes/found.txt"})])
        return ModelResponse(text=last_results(req)[0])

    async with runtime(workdir, fn, permission_mode="yolo") as rt:
        r = await rt.run("go")
    assert "pytest" in r.text
    assert (workdir / "notes" / "found.txt").read_text() == "pytest\n"


async def test_the_repo_map_index_is_shared_by_parent_and_child(workdir: Path) -> None:
    """Seed 001's ``index`` shared handle: the outline index ``repo_map`` builds is one per process, so a child's
    ``repo_map`` reuses what its parent's call read (no file is parsed again)."""
    (workdir / "pkg").mkdir()
    (workdir / "pkg" / "core.py").write_text("def parse(text):\n    return text\n")
    (workdir / "pkg" / "use.py").write_text("from pkg.core import parse\n\nparse('x')\n")
    outlines: list[str] = []
    reads: list[str] = []
    real = repo_map_mod._entry

    def counting(rel: str, text: str) -> Any:
        reads.append(rel)
        return real(rel, text)

    def fn(req: ModelRequest) -> ModelResponse:
        n = len(req.messages)
        if n == 1:  # parent and child both start with an outline of the project
            return ModelResponse(tool_calls=[ToolCall("repo_map", {})])
        if n == 3:
            outlines.append(last_results(req)[0])
        if req.agent.depth == 0 and n == 3:
            reads.append("-- child --")
            return ModelResponse(tool_calls=[spawn("explore", "outline it")])
        return ModelResponse(text="ok")

    repo_map_mod._entry = counting  # type: ignore[assignment]
    try:
        async with runtime(workdir, fn) as rt:
            await rt.run("go")
    finally:
        repo_map_mod._entry = real
    assert outlines == [outlines[0], outlines[0]]
    assert "def parse(text)" in outlines[0]
    assert sorted(reads[:reads.index("-- child --")]) == ["pkg/core.py", "pkg/use.py"]  # the parent's call read
    assert reads[reads.index("-- child --") + 1:] == []  # the child's repo_map read nothing again


async def test_the_coordinator_runs_its_parts_in_the_background_in_parallel(workdir: Path) -> None:
    """Seed 004: "The coordinator built-in uses [background execution] extensively to parallelize sub-task
    delegation": told so in its prompt, and its background children run at the same time."""
    running = 0
    peak = 0
    all_in = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        nonlocal running, peak
        if req.agent.depth == 1:
            running += 1
            peak = max(peak, running)
            if running == 3:
                all_in.set()
            await asyncio.wait_for(all_in.wait(), 10)  # run one at a time, and this times out
            running -= 1
            return ModelResponse(text=f"part {req.messages[0].text} done")
        if len(req.messages) == 1:
            assert "background=true so they run in parallel" in req.system
            return ModelResponse(tool_calls=[spawn("explore", str(i), background=True) for i in range(3)])
        if len(req.messages) == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        return ModelResponse(text="combined")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("split it", agent="coordinator")
    assert r.text == "combined"
    assert peak == 3
