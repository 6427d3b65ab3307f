"""``Team``: a team seen from Python (``rt.team(name)``, ``rt.create_team(name)``; issue 14).

From Python *you* are the lead: teammates you spawn are background root agents; their messages to
``"lead"`` and their idle notices wait in :meth:`Team.inbox`.  A team a model created (its lead is an
agent) can be read and steered the same way — your messages then reach that lead's teammates directly.

>>> import asyncio
>>> from subagents import Runtime
>>> from subagents.models import FunctionModel, ModelResponse
>>> async def main() -> list[str]:
...     async with Runtime(model=FunctionModel(lambda req: ModelResponse(text="done")), store="memory") as rt:
...         team = rt.create_team("docs")
...         await team.add_task("count lines")
...         return [t.subject for t in team.tasks]
>>> asyncio.run(main())
['count lines']
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from ..teams.model import (
    LEAD,
    MailRecord,
    MemberRecord,
    MemberStatus,
    TaskRecord,
    TaskStatus,
    TeamError,
    TeamRecord,
    check_name,
)
from . import team_board as board
from .teams import TeamService

__all__ = ["Team"]


class Team:
    """A handle on one team of a runtime (cheap; reads go to the team store each time)."""

    __slots__ = ("_svc", "name")

    def __init__(self, svc: TeamService, name: str) -> None:
        self._svc = svc
        self.name = name

    def __repr__(self) -> str:
        return f"<Team {self.name}>"

    @property
    def record(self) -> TeamRecord:
        return self._svc.team(self.name)

    # -- reading --------------------------------------------------------------------------------------
    @property
    def tasks(self) -> list[TaskRecord]:
        """The task board, by id."""
        return self._svc.store.tasks(self.name)

    @property
    def members(self) -> list[MemberRecord]:
        """The teammates in the order they joined (the lead is not a member)."""
        return self._svc.store.members(self.name)

    def mail(self, limit: int = 50) -> list[MailRecord]:
        """The team's latest messages (every recipient), oldest first."""
        return self._svc.store.mail(self.name, limit)

    def inbox(self, *, mark_read: bool = True) -> list[MailRecord]:
        """Unread messages to the lead (you, for a team made from Python), oldest first."""
        handed = self._svc.handed.get((self.name, LEAD), 0)  # (the lead agent's read marks may not be stored yet)
        got = [m for m in self._svc.store.unread(self.name, LEAD) if m.seq > handed]
        if got and mark_read:
            self._svc.store.mark_read(self.name, LEAD, got[-1].seq)
        return got

    # -- acting ---------------------------------------------------------------------------------------
    def spawn(self, name: str, prompt: str, agent: str = "general-purpose", *, model: str | None = None,
              require_plan_approval: bool = False) -> str:
        """Start a teammate; its run id.  (Its lead is the team's lead agent, or none for a Python team.)"""
        team = self.record
        return board.spawn_member(self._svc, team, name, agent, prompt, parent_id=team.lead_id or None,
                                  model=model, require_plan_approval=require_plan_approval).id

    async def add_task(self, subject: str, description: str = "", blocked_by: Sequence[int] = ()) -> TaskRecord:
        """Add a task (``TaskCreated`` hooks run first)."""
        return await board.add_task(self._svc, self.record, LEAD, subject, description, blocked_by)

    async def complete_task(self, task_id: int, note: str = "") -> TaskRecord:
        """Mark a task completed as the lead (``TaskCompleted`` hooks run first)."""
        return await board.update_task(self._svc, self.record, LEAD, task_id, TaskStatus.COMPLETED, note)

    def send(self, to: str, text: str, *, approve_plan: bool = False) -> None:
        """Send ``text`` to one teammate as the lead; ``approve_plan`` lets a plan-mode teammate act."""
        team = self.record
        m = self._svc.store.member(team.name, to)
        if m is not None and m.status in (MemberStatus.SHUT_DOWN, MemberStatus.STOPPING):
            state = "has shut down" if m.status is MemberStatus.SHUT_DOWN else "is shutting down"
            raise TeamError(f"teammate {to!r} {state} and reads no more messages; spawn a new teammate for more work")
        if approve_plan:
            board.approve_plan(self._svc, team, to)
        self._svc.send(team, LEAD, [to], text)

    def broadcast(self, text: str) -> list[str]:
        """Send ``text`` to every teammate that is not shut down; their names."""
        to = [m.name for m in self.members if m.status not in (MemberStatus.SHUT_DOWN, MemberStatus.STOPPING)]
        if to:
            self._svc.send(self.record, LEAD, to, text, kind="broadcast")
        return to

    def shutdown(self, name: str | None = None) -> list[str]:
        """Ask one teammate (or all) to shut down; the names asked."""
        if name is not None:
            check_name("member", name)
            if self._svc.store.member(self.name, name) is None:
                raise TeamError(f"no teammate {name!r} in team {self.name}")
        return self._svc.request_shutdown(self.record, name, by=LEAD)

    async def wait_idle(self, timeout: float | None = None, poll_s: float = 0.02) -> bool:
        """Wait until no teammate is working (all idle or shut down); ``False`` on timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        while any(m.status in (MemberStatus.WORKING, MemberStatus.STOPPING) for m in self.members):
            if end is not None and time.monotonic() >= end:
                return False
            await asyncio.sleep(poll_s)
        return True

    def delete(self) -> None:
        """Delete the team with its board and mail (every teammate must be shut down)."""
        self._svc.store.delete_team(self.name)
