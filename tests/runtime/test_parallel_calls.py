"""Parallel-safe tool calls of one turn: run concurrently, paired by id, cancelled together; the calls that
finish in their first step cost no task (``AgentCore._run_parallel``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents.messages import ToolResultBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.base import FunctionTool, ToolCategory, ToolContext


def _turn(req: ModelRequest) -> int:
    return sum(1 for m in req.messages if m.role == "assistant")


def read_tools(log: list[str], gate: asyncio.Event) -> list[FunctionTool]:
    async def waits(ctx: ToolContext, tag: str) -> str:
        """Wait until ``opens`` ran.

        Args:
            tag: a label.
        """
        log.append(f"start {tag}")
        await gate.wait()
        log.append(f"end {tag}")
        return f"waited {tag}"

    async def opens(ctx: ToolContext, tag: str) -> str:
        """Open the gate.

        Args:
            tag: a label.
        """
        log.append(f"open {tag}")
        gate.set()
        return f"opened {tag}"

    async def instant(ctx: ToolContext, tag: str) -> str:
        """Return at once.

        Args:
            tag: a label.
        """
        log.append(f"instant {tag}")
        return f"instant {tag}"

    async def times_out(ctx: ToolContext, tag: str) -> str:
        """Give up on a slow step after 10 ms (asyncio.timeout inside the tool).

        Args:
            tag: a label.
        """
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        except TimeoutError:
            return f"gave up {tag}"
        return "slept"

    return [FunctionTool(f, category=ToolCategory.READ) for f in (waits, opens, instant, times_out)]


def _runtime(workdir: Path, fn: Any, tools: list[FunctionTool]) -> Runtime:
    return Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory://", builtin_tools=False,
                   tools=tools)


async def test_calls_after_a_waiting_one_run_concurrently_and_results_keep_the_calls_order(workdir: Path) -> None:
    log: list[str] = []
    gate = asyncio.Event()
    seen: list[list[ToolResultBlock]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if _turn(req) == 0:  # the waiting call comes first: only a call started after it can open the gate
            return ModelResponse(tool_calls=[ToolCall("instant", {"tag": "a"}, id="1"),
                                             ToolCall("waits", {"tag": "b"}, id="2"),
                                             ToolCall("instant", {"tag": "c"}, id="3"),
                                             ToolCall("opens", {"tag": "d"}, id="4")])
        seen.append(req.messages[-1].tool_results)
        return ModelResponse(text="done")

    async with _runtime(workdir, fn, read_tools(log, gate)) as rt:
        r = await asyncio.wait_for(rt.run("go"), 5)
    assert r.text == "done"
    (results,) = seen
    assert [(x.tool_use_id, x.content) for x in results] == [
        ("1", "instant a"), ("2", "waited b"), ("3", "instant c"), ("4", "opened d")]
    assert log == ["instant a", "start b", "instant c", "open d", "end b"]  # started in the calls' order


async def test_a_timeout_inside_a_parallel_call_stays_inside_it(workdir: Path) -> None:
    seen: list[list[ToolResultBlock]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if _turn(req) == 0:
            return ModelResponse(tool_calls=[ToolCall("times_out", {"tag": "x"}, id="1"),
                                             ToolCall("times_out", {"tag": "y"}, id="2"),
                                             ToolCall("instant", {"tag": "z"}, id="3")])
        seen.append(req.messages[-1].tool_results)
        return ModelResponse(text="done")

    async with _runtime(workdir, fn, read_tools([], asyncio.Event())) as rt:
        r = await asyncio.wait_for(rt.run("go"), 5)
    assert (r.outcome, r.text) == ("ok", "done")
    assert [x.content for x in seen[0]] == ["gave up x", "gave up y", "instant z"]


async def test_closing_an_agent_cancels_every_call_of_its_parallel_batch(workdir: Path) -> None:
    log: list[str] = []
    gate = asyncio.Event()

    def fn(req: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=[ToolCall("waits", {"tag": "a"}, id="1"),
                                         ToolCall("waits", {"tag": "b"}, id="2")])

    async with _runtime(workdir, fn, read_tools(log, gate)) as rt:
        h = await rt.spawn("go", background=True)
        for _ in range(20):
            await asyncio.sleep(0)
        assert log == ["start a", "start b"]
        r = await rt.close(h.id)
        gate.set()
        for _ in range(20):
            await asyncio.sleep(0)
    assert r.outcome == "cancelled"
    assert log == ["start a", "start b"]  # neither call went on after the close


async def test_background_children_of_one_batch_end_before_the_parents_next_turn(workdir: Path) -> None:
    """With an instant model, children spawned in one batch finish before their parent's next model call
    (as when the calls were tasks the parent awaited): their announcements ride with the tool results."""
    seen: list[Any] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            return ModelResponse(text=f"child {req.messages[0].text}")
        if _turn(req) == 0:
            return ModelResponse(tool_calls=[
                ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"t{i}", "background": True},
                         id=f"c{i}") for i in range(3)])
        seen.append(req.messages[-1])
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory://") as rt:
        assert (await rt.run("go")).text == "done"
    last = seen[0]
    assert [json.loads(b.content)["status"] for b in last.tool_results] == ["running"] * 3
    texts = [b.text for b in last.content if b.kind == "text"]
    assert len(texts) == 3
    assert all("<subagent-notification>" in t for t in texts)


async def test_a_background_spawns_result_is_the_json_of_its_fields(workdir: Path) -> None:
    """The result is written by a template in the common case: byte for byte what json.dumps writes."""
    from subagents import AgentDefinition

    odd = AgentDefinition("odd", "odd names", "You are odd.", nickname_candidates=['zoë "q" \\ \u2603'])
    seen: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            return ModelResponse(text="ok")
        if _turn(req) == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "odd", "prompt": "t",
                                                                      "background": True}, id="c")])
        seen.append(req.messages[-1].tool_results[0].content)
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory://",
                       agents=[odd]) as rt:
        await rt.run("go")
        child = next(a for a in rt.agents() if a.depth == 1)
    (content,) = seen
    assert content == json.dumps({
        "agent_id": child.id, "nickname": 'zoë "q" \\ \u2603', "status": "running", "permission_mode": "default",
        "note": "runs in the background; its result will be announced to you, or collect it with wait"})
