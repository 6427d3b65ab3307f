"""``ToolRegistry`` (fence, unknown tools, argument validation, output cap) and ``@tool`` schema derivation."""

from __future__ import annotations

import asyncio
import enum
import threading
from typing import Any, Literal, TypedDict

import pytest

from subagents.exceptions import StoreError, ToolError
from subagents.messages import ToolResultBlock, ToolUseBlock
from subagents.tools.base import MAX_TOOL_OUTPUT, FunctionTool, Tool, ToolCategory, ToolContext, ToolRegistry, tool
from subagents.tools.builtin import BUILTIN_TOOLS, builtin_tools
from subagents.tools.schema import parse_docstring

calls: list[str] = []


@tool(category="read")
def look(path: str) -> str:
    """Look at something.

    Args:
        path: where to look.
    """
    calls.append(f"look {path}")
    return f"looked at {path}"


@tool(category="edit")
def change(path: str, text: str = "") -> str:
    """Change something."""
    calls.append(f"change {path}")
    return "changed"


@tool(category="read")
def big(n: int) -> str:
    """Produce n characters."""
    return "x" * n


@tool(category="read")
def fails(kind: str) -> str:
    """Fail on purpose."""
    if kind == "tool":
        raise ToolError("The thing is missing; create it first.")
    if kind == "bug":
        return None.upper()  # type: ignore[attr-defined, no-any-return]  # a tool's own bug
    if kind == "deep":
        raise MemoryError  # what ast.parse raises on a deeply nested file
    if kind == "store":
        raise StoreError("the run store is broken")
    raise ValueError("bad value")


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


def use(name: str, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock("call_1", name, arguments)


# --- fence --------------------------------------------------------------------------------------


async def test_fence_is_enforced_at_execute_time(ctx: ToolContext) -> None:
    reg = ToolRegistry([look, change], allow=["look"], agent_type="explore")
    assert reg.names == ["look"]
    assert [s.name for s in reg.specs()] == ["look"]
    assert "change" not in reg
    # The model calls a tool it was never shown: refused, and the tool never runs.
    result = await reg.execute(use("change", path="a.txt"), ctx)
    assert result == ToolResultBlock(
        "call_1",
        "tool 'change' is not available to agent type 'explore': it is outside this agent's tool fence and was "
        "not run. Use one of: look",
        True,
    )
    assert calls == []
    assert await reg.execute(use("look", path="a.txt"), ctx) == ToolResultBlock("call_1", "looked at a.txt", False)
    assert calls == ["look a.txt"]


async def test_denylist_and_narrowing(ctx: ToolContext) -> None:
    reg = ToolRegistry([look, change, big], deny=["big"], agent_type="general-purpose")
    assert reg.names == ["look", "change"]
    plan = reg.narrowed(allow=["look", "big"], agent_type="plan")
    assert plan.names == ["look"]  # narrowing never brings back a denied tool
    result = await plan.execute(use("change", path="x"), ctx)
    assert result.is_error
    assert result.content == (
        "tool 'change' is not available to agent type 'plan': it is outside this agent's tool fence and was "
        "not run. Use one of: look"
    )
    nothing = ToolRegistry([look], allow=[], agent_type="empty")
    assert (await nothing.execute(use("look", path="x"), ctx)).content == (
        "tool 'look' is not available to agent type 'empty': it is outside this agent's tool fence and was "
        "not run. Use one of: none"
    )
    assert calls == []


async def test_unknown_tool(ctx: ToolContext) -> None:
    reg = ToolRegistry([look, change])
    result = await reg.execute(use("delete_everything"), ctx)
    assert result == ToolResultBlock(
        "call_1", "unknown tool 'delete_everything'; the tools available to this agent are: look, change", True
    )


# --- arguments ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "arguments is missing the required property 'path'"),
        ({"path": 3}, "arguments.path must be string, got integer"),
        ({"path": "a", "text": None}, "arguments.text must be string, got null"),
        ({"path": "a", "force": True}, "arguments has an unexpected property 'force' (allowed: path, text)"),
    ],
)
async def test_schema_invalid_arguments(ctx: ToolContext, arguments: dict[str, Any], message: str) -> None:
    reg = ToolRegistry([change])
    result = await reg.execute(ToolUseBlock("c", "change", arguments), ctx)
    assert result == ToolResultBlock(
        "c", f"invalid arguments for tool 'change': {message}. Fix the arguments and call it again.", True
    )
    assert calls == []


async def test_arguments_must_be_an_object(ctx: ToolContext) -> None:
    reg = ToolRegistry([look])
    bad: Any = ["a.txt"]
    result = await reg.execute(ToolUseBlock("c", "look", bad), ctx)
    assert result == ToolResultBlock("c", "invalid arguments for tool 'look': arguments must be a JSON object", True)


# --- results ------------------------------------------------------------------------------------


async def test_output_over_the_cap_is_truncated_with_a_marker(ctx: ToolContext) -> None:
    reg = ToolRegistry([big])
    assert MAX_TOOL_OUTPUT == 50_000
    exact = await reg.execute(use("big", n=50_000), ctx)
    assert exact.content == "x" * 50_000
    result = await reg.execute(use("big", n=60_000), ctx)
    assert result == ToolResultBlock(
        "call_1",
        "x" * 50_000
        + "\n\n[... output truncated: 60,000 characters in all, the first 50,000 shown. Narrow the request "
        "(offset/limit, a more specific pattern) to see the rest ...]",
        False,
    )


async def test_tool_errors_become_error_results(ctx: ToolContext) -> None:
    reg = ToolRegistry([fails])
    assert await reg.execute(use("fails", kind="tool"), ctx) == ToolResultBlock(
        "call_1", "The thing is missing; create it first.", True
    )
    assert await reg.execute(use("fails", kind="other"), ctx) == ToolResultBlock(
        "call_1", "tool 'fails' failed: ValueError: bad value", True
    )


async def test_any_exception_of_a_tool_is_the_models_news_but_a_broken_store_is_not(ctx: ToolContext) -> None:
    """An AttributeError (a tool's bug) or a MemoryError ended the whole run; the runtime's own store failing
    still ends it (the model cannot work around it)."""
    reg = ToolRegistry([fails])
    bug = await reg.execute(use("fails", kind="bug"), ctx)
    assert (bug.is_error, bug.content) == (True, "tool 'fails' failed: AttributeError: 'NoneType' object has no "
                                                 "attribute 'upper'")
    deep = await reg.execute(use("fails", kind="deep"), ctx)
    assert (deep.is_error, deep.content) == (True, "tool 'fails' failed: MemoryError: ")
    with pytest.raises(StoreError):
        await reg.execute(use("fails", kind="store"), ctx)


# --- @tool --------------------------------------------------------------------------------------


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class Item(TypedDict):
    name: str
    qty: int


def test_tool_derives_schema_from_hints_and_docstring() -> None:
    def search(
        ctx: ToolContext,
        query: str,
        limit: int = 10,
        ratio: float = 0.5,
        exact: bool = False,
        tags: list[str] | None = None,
        kind: Literal["a", "b"] = "a",
        mode: Mode = Mode.FAST,
        items: list[Item] | None = None,
        extra: dict[str, int] | None = None,
    ) -> str:
        """Search the index for a query.

        Returns the best hits first.

        Args:
            query: what to look for.
            limit: how many hits at most; the
                rest is dropped.
            tags: only hits with these tags.

        Returns:
            The hits, one per line.
        """
        return query

    t = tool(search, category="read")
    assert isinstance(t, FunctionTool)
    assert isinstance(t, Tool)
    assert t.name == "search"
    assert t.category is ToolCategory.READ
    assert t.description == "Search the index for a query.\n\nReturns the best hits first."
    assert t.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for."},
            "limit": {"type": "integer", "description": "how many hits at most; the rest is dropped.", "default": 10},
            "ratio": {"type": "number", "default": 0.5},
            "exact": {"type": "boolean", "default": False},
            "tags": {
                "type": ["array", "null"],
                "items": {"type": "string"},
                "description": "only hits with these tags.",
            },
            "kind": {"enum": ["a", "b"], "type": "string", "default": "a"},
            "mode": {"enum": ["fast", "slow"]},
            "items": {
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
                    "required": ["name", "qty"],
                    "additionalProperties": False,
                },
            },
            "extra": {"type": ["object", "null"], "additionalProperties": {"type": "integer"}},
        },
        "additionalProperties": False,
        "required": ["query"],
    }


def test_tool_options_and_errors() -> None:
    def plain(x: int) -> int:
        return x

    t = tool(name="renamed", description="Custom text.", category=ToolCategory.EXECUTE)(plain)
    assert (t.name, t.description, t.category, t.parallel_safe) == ("renamed", "Custom text.", "execute", False)
    assert "ctx" not in t.parameters["properties"]

    def untyped(x) -> str:  # type: ignore[no-untyped-def]
        return str(x)

    with pytest.raises(TypeError, match=r"tool parameter 'x' of .*untyped has no type hint; add one"):
        tool(untyped)


def test_parse_docstring_stops_at_other_sections() -> None:
    assert parse_docstring("Do it.\n\nArgs:\n    a: first.\n\nRaises:\n    ValueError: never.") == (
        "Do it.",
        {"a": "first."},
    )


async def test_sync_tools_run_in_a_worker_thread_unless_inline(ctx: ToolContext) -> None:
    loop_thread = threading.get_ident()

    def where() -> int:
        return threading.get_ident()

    async def coro(ctx: ToolContext) -> dict[str, str]:
        await asyncio.sleep(0)
        return {"agent": ctx.agent.id}

    assert int(await tool(where).call({}, ctx)) != loop_thread
    assert int(await tool(where, inline=True).call({}, ctx)) == loop_thread
    assert await tool(coro).call({}, ctx) == '{"agent": "a1"}'  # non-string results are rendered as JSON

    def nothing() -> None:
        return None

    assert await tool(nothing).call({}, ctx) == ""


def test_parallel_safety_follows_the_category() -> None:
    assert {t.name: t.parallel_safe for t in BUILTIN_TOOLS} == {
        "read_file": True, "list_dir": True, "glob": True, "grep": True, "repo_map": True, "write_file": False,
        "edit_file": False, "bash": False, "web_fetch": False, "todo_write": True, "todo_read": True,
        "notepad_write": True, "skill": True}


def test_builtin_tools() -> None:
    assert [t.name for t in BUILTIN_TOOLS] == [
        "read_file", "list_dir", "glob", "grep", "repo_map", "write_file", "edit_file", "bash", "web_fetch",
        "todo_write", "todo_read", "notepad_write", "skill",
    ]  # fmt: skip
    assert all(isinstance(t, Tool) for t in BUILTIN_TOOLS)
    fresh = builtin_tools()
    assert fresh == list(BUILTIN_TOOLS)
    fresh.clear()
    assert len(builtin_tools()) == 13
    reg = ToolRegistry(builtin_tools(), allow=["read_file", "grep"], agent_type="explore")
    assert [s.name for s in reg.specs()] == ["read_file", "grep"]
