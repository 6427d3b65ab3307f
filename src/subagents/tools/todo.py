"""The ``todo_write`` tool: the agent's own checklist, kept in ``ctx.todos``.

Each call replaces the whole list, so the model always sends the complete, current plan.  The list
lives in :attr:`ToolContext.todos` (shared with whoever built the context, e.g. a UI that shows it);
it is replaced in place, never rebound.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from ..exceptions import ToolError
from .base import ToolCategory, ToolContext, tool

__all__ = ["TodoItem", "TodoStatus", "render_todos", "todo_write"]

TodoStatus = Literal["pending", "in_progress", "completed"]

_MARKS: dict[str, str] = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


class _TodoRequired(TypedDict):
    content: str
    status: TodoStatus


class TodoItem(_TodoRequired, total=False):
    """One checklist item: what to do, its status and an optional stable id."""

    id: str


def render_todos(todos: list[dict[str, Any]]) -> str:
    """The checklist as text: ``[x]`` completed, ``[~]`` in progress, ``[ ]`` pending."""
    if not todos:
        return "The todo list is empty."
    counts = {s: sum(1 for t in todos if t["status"] == s) for s in ("completed", "in_progress", "pending")}
    head = (
        f"Todo list ({len(todos)} items: {counts['completed']} completed, "
        f"{counts['in_progress']} in progress, {counts['pending']} pending):"
    )
    return "\n".join([head, *(f"{_MARKS[t['status']]} {t['id']}. {t['content']}" for t in todos)])


# ``todo_write`` touches no file, so read-only agents may plan with it too.  ``inline``: it runs on
# the event loop, so two calls of one turn never interleave.
@tool(category=ToolCategory.READ, inline=True)
def todo_write(ctx: ToolContext, todos: list[TodoItem]) -> str:
    """Replace your todo list with a new one, to plan multi-step work and track progress.

    Send the complete list every time. Mark an item in_progress before starting it and completed as
    soon as it is done; at most one item may be in_progress at a time. An empty list clears it.

    Args:
        todos: every item of the list, in order: content (what to do), status (pending,
            in_progress or completed) and an optional id.
    """
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, t in enumerate(todos, 1):
        content = t["content"].strip()
        if not content:
            raise ToolError(f"todo item {i} has empty content; say what is to be done in each item.")
        item_id = t.get("id") or str(i)
        if item_id in seen:
            raise ToolError(f"todo id {item_id!r} is used more than once; give every item its own id.")
        seen.add(item_id)
        items.append({"id": item_id, "content": content, "status": t["status"]})
    active = [t["content"] for t in items if t["status"] == "in_progress"]
    if len(active) > 1:
        listed = "; ".join(repr(c) for c in active)
        raise ToolError(
            f"{len(active)} items are in_progress ({listed}), but at most one may be; keep the one you are "
            "working on in_progress and set the others to pending or completed."
        )
    ctx.todos[:] = items
    if not items:
        return "The todo list is now empty."
    return render_todos(items)
