"""The ``todo_write`` and ``todo_read`` tools: each agent's own checklist, kept in ``ctx.todos``.

Each ``todo_write`` replaces the whole list, so the model always sends the complete, current plan.  The
list lives in :attr:`ToolContext.todos` (shared with whoever built the context, e.g. a UI that shows it);
it is replaced in place, never rebound.  Under a manager every agent has its own list in its tree's
:class:`~subagents.tools.todo_store.TodoStore` (seed 001's shared ``todo_store`` handle): a child's
``todo_write`` never touches its parent's list, and ``todo_read(agent_id)`` lets an agent read the list
of one of its descendants.
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import Any, Literal, TypedDict

from ..exceptions import ToolError
from ..messages import Message, ToolResultBlock, ToolUseBlock
from ..models.base import AgentInfo
from .base import ToolCategory, ToolContext, tool

__all__ = ["MAX_TODOS", "MAX_TODO_CHARS", "TodoItem", "TodoStatus", "render_todos", "todo_read", "todo_write",
           "todos_from_transcript"]

TodoStatus = Literal["pending", "in_progress", "completed"]

_MARKS: dict[str, str] = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}

MAX_TODOS = 200
"""The most items a todo list holds."""
MAX_TODO_CHARS = 20_000
"""The most characters (contents and ids) a todo list holds: the list is rendered in every ``todo_write`` result and
in the briefing of every sub-agent the agent spawns (a 50,000-item list made each child's prompt 6 MB)."""


class _TodoRequired(TypedDict):
    content: str
    status: TodoStatus


class TodoItem(_TodoRequired, total=False):
    """One checklist item: what to do, its status and an optional stable id."""

    id: str


def render_todos(todos: list[dict[str, Any]], title: str | None = None) -> str:
    """The checklist as text: ``[x]`` completed, ``[~]`` in progress, ``[ ]`` pending (``title``: instead of
    "Todo list" in the first line)."""
    if not todos:
        return f"{title} is empty." if title else "The todo list is empty."
    counts = {s: sum(1 for t in todos if t["status"] == s) for s in ("completed", "in_progress", "pending")}
    head = (
        f"{title or 'Todo list'} ({len(todos)} items: {counts['completed']} completed, "
        f"{counts['in_progress']} in progress, {counts['pending']} pending):"
    )
    return "\n".join([head, *(f"{_MARKS[t['status']]} {t['id']}. {t['content']}" for t in todos)])


# ``todo_write`` touches no file, so read-only agents may plan with it too.  ``inline``: it runs on
# the event loop, so two calls of one turn never interleave.
@tool(category=ToolCategory.READ, inline=True)
def todo_write(ctx: ToolContext, todos: list[TodoItem]) -> str:
    """Replace your todo list with a new one, to plan multi-step work and track progress.

    Send the complete list every time. Mark an item in_progress before starting it and completed as
    soon as it is done; at most one item may be in_progress at a time. An empty list clears it. A list
    holds at most 200 items and 20,000 characters: keep each item to one short line.

    Args:
        todos: every item of the list, in order: content (what to do), status (pending,
            in_progress or completed) and an optional id.
    """
    items = _items(todos)
    ctx.todos[:] = items
    if not items:
        return "The todo list is now empty."
    return render_todos(items)


def _items(todos: Iterable[TodoItem]) -> list[dict[str, Any]]:
    """The checked list ``todo_write`` keeps; a bad list raises :class:`ToolError` saying what to fix."""
    if isinstance(todos, Sized) and len(todos) > MAX_TODOS:
        raise _too_many()
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    chars = 0
    for i, t in enumerate(todos, 1):
        if i > MAX_TODOS:
            raise _too_many()
        content = t["content"].strip()
        if not content:
            raise ToolError(f"todo item {i} has empty content; say what is to be done in each item.")
        item_id = t.get("id") or str(i)
        if item_id in seen:
            why = "" if t.get("id") else f" (item {i} has no id, so its position is its id)"
            raise ToolError(f"todo id {item_id!r} is used more than once{why}; give every item its own id.")
        if t["status"] not in _MARKS:  # the schema says so; a list from a stored transcript is checked here
            raise ToolError(f"todo item {i} has status {t['status']!r}; use pending, in_progress or completed.")
        chars += len(content) + len(item_id)
        if chars > MAX_TODO_CHARS:
            raise ToolError(f"the todo list is over {MAX_TODO_CHARS:,} characters long (at item {i}); it is shown "
                            "in every sub-agent's briefing, so keep each item to one short line.")
        seen.add(item_id)
        items.append({"id": item_id, "content": content, "status": t["status"]})
    active = [t["content"] for t in items if t["status"] == "in_progress"]
    if len(active) > 1:
        listed = "; ".join(repr(c) for c in active)
        raise ToolError(
            f"{len(active)} items are in_progress ({listed}), but at most one may be; keep the one you are "
            "working on in_progress and set the others to pending or completed."
        )
    return items


def _too_many() -> ToolError:
    return ToolError(f"the todo list has more than {MAX_TODOS} items, the limit; plan in fewer, larger steps (every "
                     "sub-agent you spawn gets your list in its briefing).")


def todos_from_transcript(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The todo list an agent had at the end of ``messages`` (its stored transcript): the list of its last
    ``todo_write`` call that succeeded, empty when there is none.

    The list lives in memory; the transcript holds every call and its result, so an agent re-created from
    its record (resumed after a restart, or after its finished tree left memory) gets its list back.
    """
    calls: dict[str, Any] = {}
    found: list[dict[str, Any]] = []
    for m in messages:
        for b in m.content:
            if type(b) is ToolUseBlock and b.name == "todo_write":
                calls[b.id] = b.arguments.get("todos") if isinstance(b.arguments, dict) else None
            elif type(b) is ToolResultBlock and b.tool_use_id in calls:
                todos = calls.pop(b.tool_use_id)
                if b.is_error or not isinstance(todos, list):
                    continue
                try:
                    found = _items(todos)
                except (ToolError, KeyError, TypeError, AttributeError):
                    continue
    return found


def _who(agent: AgentInfo) -> str:
    return f"{agent.nickname} ({agent.agent_type}, id {agent.id})"


# ``inline`` like ``todo_write``: a read never sees half of a write.
@tool(category=ToolCategory.READ, inline=True)
def todo_read(ctx: ToolContext, agent_id: str | None = None) -> str:
    """Read a todo list: your own by default, or that of one of your sub-agents (to follow its progress).

    Args:
        agent_id: the id, nickname or id prefix of an agent you spawned (directly or through your
            sub-agents); leave it out for your own list.
    """
    store = ctx.todo_store
    ref = (agent_id or "").strip()
    target = store.find(ref) if store is not None and ref else None
    if not ref or ref in (ctx.agent.id, ctx.agent.nickname) or (target is not None and target.id == ctx.agent.id):
        text = render_todos(ctx.todos, "Your todo list")
        if store is not None:
            kids = [f"{a.nickname} ({len(store.list_of(a.id))} items)" for a in store.descendants(ctx.agent.id)
                    if store.list_of(a.id)]
            if kids:
                text += ("\n\nSub-agents of yours with a todo list (read one with todo_read(agent_id=...)): "
                         + ", ".join(kids))
        return text
    if store is None:
        raise ToolError(f"cannot read the todo list of {ref!r}: this agent runs without an agent tree, so only its "
                        "own list exists; call todo_read() without agent_id")
    if target is None:
        names = ", ".join(a.nickname for a in store.descendants(ctx.agent.id)) or "none"
        raise ToolError(f"no agent {ref!r} in your agent tree; give the id or nickname of one of your sub-agents "
                        f"(yours: {names}), or leave agent_id out to read your own list")
    if not store.is_descendant(target.id, of=ctx.agent.id):
        raise ToolError(f"agent {_who(target)} is not one of your sub-agents: you may read your own todo list and "
                        "those of the agents you spawned (directly or through them), not a parent's or a sibling's")
    return render_todos(store.list_of(target.id), f"The todo list of {_who(target)}")
