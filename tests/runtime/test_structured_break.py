"""Structured results under hostile input: bad schemas are clear errors, bad results are tool errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from subagents import Runtime, Status, UserError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.structured import OutputSpec


def nested(levels: int) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        d = {"type": "object", "properties": {"a": d}}
    return d


@pytest.mark.parametrize("schema", [
    nested(3000),
    {"type": "object", "properties": {"x": {"enum": list(range(200_000))}}},
    {"type": "object", "properties": {"x": {"enum": [float("nan")]}}},
    {"type": "object", 1: {"type": "string"}},
], ids=["deep", "huge-enum", "nan", "int-key"])
def test_an_unusable_schema_is_a_user_error(schema: dict[str, Any]) -> None:
    with pytest.raises(UserError, match="output schema"):
        OutputSpec.from_schema(schema)


def test_a_shared_subschema_is_refused_before_it_is_expanded() -> None:
    s: Any = {"type": "string"}
    for _ in range(25):  # 2**25 paths through 26 dicts
        s = {"anyOf": [s, s]}
    with pytest.raises(UserError, match="too large"):
        OutputSpec.from_schema({"type": "object", "properties": {"x": s}})


def test_a_big_but_reasonable_schema_is_accepted() -> None:
    spec = OutputSpec.from_schema({"type": "object", "properties": {"x": {"enum": [f"v{i}" for i in range(2000)]}}})
    assert spec.check({"x": "v1999"}) == ({"x": "v1999"}, '{"x": "v1999"}')


class Odd(BaseModel):
    x: int

    @field_validator("x")
    @classmethod
    def _no_zero(cls, x: int) -> int:
        if x == 0:
            raise KeyError("zero")  # a validator's bug: not a ValueError, so pydantic lets it through
        return x


async def test_a_validator_bug_is_a_tool_error_not_a_crashed_run(workdir: Path) -> None:
    seen: list[list[tuple[str, bool]]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append([(r.content, r.is_error) for r in req.messages[-1].tool_results])
        return ModelResponse(tool_calls=[ToolCall("final_result", {"x": 0 if len(seen) == 1 else 2})])

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        r = await rt.run("go", output_type=Odd)
    assert r.status == Status.COMPLETED
    assert r.output == Odd(x=2)
    [(why, is_error)] = seen[1]
    assert is_error
    assert "KeyError" in why


class Opaque:
    pass


class NoSchema(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


async def test_an_output_type_without_a_json_schema_is_a_user_error(workdir: Path) -> None:
    async with Runtime(model=FunctionModel(lambda req: ModelResponse(text="x")), workdir=workdir,
                       store="memory://") as rt:
        with pytest.raises(UserError, match="has no JSON schema"):
            await rt.run("go", output_type=NoSchema)
        assert rt.agents() == []


async def test_spawn_agent_with_a_too_deep_schema_is_a_tool_error(workdir: Path) -> None:
    """400 levels: within what spawn_agent's argument check walks, far beyond what a schema needs."""
    results: list[tuple[str, bool]] = []
    schema = nested(400)

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "x", "output_schema": schema})])
        results.extend((r.content, r.is_error) for r in req.messages[-1].tool_results)
        return ModelResponse(text="ok")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        r = await rt.run("go")
        assert len(rt.agents()) == 1
    assert r.status == Status.COMPLETED
    [(why, is_error)] = results
    assert is_error
    assert "nested more than 64 levels" in why


def test_a_wrapped_schema_that_refers_to_its_root_still_means_itself() -> None:
    """Nested lists of integers: "#" is the array, not the object final_result wraps it in."""
    spec = OutputSpec.from_schema({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}})
    assert spec.check({"result": [1, [2, [3]]]}) == ([1, [2, [3]]], "[1, [2, [3]]]")


def test_a_wrapped_schema_may_point_into_itself() -> None:
    spec = OutputSpec.from_schema({"type": "array", "items": {"type": "string"}, "contains": {"$ref": "#/items"}})
    assert spec.check({"result": ["a"]}) == (["a"], '["a"]')


async def test_a_tool_named_final_result_is_not_offered_twice(workdir: Path) -> None:
    """A developer's tool named ``final_result`` next to ``output_schema``: two tools of one name went to the
    provider (which refuses the request with a 400 that does not say why)."""
    seen: list[list[str]] = []

    def final_result(answer: str) -> str:
        """Mine."""
        return answer

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(list(req.tool_names))
        return ModelResponse("", [ToolCall("final_result", {"n": 3})])

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", tools=[final_result],
                       builtin_tools=False) as rt:
        r = await rt.run("go", output_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                                              "required": ["n"]})
    assert r.output == {"n": 3}
    assert seen[0].count("final_result") == 1
