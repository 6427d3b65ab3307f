"""``MemoryTeamStore``: a :class:`~subagents.teams.store.TeamStore` in dicts, for the memory run store and tests.

Nothing survives the process.  One lock makes every method one atomic step, so claimants racing from
threads (``asyncio.to_thread``) get a task exactly once, as with the SQLite store.  The rules and
the wording of the errors are the SQLite store's (:mod:`subagents.teams._rules`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from . import _rules as rules
from .model import (
    MailRecord,
    MemberRecord,
    MemberStatus,
    TaskRecord,
    TaskStatus,
    TeamError,
    TeamRecord,
    check_name,
)

__all__ = ["MemoryTeamStore"]


@dataclasses.dataclass(slots=True)
class _Team:
    rec: TeamRecord
    members: dict[str, MemberRecord] = dataclasses.field(default_factory=dict)  # in the order they joined
    tasks: dict[int, TaskRecord] = dataclasses.field(default_factory=dict)      # by id
    mail: list[MailRecord] = dataclasses.field(default_factory=list)            # by seq
    unread: dict[str, list[int]] = dataclasses.field(default_factory=dict)      # recipient -> indexes in mail


class MemoryTeamStore:
    """A :class:`~subagents.teams.store.TeamStore` kept in dicts (thread-safe; see the module docstring)."""

    def __init__(self) -> None:
        self._teams: dict[str, _Team] = {}
        self._lock = threading.Lock()

    def _team(self, name: str) -> _Team:
        t = self._teams.get(name)
        if t is None:
            raise rules.unknown_team(name)
        return t

    # -- teams ----------------------------------------------------------------------------------
    def create_team(self, name: str, lead_id: str, at: float, description: str = "") -> TeamRecord:
        check_name("team", name)
        with self._lock:
            if name in self._teams:
                raise rules.duplicate_team(name)
            rec = TeamRecord(name, lead_id, at, description)
            self._teams[name] = _Team(rec)
            return rec

    def get_team(self, name: str) -> TeamRecord | None:
        with self._lock:
            t = self._teams.get(name)
            return None if t is None else t.rec

    def list_teams(self) -> list[TeamRecord]:
        with self._lock:
            return sorted((t.rec for t in self._teams.values()), key=lambda r: r.created_at)

    def delete_team(self, name: str) -> None:
        with self._lock:
            t = self._team(name)
            live = [(m.name, m.status.value) for m in t.members.values() if m.status != MemberStatus.SHUT_DOWN]
            if live:
                raise rules.delete_refused(name, live)
            del self._teams[name]

    # -- members --------------------------------------------------------------------------------
    def add_member(self, rec: MemberRecord) -> None:
        check_name("member", rec.name)
        rec = dataclasses.replace(rec, status=rules.as_member_status(rec.status))
        with self._lock:
            t = self._team(rec.team)
            if rec.name in t.members:
                raise rules.duplicate_member(rec.team, rec.name)
            t.members[rec.name] = rec

    def update_member(self, team: str, name: str, *, status: MemberStatus | None = None,
                      agent_id: str | None = None, plan_approved: bool | None = None) -> MemberRecord:
        new_status = None if status is None else rules.as_member_status(status)
        with self._lock:
            t = self._team(team)
            m = t.members.get(name)
            if m is None:
                raise rules.unknown_member(team, name, t.members)
            m = dataclasses.replace(m, status=m.status if new_status is None else new_status,
                                    agent_id=m.agent_id if agent_id is None else agent_id,
                                    plan_approved=m.plan_approved if plan_approved is None else plan_approved)
            t.members[name] = m
            return m

    def members(self, team: str) -> list[MemberRecord]:
        with self._lock:
            return list(self._team(team).members.values())

    def member(self, team: str, name: str) -> MemberRecord | None:
        with self._lock:
            t = self._teams.get(team)
            return None if t is None else t.members.get(name)

    # -- the task board -------------------------------------------------------------------------
    def create_task(self, team: str, subject: str, description: str = "",
                    blocked_by: Sequence[int] = (), at: float = 0.0) -> TaskRecord:
        rules.check_subject(subject)
        with self._lock:
            t = self._team(team)
            blockers = rules.check_blockers(team, blocked_by, t.tasks)
            task_id = len(t.tasks) + 1  # tasks are only ever removed with their team
            rec = TaskRecord(team, task_id, subject, description, blocked_by=blockers, created_at=at, updated_at=at)
            t.tasks[task_id] = rec
            return rec

    def tasks(self, team: str, status: TaskStatus | None = None) -> list[TaskRecord]:
        want = None if status is None else rules.as_task_status(status)
        with self._lock:
            return [r for r in self._team(team).tasks.values() if want is None or r.status == want]

    def task(self, team: str, task_id: int) -> TaskRecord | None:
        with self._lock:
            t = self._teams.get(team)
            return None if t is None else t.tasks.get(task_id)

    @staticmethod
    def _open_blockers(t: _Team, rec: TaskRecord) -> list[int]:
        return [b for b in rec.blocked_by if t.tasks[b].status != TaskStatus.COMPLETED]

    def _claimable(self, t: _Team, rec: TaskRecord) -> bool:
        return rec.status == TaskStatus.PENDING and rec.owner is None and not self._open_blockers(t, rec)

    def _take(self, t: _Team, rec: TaskRecord, owner: str, at: float) -> TaskRecord:
        rec = dataclasses.replace(rec, status=TaskStatus.IN_PROGRESS, owner=owner, updated_at=at)
        t.tasks[rec.id] = rec
        return rec

    def claim(self, team: str, task_id: int, owner: str, at: float) -> TaskRecord:
        with self._lock:
            t = self._team(team)
            rules.check_party(team, owner, list(t.members))
            rec = t.tasks.get(task_id)
            if rec is not None and rec.status == TaskStatus.IN_PROGRESS and rec.owner == owner:
                return rec
            if rec is None or not self._claimable(t, rec):
                raise rules.refused(team, task_id, rec, [] if rec is None else self._open_blockers(t, rec))
            return self._take(t, rec, owner, at)

    def claim_next(self, team: str, owner: str, at: float) -> TaskRecord | None:
        with self._lock:
            t = self._team(team)
            rules.check_party(team, owner, list(t.members))
            for rec in t.tasks.values():
                if self._claimable(t, rec):
                    return self._take(t, rec, owner, at)
            return None

    def update_task(self, team: str, task_id: int, *, by: str, status: TaskStatus | None = None,
                    note: str | None = None, at: float = 0.0) -> TaskRecord:
        want = None if status is None else rules.as_task_status(status)
        with self._lock:
            t = self._team(team)
            rules.check_party(team, by, list(t.members))
            rec = t.tasks.get(task_id)
            if rec is None:
                raise rules.unknown_task(team, task_id)
            new_status, owner, claim_first = rules.plan_update(rec, by, want, note)
            if claim_first and not self._claimable(t, rec):
                raise rules.refused(team, task_id, rec, self._open_blockers(t, rec))
            rec = dataclasses.replace(rec, status=new_status, owner=owner, updated_at=at,
                                      note=rec.note if note is None else note)
            t.tasks[task_id] = rec
            return rec

    def release_tasks(self, team: str, owner: str, at: float) -> list[int]:
        with self._lock:
            t = self._team(team)
            ids = [r.id for r in t.tasks.values() if r.status == TaskStatus.IN_PROGRESS and r.owner == owner]
            for i in ids:
                t.tasks[i] = dataclasses.replace(t.tasks[i], status=TaskStatus.PENDING, owner=None, updated_at=at)
            return ids

    # -- the mailbox ----------------------------------------------------------------------------
    def send(self, team: str, sender: str, recipients: Sequence[str], text: str, at: float,
             kind: str = "message") -> list[MailRecord]:
        if isinstance(recipients, str):
            raise TeamError("recipients is a list of names; wrap a single name in a list")
        with self._lock:
            t = self._team(team)
            names = list(t.members)
            rules.check_party(team, sender, names)
            to = list(dict.fromkeys(recipients))
            for r in to:
                rules.check_party(team, r, names)
            out = []
            for r in to:
                rec = MailRecord(team, len(t.mail) + 1, sender, r, text, at, kind)
                t.unread.setdefault(r, []).append(len(t.mail))
                t.mail.append(rec)
                out.append(rec)
            return out

    def unread(self, team: str, recipient: str) -> list[MailRecord]:
        with self._lock:
            t = self._team(team)
            rules.check_party(team, recipient, list(t.members))
            return [t.mail[i] for i in t.unread.get(recipient, ())]

    def mark_read(self, team: str, recipient: str, up_to_seq: int) -> None:
        with self._lock:
            t = self._team(team)
            rules.check_party(team, recipient, list(t.members))
            idx = t.unread.get(recipient)
            if not idx:
                return
            keep = []
            for i in idx:
                if t.mail[i].seq <= up_to_seq:
                    t.mail[i] = dataclasses.replace(t.mail[i], read=True)
                else:
                    keep.append(i)
            t.unread[recipient] = keep

    def mail(self, team: str, limit: int = 50) -> list[MailRecord]:
        with self._lock:
            return list(self._team(team).mail[-limit:]) if limit > 0 else []

    def close(self) -> None:
        """Nothing to release: the teams live as long as this object."""

