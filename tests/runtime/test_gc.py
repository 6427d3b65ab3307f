"""The delegation hot path makes no reference cycles: a finished tree is freed by reference counting.

Before: node -> core -> inbox -> the delivery callback's closure -> node kept every agent alive until
a garbage collection (about 150 µs of GC per cycle, and memory that grew between collections).
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents import Runtime, ToolCategory, tool
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

OURS = {"AgentNode", "AgentCore", "AgentInfo", "Inbox", "Budget", "ToolContext", "AgentGuard", "RunResult"}


def script(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse("child done", [ToolCall("list_dir", {})] if len(req.messages) == 1 else [])
    if req.messages[-1].tool_results:
        return ModelResponse("parent done")
    return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "go"})])


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """The garbage made while the test runs: every object alive at its start is held, so that what earlier tests
    of the process left behind (a worker's runtime, a sandbox's modules) cannot become garbage during it."""
    gc.collect()
    held = gc.get_objects()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        del held
        gc.enable()


@pytest.mark.parametrize("store", ["memory://", "sqlite"])
async def test_finished_trees_are_freed_without_the_garbage_collector(workdir: Path, store: str,
                                                                      saved_garbage: list[object]) -> None:
    url = store if store == "memory://" else f"sqlite:///{workdir.parent}/state.db"
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=url) as rt:
        assert rt.manager.retention is not None
        rt.manager.retention.keep_trees = 0  # evict each finished tree at once
        for _ in range(5):
            await rt.run("hi")
        gc.collect()
        saved_garbage.clear()
        for _ in range(20):
            r = await rt.run("hi")
            assert r.text == "parent done"
        gc.collect()
        leaked = sorted({type(o).__name__ for o in saved_garbage} & OURS)
    assert leaked == []


@pytest.mark.parametrize("store", ["memory://", "sqlite"])
async def test_a_closed_runtime_is_freed_by_reference_counting(workdir: Path, store: str,
                                                               saved_garbage: list[object]) -> None:
    """Dropping a closed Runtime frees it and everything it held at once: no cycle leaves it to a full collection."""
    url = store if store == "memory://" else f"sqlite:///{workdir.parent}/state.db"
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=url) as rt:
        for _ in range(3):
            assert (await rt.run("hi")).text == "parent done"
        refs = [weakref.ref(rt), weakref.ref(rt.manager), weakref.ref(rt.manager.tree)]
    del rt
    assert [r() is None for r in refs] == [True, True, True]  # freed with the gc disabled (by the fixture)
    gc.collect()
    assert not {type(o).__name__ for o in saved_garbage} & (OURS | {"Runtime", "AgentManager", "AgentTree"})


async def test_a_runtime_with_a_team_is_freed_by_reference_counting(workdir: Path, saved_garbage: list[object]) -> None:
    """Teams add no cycle: the team service, its tools and the roles' delivery hooks are freed with the runtime."""
    from .team_scripts import LeadAndWorkers

    async with Runtime(model=FunctionModel(LeadAndWorkers(2, 2)), workdir=workdir, store="memory") as rt:
        assert (await rt.run("split", agent="coordinator")).text == "lead done"
        refs = [weakref.ref(rt), weakref.ref(rt.manager), weakref.ref(rt.manager.teams),
                weakref.ref(rt.manager.teams.tools)]
    del rt
    assert [r() is None for r in refs] == [True, True, True, True]
    gc.collect()
    assert not {type(o).__name__ for o in saved_garbage} & (OURS | {"Runtime", "AgentManager", "TeamService",
                                                                    "TeamTools"})


async def test_the_model_response_is_not_kept_while_its_tool_calls_run(workdir: Path) -> None:
    """A turn's tool calls live on as the assistant message's blocks; the response's own ``ToolCall`` objects go
    before the calls run (a burst of 10,000 spawns kept both copies, 10,000 objects more for the collector)."""
    made: set[int] = set()  # ids of the ToolCall objects the model returned (not the objects: that would keep them)
    seen: list[int] = []

    @tool(category=ToolCategory.READ)
    async def probe() -> str:
        """Count the model's ToolCall objects still alive."""
        # (on the event loop, once it has gone round: a sync tool ran in a thread, counting while the loop still held
        # the model call's finished future — and with it the response — in a callback it had not run yet, and the
        # model's worker thread its last answer: flaky; so an inline model and a tool on the loop)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        seen.append(sum(1 for o in gc.get_objects() if type(o) is ToolCall and id(o) in made))
        return "ok"

    def model(req: ModelRequest) -> ModelResponse:
        if req.messages[-1].tool_results:
            return ModelResponse("done")
        calls = [ToolCall("probe", {}) for _ in range(3)]
        made.update(id(c) for c in calls)
        return ModelResponse(tool_calls=calls)

    async with Runtime(model=FunctionModel(model, inline=True), workdir=workdir, store="memory", tools=[probe],
                       builtin_tools=False) as rt:
        assert (await rt.run("go")).text == "done"
    assert seen == [0, 0, 0]
