"""The span tree of a run: one trace for a root and its children, GenAI names and attributes, cost per agent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from opentelemetry.trace import StatusCode

from subagents import Runtime, Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.models.pricing import Prices
from subagents.telemetry import TelemetryConfig

from .spans_util import Spans, memory_provider

USAGE = Usage(input_tokens=100, output_tokens=10, cache_read_tokens=40)
CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result"}


def _script(child_started: asyncio.Event | None = None):  # type: ignore[no-untyped-def]
    """A root that spawns an explore child in the background, waits for it, and answers; the child lists a dir."""

    async def fn(req: ModelRequest) -> ModelResponse:
        n = len(req.messages)
        if req.agent.depth == 1:
            if n == 1:
                return ModelResponse(tool_calls=[ToolCall("list_dir", {})], usage=USAGE, stop_reason="tool_use")
            return ModelResponse(text="child found 0 files", usage=USAGE, stop_reason="end_turn")
        if n == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "explore", "prompt": "count the files", "description": "count",
                "background": True})], usage=USAGE, stop_reason="tool_use")
        if n == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {})], usage=USAGE, stop_reason="tool_use")
        return ModelResponse(text="the root is done", usage=USAGE, stop_reason="end_turn")

    return fn


def _runtime(workdir: Path, telemetry: TelemetryConfig, store: str = "memory://") -> Runtime:
    return Runtime(model=FunctionModel(_script(), name="scripted", prices=Prices(1.0, 2.0)), workdir=workdir,
                   store=store, telemetry=telemetry)


async def test_a_two_level_run_with_a_background_child_is_one_connected_trace(workdir: Path) -> None:
    provider, exporter = memory_provider()
    async with _runtime(workdir, TelemetryConfig(tracer_provider=provider),
                        f"sqlite:///{workdir.parent / 'state.db'}") as rt:
        result = await rt.run("count the files with a helper")
        await rt.events_delivered()
        child = next(a for a in rt.agents() if a.depth == 1)
        child_result = rt.result(child.id)
    spans = Spans(exporter.get_finished_spans())

    assert len(spans.trace_ids) == 1  # the whole tree, background child included
    root = spans.one("invoke_agent general-purpose")
    kid = spans.one("invoke_agent explore")
    spawn = spans.one("execute_tool spawn_agent")
    assert root.parent is None
    assert spans.parent_of(spawn) is root
    assert spans.parent_of(kid) is spawn  # the child hangs under the call that spawned it
    assert spans.parent_of(spans.one("execute_tool wait")) is root
    assert spans.parent_of(spans.one("execute_tool list_dir")) is kid
    chats = spans.named("chat scripted")
    assert len(chats) == 5  # 3 root turns, 2 child turns
    assert sorted(spans.parent_of(c).name for c in chats) == [  # type: ignore[union-attr]
        "invoke_agent explore", "invoke_agent explore", "invoke_agent general-purpose",
        "invoke_agent general-purpose", "invoke_agent general-purpose"]
    # the background child outlives its spawn call; every span ends after it starts
    assert spawn.end_time is not None
    assert kid.end_time is not None
    assert kid.start_time is not None
    assert kid.start_time >= spawn.start_time  # type: ignore[operator]
    assert all(s.start_time is not None and s.end_time is not None and s.start_time <= s.end_time
               for s in spans.spans)

    assert dict(root.attributes or {}) | {} == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "general-purpose",
        "gen_ai.agent.id": result.id, "gen_ai.request.model": "scripted", "subagents.nickname": result.nickname,
        "subagents.depth": 0, "subagents.background": False, "subagents.outcome": "ok",
        "subagents.status": "completed", "subagents.turns": 3, "subagents.tool_calls": 2,
        "gen_ai.usage.input_tokens": 300, "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 120, "subagents.cost_usd": result.cost_usd,
    }
    assert child_result is not None
    assert child_result.cost_usd is not None
    assert child_result.cost_usd > 0
    k = kid.attributes or {}
    assert (k["gen_ai.agent.id"], k["subagents.parent_id"], k["subagents.background"], k["subagents.cost_usd"],
            k["gen_ai.usage.input_tokens"]) == (child.id, result.id, True, child_result.cost_usd, 200)
    first_chat = min(chats, key=lambda c: c.start_time or 0)
    assert dict(first_chat.attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted", "subagents.turn": 1,
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 40, "gen_ai.response.finish_reasons": ("tool_use",),
        "subagents.cost_usd": (60 * 1.0 + 40 * 1.0 + 10 * 2.0) / 1e6,
    }
    costs = [(c.attributes or {})["subagents.cost_usd"] for c in chats]
    assert sum(x for x in costs if isinstance(x, float)) == pytest.approx(
        (result.cost_usd or 0) + child_result.cost_usd)
    assert (spawn.attributes or {})["gen_ai.tool.name"] == "spawn_agent"
    assert (spawn.attributes or {})["gen_ai.operation.name"] == "execute_tool"
    assert not spans.attribute_keys() & CONTENT_KEYS  # no prompt or answer text unless asked


async def test_content_is_captured_only_when_asked(workdir: Path) -> None:
    provider, exporter = memory_provider()
    async with _runtime(workdir, TelemetryConfig(tracer_provider=provider, capture_content=True)) as rt:
        await rt.run("count the files with a helper")
        await rt.events_delivered()
    spans = Spans(exporter.get_finished_spans())
    root = spans.one("invoke_agent general-purpose").attributes or {}
    assert json.loads(str(root["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "the root is done"}]}]
    assert json.loads(str(root["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "count the files with a helper"}]}]
    spawn = spans.one("execute_tool spawn_agent").attributes or {}
    assert json.loads(str(spawn["gen_ai.tool.call.arguments"]))["prompt"] == "count the files"
    assert json.loads(str(spawn["gen_ai.tool.call.result"]))["status"] == "running"
    last_chat = max(spans.named("chat scripted"), key=lambda s: s.start_time or 0)
    assert "the root is done" in str((last_chat.attributes or {})["gen_ai.output.messages"])


async def test_a_resumed_root_joins_its_first_trace(workdir: Path) -> None:
    provider, exporter = memory_provider()
    async with Runtime(model=FunctionModel(lambda req: "ok"), workdir=workdir, store="memory://",
                       telemetry=TelemetryConfig(tracer_provider=provider)) as rt:
        first = await rt.run("one")
        await rt.resume(first.id, "two")
        await rt.wait([first.id])
        await rt.events_delivered()
    spans = Spans(exporter.get_finished_spans())
    runs = sorted(spans.named("invoke_agent general-purpose"), key=lambda s: s.start_time or 0)
    assert len(runs) == 2
    assert len(spans.trace_ids) == 1
    assert runs[0].parent is None
    assert spans.parent_of(runs[1]) is runs[0]


async def test_a_resumed_child_hangs_under_the_call_that_spawned_it(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 and len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "explore", "prompt": "look", "description": "look"})])
        return ModelResponse(text="done")

    provider, exporter = memory_provider()
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://",
                       telemetry=TelemetryConfig(tracer_provider=provider)) as rt:
        await rt.run("go")
        child = next(a for a in rt.agents() if a.depth == 1)
        await rt.resume(child.id, "look again")
        await rt.wait([child.id])
        await rt.events_delivered()
    spans = Spans(exporter.get_finished_spans())
    spawn = spans.one("execute_tool spawn_agent")
    kids = spans.named("invoke_agent explore")
    assert len(kids) == 2
    assert [spans.parent_of(k) for k in kids] == [spawn, spawn]
    assert len(spans.trace_ids) == 1


async def test_parallel_spawns_each_hang_under_their_own_call(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 and len(req.messages) == 1:
            return ModelResponse(tool_calls=[
                ToolCall("spawn_agent", {"agent_type": t, "prompt": f"task for {t}", "description": t})
                for t in ("explore", "plan")])
        return ModelResponse(text=f"{req.agent.agent_type} done")

    provider, exporter = memory_provider()
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://",
                       telemetry=TelemetryConfig(tracer_provider=provider)) as rt:
        await rt.run("go")
        await rt.events_delivered()
    spans = Spans(exporter.get_finished_spans())
    calls = {(s.attributes or {})["gen_ai.tool.call.id"]: s for s in spans.named("execute_tool spawn_agent")}
    assert len(calls) == 2
    for t in ("explore", "plan"):
        parent = spans.parent_of(spans.one(f"invoke_agent {t}"))
        assert parent is not None
        assert parent.name == "execute_tool spawn_agent"
    assert spans.parent_of(spans.one("invoke_agent explore")) is not spans.parent_of(spans.one("invoke_agent plan"))


async def test_a_run_resumed_by_another_process_joins_its_trace_from_the_store(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 and len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "explore", "prompt": "look", "description": "look"})])
        return ModelResponse(text="done")

    store = f"sqlite:///{workdir.parent / 'state.db'}"
    provider, exporter = memory_provider()
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store=store,
                       telemetry=TelemetryConfig(tracer_provider=provider)) as rt:
        await rt.run("go")
        child = next(a for a in rt.agents() if a.depth == 1)
        await rt.events_delivered()
    spawn = Spans(exporter.get_finished_spans()).one("execute_tool spawn_agent")
    assert spawn.context is not None

    provider2, exporter2 = memory_provider()  # a new process: nothing in memory, the store has the context
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store=store,
                       telemetry=TelemetryConfig(tracer_provider=provider2)) as rt2:
        await rt2.resume(child.id, "look again")
        await rt2.wait([child.id])
        await rt2.events_delivered()
    again = Spans(exporter2.get_finished_spans()).one("invoke_agent explore")
    assert again.context is not None
    assert again.parent is not None
    assert (again.context.trace_id, again.parent.span_id) == (spawn.context.trace_id, spawn.context.span_id)
    assert (again.attributes or {})["gen_ai.agent.id"] == child.id


async def test_failures_mark_their_spans(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("read_file", {"path": "missing.txt"})])
        raise ValueError("the scripted model broke")

    provider, exporter = memory_provider()
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://",
                       telemetry=TelemetryConfig(tracer_provider=provider)) as rt:
        result = await rt.run("read it")
        await rt.events_delivered()
    assert result.outcome == "error"
    spans = Spans(exporter.get_finished_spans())
    tool = spans.one("execute_tool read_file")
    assert (tool.status.status_code, (tool.attributes or {})["error.type"]) == (StatusCode.ERROR, "tool_error")
    ok_chat, bad_chat = sorted(spans.named("chat function"), key=lambda s: s.start_time or 0)
    assert ok_chat.status.status_code is StatusCode.UNSET
    assert (bad_chat.status.status_code, bad_chat.status.description) == (
        StatusCode.ERROR, "ValueError: the scripted model broke")
    run = spans.one("invoke_agent general-purpose")
    assert (run.status.status_code, (run.attributes or {})["error.type"]) == (StatusCode.ERROR, "error")
