"""``TeamStore``: where teams, their task boards and their mail are kept (issue 14).

Every method is one short transaction.  Implementations: :mod:`subagents.teams.memory` (in the process)
and :mod:`subagents.teams.sqlite` (tables in the run store's SQLite file, so a team survives a restart
and two processes on one store share it).  The claim is atomic: a single conditional ``UPDATE`` inside a
``BEGIN IMMEDIATE`` transaction, never a read-then-write, so 50 claimants racing — in one process or
several — get a task exactly once.

Errors are :class:`~subagents.teams.model.TeamError` (with a sentence saying what to do) or, when the
file cannot be used, :class:`~subagents.exceptions.StoreError`.  A lookup (``get_team``, ``member``,
``task``) returns ``None`` for what does not exist; every other method raises :class:`TeamError` for an
unknown team, and for a sender, recipient, claimant or ``by`` that is neither ``"lead"`` nor a member.
Both stores word their errors alike (:mod:`subagents.teams._rules`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .model import MailRecord, MemberRecord, MemberStatus, TaskRecord, TaskStatus, TeamRecord

__all__ = ["TeamStore"]


class TeamStore(Protocol):
    # -- teams ----------------------------------------------------------------------------------
    def create_team(self, name: str, lead_id: str, at: float, description: str = "") -> TeamRecord:
        """A new team; :class:`TeamError` if the name is taken (or invalid)."""
        ...

    def get_team(self, name: str) -> TeamRecord | None: ...

    def list_teams(self) -> list[TeamRecord]:
        """Every team, oldest first."""
        ...

    def delete_team(self, name: str) -> None:
        """Remove the team, its members, tasks and mail; :class:`TeamError` while a member is not shut down."""
        ...

    # -- members --------------------------------------------------------------------------------
    def add_member(self, rec: MemberRecord) -> None:
        """Add a teammate; :class:`TeamError` for an unknown team or a name already in it."""
        ...

    def update_member(self, team: str, name: str, *, status: MemberStatus | None = None,
                      agent_id: str | None = None, plan_approved: bool | None = None) -> MemberRecord:
        """Change a member's fields (``None``: unchanged); the updated record."""
        ...

    def members(self, team: str) -> list[MemberRecord]:
        """The team's members in the order they joined."""
        ...

    def member(self, team: str, name: str) -> MemberRecord | None: ...

    # -- the task board -------------------------------------------------------------------------
    def create_task(self, team: str, subject: str, description: str = "",
                    blocked_by: Sequence[int] = (), at: float = 0.0) -> TaskRecord:
        """A new ``pending`` task with the next id; :class:`TeamError` for an unknown blocker id or an empty subject."""
        ...

    def tasks(self, team: str, status: TaskStatus | None = None) -> list[TaskRecord]:
        """The board, by id."""
        ...

    def task(self, team: str, task_id: int) -> TaskRecord | None: ...

    def claim(self, team: str, task_id: int, owner: str, at: float) -> TaskRecord:
        """Give the task to ``owner`` (status ``in_progress``) if it is pending, unowned and every blocker is
        completed — atomically; else :class:`ClaimRefused` with the reason.  Claiming a task one already owns
        returns it unchanged."""
        ...

    def claim_next(self, team: str, owner: str, at: float) -> TaskRecord | None:
        """Claim the oldest claimable task (lowest id), atomically; ``None`` when none is claimable now."""
        ...

    def update_task(self, team: str, task_id: int, *, by: str, status: TaskStatus | None = None,
                    note: str | None = None, at: float = 0.0) -> TaskRecord:
        """Change a task's status/note.  Only its owner or the lead (``by="lead"``) may change a claimed task;
        ``pending`` releases it (owner cleared); ``completed`` keeps the owner and unblocks dependents;
        a completed task cannot change status again (setting ``completed`` again only changes the note).
        Moving a *pending* task to ``in_progress`` or ``completed`` claims it for ``by`` first (atomically;
        :class:`ClaimRefused` while a blocker is unfinished).  :class:`TeamError` otherwise."""
        ...

    def release_tasks(self, team: str, owner: str, at: float) -> list[int]:
        """Put ``owner``'s ``in_progress`` tasks back to ``pending`` (unowned); their ids."""
        ...

    # -- the mailbox ----------------------------------------------------------------------------
    def send(self, team: str, sender: str, recipients: Sequence[str], text: str, at: float,
             kind: str = "message") -> list[MailRecord]:
        """One record per recipient (a name given twice gets one), in one transaction, with increasing
        ``seq``; :class:`TeamError` for an unknown sender or recipient (a member name or ``"lead"``) — then
        nothing is sent.  A broadcast is a send to every member (and the lead) but the sender."""
        ...

    def unread(self, team: str, recipient: str) -> list[MailRecord]:
        """``recipient``'s unread mail, oldest first."""
        ...

    def mark_read(self, team: str, recipient: str, up_to_seq: int) -> None:
        """Mark ``recipient``'s mail with ``seq <= up_to_seq`` read."""
        ...

    def mail(self, team: str, limit: int = 50) -> list[MailRecord]:
        """The team's latest ``limit`` messages (all recipients), oldest first."""
        ...

    def close(self) -> None: ...
