"""Seed statements the audit (docs/seed-audit.md) found missing: an omitted agent type falls back to
general-purpose (seed 001 "user roles -> built-in roles -> fallback", seed 002's task tool needs only a prompt), and
the parent is not told how many turns a child took (seed 000)."""

from __future__ import annotations

from pathlib import Path

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def last_results(req: ModelRequest) -> list[str]:
    return [r.content for r in req.messages[-1].tool_results]


async def test_a_spawn_without_an_agent_type_is_a_general_purpose_child(workdir: Path) -> None:
    got: list[str] = []
    types: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            types.append(req.agent.agent_type)
            return ModelResponse(text="pytest")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "which test framework?"})])
        got.extend(last_results(req))
        return ModelResponse(text="ok")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        await rt.run("go")
    assert types == ["general-purpose"]
    assert got[0].endswith("\npytest")


async def test_a_rule_on_general_purpose_spawns_covers_a_spawn_that_omits_the_type(workdir: Path) -> None:
    got: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "write it all"})])
        got.extend(last_results(req))
        return ModelResponse(text="ok")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://",
                       deny=["spawn_agent(general-purpose)"]) as rt:
        await rt.run("go")
    assert "denied" in got[0].lower()
    assert len(rt.runs()) == 1  # no child was made


async def test_the_parent_is_not_told_how_many_turns_a_child_took(workdir: Path) -> None:
    got: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            if len(req.messages) == 1:
                return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
            return ModelResponse(text="found")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "explore", "prompt": "look"})])
        got.extend(last_results(req))
        return ModelResponse(text="ok")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        await rt.run("go")
    header = got[0].split("\n", 1)[0]
    assert "· explore · status completed · outcome ok · runtime " in header
    assert header.endswith(" • tokens 0 (in 0 / out 0) • est n/a]")
    assert "turn" not in header
    assert "tool call" not in header
