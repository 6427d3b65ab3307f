"""Seed 003's announce flow: spawn_agent's label / cleanup / run_timeout_s, the trigger message, NO_REPLY,
``[announce] steer`` and a definition's ``background: true``."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from subagents import AgentDefinition, Outcome, Runtime, Usage
from subagents.config import Settings
from subagents.exceptions import ModelError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.result import RunResult

STATS = re.compile(r"Stats: runtime \d+\.\ds • tokens 1\.5k \(in 1\.2k / out 300\) • est n/a\n")
INSTRUCTION = ("Summarize this naturally for the user. Keep it brief (1-2 sentences).\n"
               "Do not mention technical details like tokens or stats.\n"
               "You can respond with NO_REPLY if no announcement is needed.\n</subagent-notification>")


def spawn(prompt: str, **kw: Any) -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": prompt, **kw})


def runtime(workdir: Path, fn: Any, **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", **kw)


def user_texts(req: ModelRequest) -> list[str]:
    return [b.text for m in req.messages if m.role == "user" for b in m.content if b.kind == "text"]


async def announced(workdir: Path, child: Any, **spawn_args: Any) -> tuple[str, RunResult]:
    """A parent spawns one background child, then calls a tool until the announcement reaches it."""
    seen: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return await child(req)
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("look around", background=True, **spawn_args)])
        notes = [t for t in user_texts(req) if "<subagent-notification>" in t]
        if not notes:
            await asyncio.sleep(0.01)
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        seen.extend(notes)
        return ModelResponse(text="parent done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
    assert r.outcome is Outcome.OK, r.error
    assert len(seen) == 1
    return seen[0], r


async def test_trigger_message_has_the_seeds_content(workdir: Path) -> None:
    async def child(req: ModelRequest) -> ModelResponse:
        return ModelResponse(text="found 3 TODOs", usage=Usage(1200, 300))

    text, _ = await announced(workdir, child, label="TODO hunt", description="scan")
    head, rest = text.split("\n\n", 1)
    assert re.fullmatch(r'<subagent-notification>\nA background task "TODO hunt" '
                        r"\(general-purpose-\w+, id [0-9a-f-]+\) just completed successfully\.", head), head
    assert rest.startswith("Findings:\nfound 3 TODOs\n\n")
    assert STATS.search(rest), rest
    assert rest.endswith(INSTRUCTION)


async def test_no_output_and_the_description_as_the_default_label(workdir: Path) -> None:
    async def child(req: ModelRequest) -> ModelResponse:
        return ModelResponse(text="", usage=Usage(1200, 300))

    text, _ = await announced(workdir, child, description="quiet scan")
    assert 'A background task "quiet scan" (' in text
    assert "Findings:\n(no output)\n\n" in text


async def test_a_failed_child_is_announced_as_failed_with_its_reason(workdir: Path) -> None:
    async def child(req: ModelRequest) -> ModelResponse:
        raise ModelError("provider said no", provider="test")

    text, _ = await announced(workdir, child, label="doomed")
    assert 'A background task "doomed" (' in text
    assert "just failed.\nReason: " in text
    assert "provider said no" in text


async def test_run_timeout_s_stops_the_child_and_it_is_announced_as_timed_out(workdir: Path) -> None:
    async def child(req: ModelRequest) -> ModelResponse:
        await asyncio.sleep(30)
        return ModelResponse(text="never")

    text, _ = await announced(workdir, child, label="slow", run_timeout_s=0.2)
    assert "just timed out.\nReason: Exceeded timeout_s=0.2" in text


async def test_a_child_closed_from_outside_is_announced_as_cancelled(workdir: Path) -> None:
    started = asyncio.Event()
    seen: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            started.set()
            await asyncio.sleep(30)
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("wait forever", background=True, label="stuck")])
        notes = [t for t in user_texts(req) if "<subagent-notification>" in t]
        if not notes:
            await asyncio.sleep(0.01)
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        seen.extend(notes)
        return ModelResponse(text="ok")

    async with runtime(workdir, fn) as rt:
        run = asyncio.create_task(rt.run("go"))
        await started.wait()
        child = next(a for a in rt.agents() if a.depth == 1)
        await rt.close(child.id)
        assert (await run).outcome is Outcome.OK
    assert len(seen) == 1
    assert 'A background task "stuck" (' in seen[0]
    assert ") just was cancelled.\nReason: closed before it finished." in seen[0]


async def test_label_and_cleanup_reach_the_record(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="done")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("a task", label="  the\nlabel  ", cleanup="delete")])
        return ModelResponse(text="parent done")

    async with runtime(workdir, fn) as rt:
        await rt.run("go")
        child = next(a for a in rt.agents() if a.depth == 1)
        assert child.label == "the label"
        rec = rt.store.get_run(child.id)
        assert rec is not None
        assert rec.cleanup == "delete"
        assert rec.label == "the label"


@pytest.mark.parametrize(("args", "said"), [
    ({"cleanup": "trash"}, "cleanup"),
    ({"run_timeout_s": -1}, "run_timeout_s"),
    ({"run_timeout_s": 0}, "run_timeout_s"),
    ({"label": "x" * 500}, "label is 500 characters"),
    ({"model": "nosuch:model"}, "unknown model provider 'nosuch'"),
    ({"model": "openai:gpt-4.1@http://evil.example"}, "names a server"),
])
async def test_bad_arguments_are_tool_errors(workdir: Path, args: dict[str, Any], said: str) -> None:
    results: list[tuple[bool, str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="should not run")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("a task", **args)])
        results.extend((r.is_error, r.content) for r in req.messages[-1].tool_results)
        return ModelResponse(text="parent done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
        assert r.outcome is Outcome.OK
        assert [a for a in rt.agents() if a.depth == 1] == []
    assert len(results) == 1
    assert results[0][0], results
    assert said in results[0][1]


async def test_a_no_reply_answer_is_silent(workdir: Path) -> None:
    async def child(req: ModelRequest) -> ModelResponse:
        return ModelResponse(text="nothing new", usage=Usage(1200, 300))

    seen: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return await child(req)
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("check", background=True)])
        if not any("<subagent-notification>" in t for t in user_texts(req)):
            await asyncio.sleep(0.01)
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        seen.append("x")
        return ModelResponse(text=" NO_REPLY\n")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
    assert seen
    assert r.silent
    assert r.to_dict()["silent"] is True
    assert RunResult.from_dict(r.to_dict()).silent


def test_only_exactly_no_reply_is_silent() -> None:
    from subagents import Status

    def res(text: str) -> RunResult:
        return RunResult("i", "n", "a", Status.COMPLETED, Outcome.OK, text=text)

    assert res("NO_REPLY").silent
    assert not res("NO_REPLY, the task is done").silent
    assert not res("no_reply").silent
    assert not res("").silent


def test_the_stats_line_has_the_seeds_shape() -> None:
    from subagents import Status

    r = RunResult("i", "n", "a", Status.COMPLETED, Outcome.OK, usage=Usage(12_100, 3_100), cost_usd=0.4213,
                  duration_s=154.2)
    assert r.announce_stats() == "runtime 2m34s • tokens 15.2k (in 12.1k / out 3.1k) • est $0.42"
    r.cost_usd = 0.0042
    assert r.announce_stats().endswith("est $0.0042")


async def test_a_background_definition_makes_its_spawns_background(workdir: Path) -> None:
    outputs: list[str] = []
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await gate.wait()
            return ModelResponse(text="watched")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "watcher", "prompt": "watch"})])
        outputs.extend(r.content for r in req.messages[-1].tool_results)
        gate.set()
        return ModelResponse(text="parent done")

    watcher = AgentDefinition(name="watcher", description="watches", system_prompt="Watch.", background=True)
    async with runtime(workdir, fn, agents=[watcher]) as rt:
        await rt.run("go")
    out = json.loads(outputs[0])
    assert out["status"] == "running"
    assert "announced" in out["note"]


async def test_background_false_overrides_a_background_definition(workdir: Path) -> None:
    outputs: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="watched")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "watcher", "prompt": "watch",
                                                                      "background": False})])
        outputs.extend(r.content for r in req.messages[-1].tool_results)
        return ModelResponse(text="parent done")

    watcher = AgentDefinition(name="watcher", description="watches", system_prompt="Watch.", background=True)
    async with runtime(workdir, fn, agents=[watcher]) as rt:
        await rt.run("go")
    assert outputs[0].startswith("[agent watcher-")
    assert outputs[0].endswith("\nwatched")


async def test_steer_off_queues_the_announcement_as_a_follow_up_turn(workdir: Path) -> None:
    """With ``[announce] steer = false`` the announcement does not join a tool boundary; it comes as one
    more user turn when the parent ends its turn, and the parent may answer it with NO_REPLY."""
    child_done = asyncio.Event()
    boundaries: list[list[str]] = []
    followups: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            child_done.set()
            return ModelResponse(text="late news")
        last = req.messages[-1]
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("news", background=True, label="news")])
        if last.tool_results:
            boundaries.append([b.text for b in last.content if b.kind == "text"])
            if len(boundaries) == 1:
                await child_done.wait()
                await asyncio.sleep(0.01)  # the child ends and announces before this tool boundary
                return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
            return ModelResponse(text="my answer")
        followups.append(last.text)
        return ModelResponse(text="NO_REPLY")

    settings = Settings()
    settings.announce_steer = False
    async with runtime(workdir, fn, settings=settings) as rt:
        r = await rt.run("go")
    assert boundaries == [[], []]  # nothing injected at the tool boundaries
    assert len(followups) == 1
    assert 'A background task "news" (' in followups[0]
    assert r.outcome is Outcome.OK
    assert r.silent


async def test_steer_on_injects_at_the_next_tool_boundary(workdir: Path) -> None:
    child_done = asyncio.Event()
    boundaries: list[list[str]] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            child_done.set()
            return ModelResponse(text="late news")
        last = req.messages[-1]
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("news", background=True, label="news")])
        boundaries.append([b.text for b in last.content if b.kind == "text"])
        if len(boundaries) == 1:
            await child_done.wait()
            await asyncio.sleep(0.01)
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        return ModelResponse(text="my answer")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
    assert boundaries[0] == []
    assert len(boundaries) == 2
    assert len(boundaries[1]) == 1
    assert 'A background task "news" (' in boundaries[1][0]
    assert r.text == "my answer"
    assert not r.silent
