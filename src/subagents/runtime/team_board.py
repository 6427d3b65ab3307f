"""The team operations that change who works on what: teammates joining, tasks created, claimed, completed.

Functions over a :class:`~.teams.TeamService` (used by the model's team tools and the Python ``Team`` handle
alike), so both paths run the same hooks and publish the same events:

- ``TaskCreated`` hooks run before a task is stored; exit 2 refuses it (the reason goes back to the caller).
- ``TaskCompleted`` hooks run before a task is marked completed; exit 2 keeps it open and the teammate
  reads the hook's stderr as the reason.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..exceptions import SpawnError
from ..teams._rules import plan_update
from ..teams.model import (
    MemberRecord,
    MemberStatus,
    TaskRecord,
    TaskStatus,
    TeamError,
    TeamRecord,
    check_name,
    one_line,
    quote_text,
)
from .node import AgentNode
from .teams import Role, TeamService

__all__ = ["add_task", "approve_plan", "claim", "one_line", "quote_text", "spawn_member", "teammate_prompt",
           "update_task"]

def teammate_prompt(team: str, name: str, prompt: str, plan: bool) -> str:
    """A teammate's first prompt: who it is, how the team works, then its task."""
    lines = [f'You are "{name}", a teammate in team "{team}". The team shares a task board and a mailbox.',
             "- task_list shows the board; task_claim takes a task (one at a time; omit the id for the next free one);",
             '  task_update(task_id, status="completed", note=...) when it is done, then claim the next one.',
             '- send_message(to, text) reaches the lead ("lead") or a teammate by name; broadcast(text) reaches all.',
             "- When you have nothing left to do, end your turn with a short summary: you go idle until a message."]
    if plan:
        lines.append('- You work in plan mode (read-only) until the lead approves your plan: send it to "lead" '
                     "and end your turn; the approval arrives as a message.")
    return "\n".join([*lines, "", "Your task:", prompt])


def spawn_member(svc: TeamService, team: TeamRecord, name: str, agent_type: str, prompt: str, *,
                 parent_id: str | None, model: str | None = None, require_plan_approval: bool = False) -> AgentNode:
    """Spawn a named teammate into ``team`` (a background agent with the team tools); :class:`TeamError` or
    :class:`~subagents.exceptions.SpawnError` when refused."""
    check_name("member", name)
    if svc.store.member(team.name, name) is not None:
        raise TeamError(f"team {team.name} already has a member named {name!r}; choose another name")
    if (up := svc.mgr.tree.closing_from(parent_id)) is not None:  # a close cancels what ran as it began
        raise SpawnError(f"agent {up.nickname} ({up.id}), the team's lead or its ancestor, is being closed: no "
                         "teammate starts under it; wait for the close to end")
    node = svc.mgr.spawn(agent_type=agent_type, prompt=teammate_prompt(team.name, name, prompt, require_plan_approval),
                         parent_id=parent_id, description=f"teammate {name}", background=True, model=model,
                         label=f"{team.name}/{name}")
    granted = node.mode
    # the agent's task starts on the loop's next step: its role, tools and mode are in place before its first call
    svc.bind(node, Role(team.name, name, granted))
    if require_plan_approval and granted != "plan":
        svc.set_mode(node, "plan")
    svc.store.add_member(MemberRecord(team=team.name, name=name, agent_type=agent_type, agent_id=node.id,
                                      model=node.model_name, mode=granted, status=MemberStatus.WORKING,
                                      require_plan_approval=require_plan_approval, joined_at=time.time()))
    svc.emit(node.id, "teammate_joined", team=team.name, name=name, agent_type=agent_type)
    return node


def approve_plan(svc: TeamService, team: TeamRecord, name: str) -> None:
    """The lead approves ``name``'s plan: it leaves plan mode for the mode it was granted."""
    m = svc.store.member(team.name, name)
    if m is None:
        raise TeamError(f"no teammate {name!r} in team {team.name}")
    if not m.require_plan_approval:
        raise TeamError(f"{name} was not spawned with require_plan_approval; send the message without approve_plan")
    svc.store.update_member(team.name, name, plan_approved=True)
    node = svc.mgr.nodes.get(m.agent_id or "")
    role = svc.role(m.agent_id or "")
    if node is not None and role is not None:
        svc.set_mode(node, role.mode)
    svc.emit(m.agent_id, "plan_approved", team=team.name, name=name)


async def add_task(svc: TeamService, team: TeamRecord, by: str, subject: str, description: str = "",
                      blocked_by: Sequence[int] = ()) -> TaskRecord:
    if not isinstance(subject, str) or not subject.strip():
        raise TeamError("the task needs a subject (what to do, in a few words)")
    agent_id = svc.agent_of(team, by)
    reason = await svc.hook("TaskCreated", agent_id, team_name=team.name, task_subject=subject,
                            task_description=description, teammate_name=by)
    if reason is not None:
        raise TeamError(f"the task was not created: a TaskCreated hook refused it: {reason}")
    t = svc.store.create_task(team.name, subject.strip(), description, list(blocked_by), time.time())
    svc.emit(agent_id, "task_created", team=team.name, task_id=t.id, subject=t.subject, by=by,
             blocked_by=list(t.blocked_by))
    return t


def claim(svc: TeamService, team: TeamRecord, by: str, task_id: int | None) -> TaskRecord | None:
    """Claim ``task_id`` (or the oldest claimable task) for ``by``; ``None``: nothing is claimable now."""
    at = time.time()
    t = svc.store.claim_next(team.name, by, at) if task_id is None else svc.store.claim(team.name, task_id, by, at)
    if t is not None:
        svc.emit(svc.agent_of(team, by), "task_claimed", team=team.name, task_id=t.id, owner=by)
    return t


async def update_task(svc: TeamService, team: TeamRecord, by: str, task_id: int, status: TaskStatus | None,
                      note: str | None) -> TaskRecord:
    agent_id = svc.agent_of(team, by)
    if status is TaskStatus.COMPLETED or note is not None:
        t = svc.store.task(team.name, task_id)
        if t is None:
            raise TeamError(f"no task #{task_id} in team {team.name}; task_list shows the board")
        done = t.status is TaskStatus.COMPLETED
        # completing a task, or changing a completed task's note (what the check approved), passes the check again
        if (status is TaskStatus.COMPLETED and not done) or (done and note is not None and note != t.note):
            plan_update(t, by, status, note)  # another's task is refused before its hooks run (they may run tests)
            reason = await svc.hook("TaskCompleted", agent_id, team_name=team.name, task_id=task_id,
                                    task_subject=t.subject, task_description=t.description, teammate_name=by,
                                    note=note or "")
            if reason is not None and done:
                raise TeamError(f"task #{task_id} keeps its note: a TaskCompleted hook refused the new one: {reason}")
            if reason is not None:
                raise TeamError(f"task #{task_id} stays open: a TaskCompleted hook refused to complete it: {reason}")
    before = svc.store.task(team.name, task_id)
    t = svc.store.update_task(team.name, task_id, by=by, status=status, note=note, at=time.time())
    if status is TaskStatus.COMPLETED and before is not None and before.status is not TaskStatus.COMPLETED:
        svc.emit(agent_id, "task_completed", team=team.name, task_id=t.id, owner=t.owner, by=by, note=t.note)
    return t

