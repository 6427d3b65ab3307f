"""The team tools the model sees (issue 14); they reach the runtime's team service through ``TeamControl``.

A lead (an agent given ``team_create``, e.g. the built-in ``coordinator``) creates a team, spawns named
teammates with ``spawn_agent(..., team=..., name=...)``, fills the task board and talks to them by mail.
Teammates (and the lead, once its team exists) get the board and mailbox tools:

``task_create(subject, description?, blocked_by?)``, ``task_list()``, ``task_get(task_id)``,
``task_claim(task_id?)``, ``task_update(task_id, status?, note?)``, ``send_message(to, text)``,
``broadcast(text)``, ``team_shutdown(name?)``; the lead also ``team_delete(name?)``.

Claude Code's names (``TeamCreate``, ``TeamDelete``, ``TaskCreate``, ``TaskList``, ``TaskGet``,
``TaskUpdate``, ``SendMessage``) in an agent file's ``tools:`` list name these tools.
"""

from __future__ import annotations

from ..exceptions import ToolError
from .base import FunctionTool, Tool, ToolCategory, ToolContext
from .control import TeamControl
from .validation import vouch

__all__ = ["LEAD_TOOLS", "MEMBER_TOOLS", "TEAM_TOOLS", "team_tool_names"]


def _teams(ctx: ToolContext) -> TeamControl:
    teams = ctx.control.teams if ctx.control is not None else None
    if teams is None:
        raise ToolError("team tools need the runtime's team service; run this agent through subagents.Runtime")
    return teams


async def team_create(ctx: ToolContext, name: str, description: str = "") -> str:
    """Create a team that you lead: a shared task board and a mailbox for named teammates.

    Then spawn teammates with spawn_agent(agent_type, prompt, team=<name>, name=<their name>), add tasks
    with task_create, and talk to them with send_message / broadcast. Their messages and idle notices
    reach you automatically.

    Args:
        name: the team's name: lower-case letters, digits, '-' or '_'.
        description: what the team is for (one line).
    """
    return await _teams(ctx).team_create(ctx.agent.id, name, description)


async def team_delete(ctx: ToolContext, name: str | None = None) -> str:
    """Delete your team (its task board and mail) once every teammate has shut down.

    Args:
        name: the team; omit for the team you lead.
    """
    return await _teams(ctx).team_delete(ctx.agent.id, name)


async def task_create(ctx: ToolContext, subject: str, description: str = "", blocked_by: list[int] | None = None
                      ) -> str:
    """Add a task to your team's board (status pending).

    Args:
        subject: the task in a few words.
        description: what to do and what counts as done.
        blocked_by: ids of tasks that must be completed before this one can be claimed.
    """
    return await _teams(ctx).task_create(ctx.agent.id, subject, description, list(blocked_by or []))


async def task_list(ctx: ToolContext) -> str:
    """Show your team's task board: every task with its status, owner and blockers."""
    return await _teams(ctx).task_list(ctx.agent.id)


async def task_get(ctx: ToolContext, task_id: int) -> str:
    """Show one task in full (description, owner, blockers, last note).

    Args:
        task_id: the task's id.
    """
    return await _teams(ctx).task_get(ctx.agent.id, task_id)


async def task_claim(ctx: ToolContext, task_id: int | None = None) -> str:
    """Claim a task (it becomes yours, in_progress). Exactly one teammate gets each task.

    Args:
        task_id: the task to claim; omit to claim the oldest task that is free and unblocked.
    """
    return await _teams(ctx).task_claim(ctx.agent.id, task_id)


async def task_update(ctx: ToolContext, task_id: int, status: str | None = None, note: str | None = None) -> str:
    """Update a task you own: mark it completed (with a note of what you did), or pending to give it back.

    Args:
        task_id: the task's id.
        status: "completed", "in_progress" or "pending" (pending releases it for others).
        note: what was done, found or is still missing.
    """
    return await _teams(ctx).task_update(ctx.agent.id, task_id, status, note)


async def send_message(ctx: ToolContext, to: str, text: str, approve_plan: bool = False) -> str:
    """Send a message to one teammate (by name) or to the lead ("lead"); it arrives at their next turn.

    Args:
        to: the recipient's name, or "lead".
        text: the message.
        approve_plan: (lead only) approve the plan of a teammate that works in plan mode until approved.
    """
    return await _teams(ctx).send_message(ctx.agent.id, to, text, approve_plan)


async def broadcast(ctx: ToolContext, text: str) -> str:
    """Send a message to every other member of your team (teammates and the lead).

    Args:
        text: the message.
    """
    return await _teams(ctx).broadcast(ctx.agent.id, text)


async def team_shutdown(ctx: ToolContext, name: str | None = None) -> str:
    """Ask teammates to shut down: they finish their current step, then end (the lead: name one, or omit for
    all; a teammate: omit to end yourself when your turn ends).

    Args:
        name: the teammate to shut down; omit for all (lead) or yourself (teammate).
    """
    return await _teams(ctx).team_shutdown(ctx.agent.id, name)


def _tool(f: object, category: ToolCategory = ToolCategory.TEAM) -> FunctionTool:
    return FunctionTool(f, category=category)  # type: ignore[arg-type]


MEMBER_TOOLS: tuple[Tool, ...] = tuple(_tool(f) for f in (
    task_create, task_list, task_get, task_claim, task_update, send_message, broadcast, team_shutdown))
"""What every member of a team has (teammates; the lead once its team exists)."""

LEAD_TOOLS: tuple[Tool, ...] = (_tool(team_create), _tool(team_delete))
"""What only a lead has: ``team_create`` (given by a definition's ``tools:``) and ``team_delete``."""

TEAM_TOOLS: tuple[Tool, ...] = (*LEAD_TOOLS, *MEMBER_TOOLS)
vouch(*(t.parameters for t in TEAM_TOOLS))  # (compiled at their first call: see tools/validation.py)


def team_tool_names() -> frozenset[str]:
    return frozenset(t.name for t in TEAM_TOOLS)
