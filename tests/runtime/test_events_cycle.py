"""What a listener sees of one delegation cycle: the same events, in the same order, with the same fields,
whatever the store, for an ``on_event`` callback and for ``rt.events()`` alike — and a status event only
once the store holds that status.  (Pins the stream while its cost is cut: events built only when someone
listens, one event object for every listener, no gate queued with a store that commits at once.)
A callback may stop listening while an event is delivered: the others still hear that event.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event

SPAWNED = ("subagent_spawned", ["agent_type", "background", "call_id", "label", "model"])
STATUS = ("subagent_status_changed", ["status"])
RUN_START = ("run_start", ["agent_type", "prompt"])
TURN = ("turn_start", ["turn", "usage"])
TEXT = ("assistant_text", ["delta", "text"])
MODEL = ("model_end", ["cost_usd", "model", "response_model", "stop_reason", "tool_calls", "usage"])
RUN_END = ("run_end", ["outcome", "status", "turns", "usage"])
DONE = ("subagent_completed", ["cost_usd", "duration_s", "limit", "outcome", "status", "tool_calls", "truncated",
                               "turns", "usage"])
CYCLE = [
    (0, SPAWNED), (0, STATUS), (0, RUN_START), (0, TURN), (0, MODEL),
    (0, ("tool_start", ["arguments", "call_id", "tool"])),
    (1, SPAWNED), (1, STATUS), (1, RUN_START), (1, TURN), (1, TEXT), (1, MODEL), (1, RUN_END), (1, STATUS), (1, DONE),
    (0, ("tool_end", ["call_id", "duration_s", "is_error", "output", "tool"])),
    (0, TURN), (0, TEXT), (0, MODEL), (0, RUN_END), (0, STATUS), (0, DONE),
]
STATUSES = ["running", "running", "completed", "completed"]  # root, child, child, root


def script(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse("child done")
    if req.messages[-1].tool_results:
        return ModelResponse("parent done")
    return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "go"})])


def shape(events: list[Event]) -> list[tuple[int, tuple[str, list[str]]]]:
    return [(e.depth, (e.kind, sorted(e.data))) for e in events]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_cycle_shows_every_listener_the_same_events_in_order(workdir: Path, store: str) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{workdir.parent}/state.db"
    heard: list[Event] = []
    status_held: list[str | None] = []  # what the store held when each status event arrived

    def listen(e: Event) -> None:
        heard.append(e)
        if e.kind == "subagent_status_changed":
            rec = rt.store.get_run(e.agent_id)
            status_held.append(rec.status if rec is not None else None)

    async with Runtime(model=FunctionModel(script), workdir=workdir, store=url, builtin_tools=False,
                       on_event=listen) as rt:
        stream = rt.events()
        for _ in range(3):
            r = await rt.run("hi")
            assert r.text == "parent done"
        await rt.events_delivered()
        streamed: list[Event] = []
        while len(streamed) < len(heard):
            streamed.append(await asyncio.wait_for(stream.__anext__(), 5))
        await stream.aclose()  # type: ignore[attr-defined]

    assert shape(heard) == CYCLE * 3
    assert streamed == heard
    assert all(a is b for a, b in zip(streamed, heard, strict=True))  # one object for all listeners
    assert [e.data["status"] for e in heard if e.kind == "subagent_status_changed"] == STATUSES * 3
    rank = {"running": 1, "completed": 2}  # never a status the store does not hold (it may hold a later one)
    assert len(status_held) == 12
    pairs = zip(STATUSES * 3, status_held, strict=True)
    assert all(h is not None and rank.get(h, 0) >= rank[w] for w, h in pairs), status_held
    root, child = heard[0], heard[6]
    assert child.parent_id == root.agent_id
    assert root.parent_id is None
    assert child.data["call_id"] == heard[5].data["call_id"]  # the spawn names the call that made it
    assert all(e.nickname for e in heard)
    assert all(e.ts > 0 for e in heard)


async def test_a_callback_can_stop_listening_while_an_event_is_delivered(workdir: Path) -> None:
    first: list[str] = []
    second: list[str] = []
    async with Runtime(model=FunctionModel(script), workdir=workdir, builtin_tools=False) as rt:
        def once(e: Event) -> None:
            first.append(e.kind)
            off()

        off = rt.bus.on(once)
        rt.bus.on(lambda e: second.append(e.kind))
        await rt.run("hi")
    assert first == ["subagent_spawned"]
    assert len(second) == len(CYCLE)  # the other callback heard every event, the first one too


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_watched_cycle_leaves_no_garbage_for_the_collector(workdir: Path, store: str) -> None:
    """Events, gates and the agents of a watched cycle are freed by reference counting (no cycle among them)."""
    url = "memory://" if store == "memory" else f"sqlite:///{workdir.parent}/state.db"
    heard: list[str] = []
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=url, builtin_tools=False,
                       on_event=lambda e: heard.append(e.kind)) as rt:
        for _ in range(3):
            await rt.run("hi")
        await rt.events_delivered()
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(20):
                await rt.run("hi")
            await rt.events_delivered()
            gc.collect()
            garbage = sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("subagents")})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert len(heard) == 23 * len(CYCLE)
    assert garbage == []
