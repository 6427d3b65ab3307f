"""Seed 001's shared state handles: what a new agent's :class:`~subagents.tools.base.ToolContext` shares with
its tree and inherits from its parent.

- ``todo_store``: one :class:`~subagents.tools.todo_store.TodoStore` per tree (``mgr.todos[root_id]``); the
  agent's own ``todos`` list is opened in it, so a child's ``todo_write`` never touches its parent's list;
- ``notepad``: the manager's notepad (``rt.note``, the ``notepad_write`` tool); the latest entries are layered
  into the prompts of agents spawned afterwards (:func:`latest_notes`);
- ``team_name`` inherited from the parent (``is_team_lead`` false, ``agent_name`` its agent type, until the
  team service gives it a role); ``sandbox_level`` follows the inherited sandbox and the agent's mode;
- ``model_overrides``: the runtime's live override map (agent type -> model), read-only.

The briefing is built from that shared context when a child is spawned (:func:`spawn_briefing`, seed 001
"inject briefing from shared parent state"): the configured briefing (``[agents] briefing``, ``rt.brief``),
then the parent's task and its todo list as they are at that moment.  The prompt layers it goes into are
:func:`~subagents.runtime.prompts.build_system_prompt`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..models.base import AgentInfo
from ..tools.base import ToolContext
from ..tools.notepad import NOTEPAD_LATEST
from ..tools.todo import MAX_TODO_CHARS, MAX_TODOS, render_todos
from ..tools.todo_store import TodoStore
from .factory import AgentFactory, ManagerSettings

if TYPE_CHECKING:
    from .node import AgentNode

__all__ = ["BRIEFING_TASK_CHARS", "Briefings", "ManagerParts", "latest_notes", "spawn_briefing", "todo_store",
           "tool_context"]

BRIEFING_TASK_CHARS = 2000
"""How much of the parent's task a child's briefing quotes."""


class ManagerParts(Protocol):
    """What :func:`tool_context` reads of the :class:`~subagents.runtime.manager.AgentManager` (named structurally:
    the manager imports this module)."""

    todos: dict[str, Any]
    control: Any
    notepad: list[str]
    cfg: ManagerSettings
    factory: AgentFactory


def tool_context(mgr: ManagerParts, info: AgentInfo, parent: AgentNode | None, root_id: str, *, workspace: Any,
                 sandbox: Any, mode: str, team_name: str | None = None) -> ToolContext:
    """The context of a new agent ``info`` of the tree ``root_id`` (its parent ``parent``, ``None`` for a root;
    without a parent, ``team_name`` is the one it inherited)."""
    store = todo_store(mgr, root_id)
    if parent is not None:
        team_name = parent.core.ctx.team_name
    return ToolContext(agent=info, workspace=workspace, todos=store.open(info), control=mgr.control,
                       bash_timeout_s=mgr.cfg.bash_timeout_s, sandbox=sandbox, shell_writable=mode != "plan",
                       todo_store=store, notepad=mgr.notepad, team_name=team_name,
                       model_overrides=mgr.factory.overrides_view)


def todo_store(mgr: ManagerParts, root_id: str) -> TodoStore:
    """The todo store of the tree ``root_id`` (made on first use)."""
    store = mgr.todos.get(root_id)
    if not isinstance(store, TodoStore):
        store = mgr.todos[root_id] = TodoStore()
    return store


def latest_notes(notepad: Sequence[str]) -> tuple[str, ...]:
    """The notepad entries a new agent's prompt carries: the latest :data:`NOTEPAD_LATEST`."""
    return tuple(notepad[-NOTEPAD_LATEST:])


def spawn_briefing(static: str, parent: AgentNode | None, *, task_chars: int = BRIEFING_TASK_CHARS) -> str:
    """A child's briefing from the shared context at spawn time: ``static`` (the configured briefing), the
    parent's task (capped at ``task_chars``) and the parent's todo list; a root gets ``static`` only."""
    parts = [static.strip()] if static.strip() else []
    if parent is not None:
        task = parent.task_text.strip()
        if len(task) > task_chars:
            task = task[:task_chars] + f" [... {len(task) - task_chars:,} more characters]"
        parts.append(f"Your parent agent, {parent.nickname} ({parent.info.agent_type}), is working on this task:\n"
                     + "\n".join("> " + line for line in task.splitlines()))
        todos = parent.core.ctx.todos
        if todos:  # capped: a list set from Python (ctx.todos) skips todo_write's limits, and every child pays for it
            plan = render_todos(todos[:MAX_TODOS], "Its plan (todo list)")
            if len(plan) > MAX_TODO_CHARS:
                plan = plan[:MAX_TODO_CHARS] + f" [... {len(plan) - MAX_TODO_CHARS:,} more characters]"
            if len(todos) > MAX_TODOS:
                plan += f"\n[... {len(todos) - MAX_TODOS:,} more items]"
            parts.append(plan)
    return "\n\n".join(parts)


class Briefings:
    """:func:`spawn_briefing` for the children of one parent after another: a parent whose todo list is empty
    gives every child it spawns with the same task the very same string (built once, its hash computed once
    for the prompt cache of :meth:`~.factory.AgentFactory.system_prompt`)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[str, str, str, str] | None = None  # (static, parent id, parent task, briefing)

    def __call__(self, static: str, parent: AgentNode | None) -> str:
        if parent is None or parent.core.ctx.todos:
            return spawn_briefing(static, parent)
        last = self._last
        if last is not None and last[0] is static and last[2] is parent.task_text and last[1] == parent.id:
            return last[3]
        text = spawn_briefing(static, parent)
        self._last = (static, parent.id, parent.task_text, text)
        return text
