"""``todo_write``: replaces the shared ``ctx.todos`` list and renders a checklist."""

from __future__ import annotations

from typing import Any

import pytest

from subagents.exceptions import ToolError
from subagents.messages import ToolUseBlock
from subagents.tools.base import ToolCategory, ToolContext, ToolRegistry
from subagents.tools.todo import render_todos, todo_write


async def write(ctx: ToolContext, todos: list[dict[str, Any]]) -> str:
    return await todo_write.call({"todos": todos}, ctx)


async def test_replaces_the_shared_list_in_place(ctx: ToolContext) -> None:
    shared = ctx.todos
    out = await write(
        ctx,
        [
            {"content": "Read the code", "status": "completed"},
            {"content": "Write the fix", "status": "in_progress", "id": "fix"},
            {"content": "  Run the tests  ", "status": "pending"},
        ],
    )
    assert ctx.todos is shared
    assert shared == [
        {"id": "1", "content": "Read the code", "status": "completed"},
        {"id": "fix", "content": "Write the fix", "status": "in_progress"},
        {"id": "3", "content": "Run the tests", "status": "pending"},
    ]
    assert out == (
        "Todo list (3 items: 1 completed, 1 in progress, 1 pending):\n"
        "[x] 1. Read the code\n"
        "[~] fix. Write the fix\n"
        "[ ] 3. Run the tests"
    )
    await write(ctx, [{"content": "Only this", "status": "pending"}])
    assert shared == [{"id": "1", "content": "Only this", "status": "pending"}]


async def test_empty_list_clears(ctx: ToolContext) -> None:
    await write(ctx, [{"content": "x", "status": "pending"}])
    assert await write(ctx, []) == "The todo list is now empty."
    assert ctx.todos == []
    assert render_todos([]) == "The todo list is empty."


async def test_at_most_one_in_progress(ctx: ToolContext) -> None:
    await write(ctx, [{"content": "keep me", "status": "pending"}])
    with pytest.raises(ToolError) as info:
        await write(ctx, [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}])
    assert str(info.value) == (
        "2 items are in_progress ('a'; 'b'), but at most one may be; keep the one you are working on "
        "in_progress and set the others to pending or completed."
    )
    assert ctx.todos == [{"id": "1", "content": "keep me", "status": "pending"}]


async def test_bad_items(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as info:
        await write(ctx, [{"content": "ok", "status": "pending"}, {"content": " ", "status": "pending"}])
    assert str(info.value) == "todo item 2 has empty content; say what is to be done in each item."
    with pytest.raises(ToolError) as info:
        await write(ctx, [{"content": "a", "status": "pending", "id": "x"}, {"content": "b", "status": "pending",
                                                                              "id": "x"}])
    assert str(info.value) == "todo id 'x' is used more than once; give every item its own id."
    assert ctx.todos == []


async def test_schema_rejects_bad_status_through_the_registry(ctx: ToolContext) -> None:
    reg = ToolRegistry([todo_write])
    bad = {"todos": [{"content": "a", "status": "done"}]}
    result = await reg.execute(ToolUseBlock("c1", "todo_write", bad), ctx)
    assert result.is_error
    assert result.content == (
        "invalid arguments for tool 'todo_write': arguments.todos[0].status must be one of 'pending', "
        "'in_progress', 'completed', got 'done'. Fix the arguments and call it again."
    )
    missing = {"todos": [{"status": "pending"}]}
    result = await reg.execute(ToolUseBlock("c2", "todo_write", missing), ctx)
    assert result.content == (
        "invalid arguments for tool 'todo_write': arguments.todos[0] is missing the required property "
        "'content'. Fix the arguments and call it again."
    )
    assert ctx.todos == []


def test_tool_shape() -> None:
    assert todo_write.category is ToolCategory.READ
    assert todo_write.inline
    items = todo_write.parameters["properties"]["todos"]["items"]
    assert items == {
        "type": "object",
        "properties": {
            "content": {"type": "string"},
            "status": {"enum": ["pending", "in_progress", "completed"], "type": "string"},
            "id": {"type": "string"},
        },
        "required": ["content", "status"],
        "additionalProperties": False,
    }
