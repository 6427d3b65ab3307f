"""Tool argument validation with compiled schemas (issue 13).

Before: the hand-written checker knew a handful of keywords, ignored the rest (``pattern``,
``minLength``, ``oneOf`` ...) and raised ``KeyError`` out of the registry on a hand-written schema
with a typo in a type name.  Now each schema is checked and compiled once: a bad schema is a
``DefinitionError`` naming the tool, a call against it is a tool error, and every keyword is enforced.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.exceptions import DefinitionError
from subagents.messages import ToolUseBlock
from subagents.models import FunctionModel
from subagents.tools.base import FunctionTool, ToolContext, ToolRegistry
from subagents.tools.schema import check_schema, schema_for_function, validate
from subagents.tools.validation import compiled

TYPO = {"type": "object", "properties": {"name": {"type": "strnig"}}, "required": ["name"]}


@pytest.mark.parametrize(
    ("schema", "fault"),
    [
        (TYPO, "parameters.properties.name.type: unknown type 'strnig' (did you mean 'string'?); the JSON types "
               "are array, boolean, integer, null, number, object, string"),
        ({"type": "object", "properties": {"n": {"type": "int"}}},
         "parameters.properties.n.type: unknown type 'int' (did you mean 'integer'?)"),
        ({"type": "object", "properties": {"n": "string"}}, "parameters.properties.n must be object or boolean"),
        ({"type": "object", "required": "name"}, "parameters.required must be array"),
        ({"type": "object", "properties": {"n": {"type": "integer", "minimum": "1"}}},
         "parameters.properties.n.minimum must be number"),
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": "("}}},
         "a pattern is not a valid regular expression"),
        ({"$ref": "https://example.com/schema.json"}, "parameters.$ref must match pattern ^#"),
        ({"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}}, "Unresolvable ref"),
    ],
)
def test_a_bad_schema_is_a_definition_error_naming_the_tool(schema: dict[str, Any], fault: str) -> None:
    with pytest.raises(DefinitionError) as e:
        check_schema(schema, tool="greet")
    assert str(e.value).startswith("tool 'greet' has an invalid parameters schema: ")
    assert fault in str(e.value)


def test_a_schema_must_be_a_mapping() -> None:
    with pytest.raises(DefinitionError) as e:
        check_schema(["name"], tool="greet")
    assert str(e.value) == "tool 'greet': its parameters must be a JSON schema (a dict), got list"


# Before: KeyError: 'strnig' out of validate (and so out of ToolRegistry.execute: the agent crashed).
def test_validating_against_a_bad_schema_never_raises() -> None:
    err = validate({"name": "x"}, TYPO)
    assert err is not None
    assert err.startswith("the tool cannot be called: its parameters schema is invalid: parameters.properties.name")


def greet(name: str) -> str:
    return f"hi {name}"


def test_a_bad_schema_is_refused_at_registration(tmp_path: Path) -> None:
    bad = FunctionTool(greet, parameters=TYPO)  # defining it compiles nothing (import stays fast)
    with pytest.raises(DefinitionError, match=r"tool 'greet' has an invalid parameters schema: parameters\.properties"):
        ToolRegistry([bad])
    with pytest.raises(DefinitionError, match=r"tool 'greet' has an invalid parameters schema: parameters\.properties"):
        Runtime(model=FunctionModel(lambda req: "x"), workdir=tmp_path, store="memory://", tools=[bad])
    good = FunctionTool(greet)
    good.parameters = TYPO  # any Tool object: the registry checks every schema it is given
    with pytest.raises(DefinitionError, match="tool 'greet' has an invalid parameters schema"):
        ToolRegistry([good])


async def test_a_call_to_a_tool_with_a_bad_schema_is_a_tool_error(ctx: ToolContext) -> None:
    t = FunctionTool(greet)
    reg = ToolRegistry([t])
    t.parameters = TYPO  # broken after registration: the call is refused, the agent goes on
    result = await reg.execute(ToolUseBlock("c", "greet", {"name": "x"}), ctx)
    assert result.is_error
    assert "its parameters schema is invalid" in result.content


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"code": "abc"}, "arguments.code must match pattern ^[A-Z]+$"),
        ({"code": "AB", "tags": []}, "arguments.tags must contain at least 1 items"),
        ({"code": "AB", "size": 1.5}, "arguments.size must be integer, got number"),
        ({"code": "AB", "size": 1.0}, "arguments.size must be integer, got number"),  # 1.0 would break a slice
        ({"code": "AB", "size": True}, "arguments.size must be integer, got boolean"),
        ({"code": "AB", "mode": True}, "arguments.mode must be one of [1, 'fast']"),
        ({"code": "AB", "ratio": math.nan}, "arguments.ratio must be a finite number from 0 to 1, got NaN"),
        ({"code": "AB", "pair": ["a", "b"]}, "arguments.pair[1] must be integer"),
    ],
)
def test_every_keyword_is_enforced_with_a_readable_message(arguments: dict[str, Any], message: str) -> None:
    schema = {"type": "object", "additionalProperties": False, "required": ["code"], "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]+$", "minLength": 2},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "size": {"type": "integer"},
        "mode": {"enum": [1, "fast"]},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
    }}
    check_schema(schema, tool="t")
    assert validate(arguments, schema) == message
    assert validate({"code": "AB", "size": 3, "ratio": 0.5, "pair": ["a", 1], "mode": "fast"}, schema) is None


def test_defaults_are_not_written_into_the_arguments() -> None:
    def read(path: str, limit: int = 10) -> str:
        return path

    schema = schema_for_function(read)[1]
    args: dict[str, Any] = {"path": "a"}
    assert validate(args, schema) is None
    assert args == {"path": "a"}


def test_boolean_subschemas_and_untyped_values() -> None:
    schema = {"type": "object", "properties": {"any": True, "never": False}}
    assert validate({"any": {"x": [1, "y"]}}, schema) is None
    assert validate({"any": {"x": [math.inf]}}, schema) == (
        "arguments.any.x[0] must be a finite number from -9007199254740992 to 9007199254740992, got Infinity")
    assert validate({"never": 1}, schema) == "arguments.never is not allowed here"


def test_a_schema_is_compiled_once() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert compiled(schema) is compiled(schema)
    assert compiled(dict(schema)) is not compiled(schema)


def test_a_schema_pattern_runs_in_linear_time() -> None:
    """``pattern`` ran on Python's ``re``: ``^(a+)+$`` against 30 a's and a b took minutes (a model's
    ``output_schema``, an MCP server's tool schema).  It runs on RE2 now."""
    import time

    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}
    t0 = time.perf_counter()
    assert validate({"x": "a" * 40 + "b"}, schema) is not None  # refused
    assert time.perf_counter() - t0 < 1.0
    assert validate({"x": "aaaa"}, schema) is None


def test_a_pattern_re2_cannot_run_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="patterns run on RE2"):
        check_schema({"type": "object", "properties": {"x": {"type": "string", "pattern": "(?=a)b"}}}, tool="t")


def test_arguments_nested_too_deep_are_refused_not_a_crash() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}
    assert "nested too deeply" in (validate(deep, {"type": "object"}) or "")


def test_a_list_over_max_items_is_refused_without_walking_it() -> None:
    # The explanation walked every item in Python before the bound was looked at: a million items took seconds.
    schema = {"type": "object", "properties": {"todos": {"type": "array", "maxItems": 3,
                                                         "items": {"type": "object", "required": ["id"]}}}}
    check_schema(schema, tool="t")
    items = [{"id": str(i)} for i in range(1_000_000)]
    t0 = time.perf_counter()
    message = validate({"todos": items}, schema)
    assert message == "arguments.todos must contain less than or equal to 3 items"
    assert time.perf_counter() - t0 < 1.0  # (the walk alone: ~2-5 s)
