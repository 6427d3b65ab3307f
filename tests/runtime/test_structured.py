"""Structured results: output_type / output_schema runs end with a valid final_result call."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, RootModel

from subagents import Limits, Outcome, Runtime, Status, UserError, tool
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.base import ToolContext


class Finding(BaseModel):
    file: str
    line: int = Field(ge=1)


class Report(BaseModel):
    summary: str
    findings: list[Finding]


def runtime(workdir: Path, fn: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://")


def final(args: dict[str, Any], id: str = "f") -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall("final_result", args, id=id)])


def snap(req: ModelRequest) -> ModelRequest:
    """The request as the model saw it (the loop's message list grows afterwards)."""
    return dataclasses.replace(req, messages=list(req.messages))


def last_results(req: ModelRequest) -> list[tuple[str, bool]]:
    return [(r.content, r.is_error) for r in req.messages[-1].tool_results]


async def test_output_type_plain_text_reminded_invalid_told_why_valid_ends(workdir: Path) -> None:
    seen: list[ModelRequest] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(snap(req))
        n = len(seen)
        if n == 1:
            return ModelResponse(text="I found two problems.")
        if n == 2:
            return final({"summary": "two problems", "findings": [{"file": "a.py", "line": 0}]})
        return final({"summary": "two problems", "findings": [{"file": "a.py", "line": 3}, {"file": "b.py",
                                                                                           "line": 9}]})

    async with runtime(workdir, fn) as rt:
        r = await rt.run("review the code", output_type=Report)
    assert (r.status, r.outcome, r.turns) == (Status.COMPLETED, Outcome.OK, 3)
    assert isinstance(r.output, Report)
    assert r.output.findings[1] == Finding(file="b.py", line=9)
    assert json.loads(r.text) == r.output.model_dump()
    spec = next(s for s in seen[0].tools if s.name == "final_result")
    assert spec.parameters == Report.model_json_schema()
    assert "final_result" in seen[0].system
    # plain text is no result: the model is told to call final_result
    assert "call `final_result` now" in seen[1].messages[-1].text
    # an invalid result is a tool error saying what is wrong
    [(why, is_error)] = last_results(seen[2])
    assert is_error
    assert "findings.0.line" in why
    assert "greater than or equal to 1" in why


async def test_without_output_type_there_is_no_final_result_tool(workdir: Path) -> None:
    seen: list[ModelRequest] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(snap(req))
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("hello")
    assert r.text == "done"
    assert r.output is None
    assert all(s.name != "final_result" for s in seen[0].tools)
    assert "final_result" not in seen[0].system


async def test_output_schema_not_an_object_is_wrapped_and_unwrapped(workdir: Path) -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2}
    seen: list[ModelRequest] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(snap(req))
        return final({"result": [1]}) if len(seen) == 1 else final({"result": [1, 2, 3]})

    async with runtime(workdir, fn) as rt:
        r = await rt.run("count", output_schema=schema)
    assert r.ok
    assert r.output == [1, 2, 3]
    assert r.text == "[1, 2, 3]"
    [(why, is_error)] = last_results(seen[1])
    assert is_error
    assert "does not match the schema" in why
    spec = next(s for s in seen[0].tools if s.name == "final_result")
    assert spec.parameters["properties"]["result"] == schema


async def test_never_valid_stops_at_the_turn_limit_without_output(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        return final({"summary": 42})

    async with runtime(workdir, fn) as rt:
        r = await rt.run("review", output_type=Report, limits=Limits(max_turns=3))
    assert (r.outcome, r.limit, r.turns, r.output) == (Outcome.LIMIT, "max_turns", 3, None)
    assert r.truncated


async def test_other_tool_calls_beside_final_result_run_too(workdir: Path) -> None:
    looked: list[str] = []

    @tool(category="read")
    def look(topic: str) -> str:
        """Look something up.

        Args:
            topic: what.
        """
        looked.append(topic)
        return "seen"

    def fn(req: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=[ToolCall("look", {"topic": "tides"}, id="w"),
                                         ToolCall("final_result", {"summary": "ok", "findings": []}, id="f")])

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", tools=[look]) as rt:
        r = await rt.run("go", output_type=Report)
    assert r.ok
    assert r.output == Report(summary="ok", findings=[])
    assert r.turns == 1
    assert looked == ["tides"]


async def test_spawn_agent_output_schema_parent_receives_validated_json(workdir: Path) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    parent_saw: list[str] = []
    child_tools: list[list[str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            child_tools.append([s.name for s in req.tools])
            if len(req.messages) == 1:
                return final({"answer": "forty-two"})
            return final({"answer": 42})
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "find the answer", "output_schema": schema})])
        parent_saw.append(req.messages[-1].tool_results[0].content)
        return ModelResponse(text="parent done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("delegate")
    assert r.text == "parent done"
    assert "final_result" in child_tools[0]
    body = parent_saw[0].split("\n", 1)[1]
    assert json.loads(body) == {"answer": 42}


async def test_spawn_agent_bad_output_schema_is_a_tool_error_and_spawns_nothing(workdir: Path) -> None:
    results: list[tuple[str, bool]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "x", "output_schema": {"type": "objekt"}})])
        results.extend(last_results(req))
        return ModelResponse(text="ok")

    async with runtime(workdir, fn) as rt:
        await rt.run("delegate")
        assert len(rt.agents()) == 1
    [(why, is_error)] = results
    assert is_error
    assert "output schema is not a usable JSON schema" in why
    assert "objekt" in why


async def test_rt_spawn_with_output_type_and_wait(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        return final({"summary": "bg", "findings": [{"file": "z.py", "line": 1}]})

    async with runtime(workdir, fn) as rt:
        h = await rt.spawn("work", output_type=Report)
        r = (await rt.wait([h.id]))[h.id]
    assert r.output == Report(summary="bg", findings=[Finding(file="z.py", line=1)])


@pytest.mark.parametrize("kw", [{"output_type": int}, {"output_schema": {"type": "objekt"}}, {"output_schema": []},
                                {"output_type": Report, "output_schema": {"type": "object"}}])
async def test_bad_output_arguments_are_user_errors_before_any_run(workdir: Path, kw: dict[str, Any]) -> None:
    async with runtime(workdir, lambda req: ModelResponse(text="x")) as rt:
        with pytest.raises(UserError):
            await rt.run("x", **kw)
        assert rt.agents() == []


class Findings(RootModel[list[Finding]]):
    pass


async def test_a_root_model_is_wrapped_its_refs_still_resolve_and_errors_name_the_field(workdir: Path) -> None:
    seen: list[ModelRequest] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(snap(req))
        if len(seen) == 1:
            return final({"result": [{"file": "a.py", "line": 1}, {"file": "b.py"}]})
        return final({"result": [{"file": "a.py", "line": 1}]})

    async with runtime(workdir, fn) as rt:
        r = await rt.run("list", output_type=Findings)
    assert r.output == Findings([Finding(file="a.py", line=1)])
    assert json.loads(r.text) == [{"file": "a.py", "line": 1}]
    [(why, is_error)] = last_results(seen[1])
    assert is_error
    assert "1.line: Field required" in why
    assert "errors.pydantic.dev" not in why


async def test_a_message_arriving_with_the_result_is_read_before_the_run_ends(workdir: Path) -> None:
    seen: list[ModelRequest] = []
    rt: Runtime  # bound below; the tool reaches it when it runs

    @tool(category="read")
    async def look(ctx: ToolContext) -> str:
        """Look around (and get told something meanwhile)."""
        await rt.send_input(ctx.agent.id, "also check c.py")
        return "seen"

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(snap(req))
        if len(seen) == 1:
            return ModelResponse(tool_calls=[ToolCall("look", {}, id="l"),
                                             ToolCall("final_result", {"summary": "a", "findings": []}, id="f")])
        return final({"summary": "a and c", "findings": []})

    rt = Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", tools=[look])
    async with rt:
        r = await rt.run("go", output_type=Report)
    assert r.turns == 2
    assert r.output == Report(summary="a and c", findings=[])
    assert "also check c.py" in seen[1].messages[-1].text
