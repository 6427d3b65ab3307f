"""What the SQLite and PostgreSQL team stores share: the columns, rows as records, and every method whose SQL
differs between the two only in its placeholder, its joined-order column, its row locks and its index hints.

A subclass says those differences as class attributes and gives :meth:`SQLTeamStore._tx` (a write
transaction) and :meth:`SQLTeamStore._read` (a read); queries here are written with ``?`` placeholders, which
:meth:`SQLTeamStore._q` turns into the subclass's own.  What really differs (how a new task id or mail ``seq``
is taken under concurrency) stays in the subclasses.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from ..store._writer_main import scrub
from . import _rules as rules
from .model import MailRecord, MemberRecord, MemberStatus, TaskRecord, TaskStatus, TeamError, TeamRecord, check_name

__all__ = ["CLAIMABLE", "MAIL_COLS", "MEMBER_COLS", "TASK_COLS", "SQLTeamStore", "mail_record", "member_record",
           "task_record"]

#: A task that can be claimed, on alias ``t``: pending, unowned, every blocker completed.
CLAIMABLE = ("t.status = 'pending' AND t.owner IS NULL AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks b "
             "ON b.team = d.team AND b.id = d.blocker WHERE d.team = t.team AND d.task = t.id "
             "AND b.status <> 'completed')")
TASK_COLS = "team, id, subject, description, status, owner, created_at, updated_at, note"
MEMBER_COLS = ("team, name, agent_type, agent_id, model, mode, status, require_plan_approval, plan_approved, "
               "joined_at")
MAIL_COLS = "team, seq, sender, recipient, text, at, kind, read"
_CLAIM = (f"UPDATE tasks AS t SET status = 'in_progress', owner = ?, updated_at = ? "
          f"WHERE t.team = ? AND t.id = ? AND {CLAIMABLE} RETURNING {TASK_COLS}")
_OPEN_BLOCKERS = ("SELECT d.blocker FROM task_deps d JOIN tasks b ON b.team = d.team AND b.id = d.blocker "
                  "WHERE d.team = ? AND d.task = ? AND b.status <> 'completed' ORDER BY d.blocker")


def member_record(r: Sequence[Any]) -> MemberRecord:
    return MemberRecord(r[0], r[1], r[2], r[3], r[4], r[5], MemberStatus(r[6]), bool(r[7]), bool(r[8]), r[9])


def mail_record(r: Sequence[Any]) -> MailRecord:
    return MailRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]))


def task_record(r: Sequence[Any], deps: Sequence[int]) -> TaskRecord:
    return TaskRecord(r[0], r[1], r[2], r[3], TaskStatus(r[4]), r[5], tuple(deps), r[6], r[7], r[8])


_TEAM_ROWS = ("team_mail", "task_deps", "tasks", "team_members")
"""The tables whose rows belong to a team (by its name), children first."""

class SQLTeamStore:
    """The methods both SQL team stores run alike (see the module docstring)."""

    PARAM: ClassVar[str] = "?"           # the driver's placeholder
    JOINED: ClassVar[str] = "rowid"      # the column giving members' joined order and teams' creation order
    ROW_LOCK: ClassVar[str] = ""         # appended to a read whose row the transaction goes on to change
    OWNED_INDEX: ClassVar[str] = ""      # index hints (SQLite plans better with them)
    UNREAD_INDEX: ClassVar[str] = ""
    CLAIM_NEXT: ClassVar[str] = ""       # claim the lowest claimable id; parameters: owner, at, team, team

    def _tx(self, doing: str) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self, doing: str) -> AbstractContextManager[Any]:
        raise NotImplementedError

    @staticmethod
    def _clean(text: str) -> str:
        """``text`` as the database can store it: a lone surrogate (which UTF-8 cannot hold; JSON's ``"\\ud800"`` in
        a model's tool call gives one) becomes U+FFFD, as the run store's writer does."""
        cleaned: str = scrub(text)
        return cleaned

    def _q(self, sql: str) -> str:
        return sql if self.PARAM == "?" else sql.replace("?", self.PARAM)

    # -- reads inside a transaction ---------------------------------------------------------------
    def _has_team(self, c: Any, team: str, lock: bool = False) -> None:
        if c.execute(self._q("SELECT 1 FROM teams WHERE name = ?") + (self.ROW_LOCK if lock else ""),
                     (team,)).fetchone() is None:
            raise rules.unknown_team(team)

    def _names(self, c: Any, team: str) -> list[str]:
        return [r[0] for r in c.execute(self._q(f"SELECT name FROM team_members WHERE team = ? ORDER BY {self.JOINED}"),
                                        (team,))]

    def _party(self, c: Any, team: str, *names: str) -> None:
        """The team exists and each of ``names`` is its lead or one of its members."""
        self._has_team(c, team)
        members = self._names(c, team)
        for n in names:
            rules.check_party(team, n, members)

    def _task(self, c: Any, team: str, task_id: int, row: Sequence[Any] | None = None, lock: bool = False
              ) -> TaskRecord | None:
        if row is None:
            if not -(2**63) <= task_id < 2**63:  # (no such task: the database's integers are 64-bit)
                return None
            row = c.execute(self._q(f"SELECT {TASK_COLS} FROM tasks WHERE team = ? AND id = ?")
                            + (self.ROW_LOCK if lock else ""), (team, task_id)).fetchone()
            if row is None:
                return None
        deps = [r[0] for r in c.execute(
            self._q("SELECT blocker FROM task_deps WHERE team = ? AND task = ? ORDER BY blocker"), (team, row[1]))]
        return task_record(row, deps)

    def _refused(self, c: Any, team: str, task_id: int) -> TeamError:
        rec = self._task(c, team, task_id)
        blockers = [] if rec is None else [r[0] for r in c.execute(self._q(_OPEN_BLOCKERS), (team, task_id))]
        return rules.refused(team, task_id, rec, blockers)

    # -- teams ----------------------------------------------------------------------------------
    def create_team(self, name: str, lead_id: str, at: float, description: str = "") -> TeamRecord:
        check_name("team", name)
        description = self._clean(description)
        with self._tx("creating a team") as c:
            if c.execute(self._q("INSERT INTO teams (name, lead_id, created_at, description) VALUES (?, ?, ?, ?) "
                                 "ON CONFLICT (name) DO NOTHING RETURNING name"),
                         (name, lead_id, at, description)).fetchone() is None:
                raise rules.duplicate_team(name)
            # a store this runtime writes never holds rows of a team that does not exist (delete_team removes them
            # all); one that came with a project can: its planted mail and tasks must not reach the new team
            for table in _TEAM_ROWS:
                c.execute(self._q(f"DELETE FROM {table} WHERE team = ?"), (name,))
        return TeamRecord(name, lead_id, at, description)

    def get_team(self, name: str) -> TeamRecord | None:
        with self._read("reading a team") as c:
            r = c.execute(self._q("SELECT name, lead_id, created_at, description FROM teams WHERE name = ?"),
                          (name,)).fetchone()
        return None if r is None else TeamRecord(*r)

    def list_teams(self) -> list[TeamRecord]:
        with self._read("listing teams") as c:
            rows = c.execute(f"SELECT name, lead_id, created_at, description FROM teams ORDER BY created_at, "
                             f"{self.JOINED}")
            return [TeamRecord(*r) for r in rows]

    def delete_team(self, name: str) -> None:
        with self._tx("deleting a team") as c:
            self._has_team(c, name, lock=True)
            live = c.execute(self._q(f"SELECT name, status FROM team_members WHERE team = ? AND status <> ? "
                                     f"ORDER BY {self.JOINED}"), (name, MemberStatus.SHUT_DOWN.value)).fetchall()
            if live:
                raise rules.delete_refused(name, live)
            for table in _TEAM_ROWS:
                c.execute(self._q(f"DELETE FROM {table} WHERE team = ?"), (name,))
            c.execute(self._q("DELETE FROM teams WHERE name = ?"), (name,))

    # -- members --------------------------------------------------------------------------------
    def add_member(self, rec: MemberRecord) -> None:
        check_name("member", rec.name)
        status = rules.as_member_status(rec.status)
        with self._tx("adding a team member") as c:
            self._has_team(c, rec.team, lock=True)
            if c.execute(self._q(f"INSERT INTO team_members ({MEMBER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                                 "ON CONFLICT (team, name) DO NOTHING RETURNING name"),
                         (rec.team, rec.name, rec.agent_type, rec.agent_id, rec.model, rec.mode, status.value,
                          int(rec.require_plan_approval), int(rec.plan_approved), rec.joined_at)).fetchone() is None:
                raise rules.duplicate_member(rec.team, rec.name)

    def update_member(self, team: str, name: str, *, status: MemberStatus | None = None,
                      agent_id: str | None = None, plan_approved: bool | None = None) -> MemberRecord:
        new_status = None if status is None else rules.as_member_status(status).value
        approved = None if plan_approved is None else int(plan_approved)
        with self._tx("updating a team member") as c:
            self._has_team(c, team)
            row = c.execute(self._q(f"UPDATE team_members SET status = coalesce(?, status), "
                                    f"agent_id = coalesce(?, agent_id), "
                                    f"plan_approved = coalesce(CAST(? AS INTEGER), plan_approved) "
                                    f"WHERE team = ? AND name = ? RETURNING {MEMBER_COLS}"),
                            (new_status, agent_id, approved, team, name)).fetchone()
            if row is None:
                raise rules.unknown_member(team, name, self._names(c, team))
        return member_record(row)

    def members(self, team: str) -> list[MemberRecord]:
        with self._read("reading team members") as c:
            self._has_team(c, team)
            rows = c.execute(self._q(f"SELECT {MEMBER_COLS} FROM team_members WHERE team = ? ORDER BY {self.JOINED}"),
                             (team,))
            return [member_record(r) for r in rows]

    def member(self, team: str, name: str) -> MemberRecord | None:
        with self._read("reading a team member") as c:
            r = c.execute(self._q(f"SELECT {MEMBER_COLS} FROM team_members WHERE team = ? AND name = ?"),
                          (team, name)).fetchone()
        return None if r is None else member_record(r)

    # -- the task board -------------------------------------------------------------------------
    def tasks(self, team: str, status: TaskStatus | None = None) -> list[TaskRecord]:
        want = None if status is None else rules.as_task_status(status).value
        with self._read("reading the task board") as c:
            self._has_team(c, team)
            deps: dict[int, list[int]] = {}
            for task, blocker in c.execute(self._q("SELECT task, blocker FROM task_deps WHERE team = ? "
                                                   "ORDER BY task, blocker"), (team,)):
                deps.setdefault(task, []).append(blocker)
            cond, params = (" AND status = ?", (team, want)) if want is not None else ("", (team,))
            rows = c.execute(self._q(f"SELECT {TASK_COLS} FROM tasks WHERE team = ?{cond} ORDER BY id"),
                             params).fetchall()
        return [task_record(r, deps.get(r[1], ())) for r in rows]

    def task(self, team: str, task_id: int) -> TaskRecord | None:
        with self._read("reading a task") as c:
            return self._task(c, team, task_id)

    def claim(self, team: str, task_id: int, owner: str, at: float) -> TaskRecord:
        with self._tx("claiming a task") as c:
            self._party(c, team, owner)
            row = c.execute(self._q(_CLAIM), (owner, at, team, task_id)).fetchone()
            if row is None:
                rec = self._task(c, team, task_id)
                if rec is not None and rec.status == TaskStatus.IN_PROGRESS and rec.owner == owner:
                    return rec  # one's own task: unchanged
                raise self._refused(c, team, task_id)
            rec = self._task(c, team, task_id, row)
        assert rec is not None
        return rec

    def claim_next(self, team: str, owner: str, at: float) -> TaskRecord | None:
        with self._tx("claiming a task") as c:
            self._party(c, team, owner)
            row = c.execute(self._q(self.CLAIM_NEXT), (owner, at, team, team)).fetchone()
            return None if row is None else self._task(c, team, row[1], row)

    def update_task(self, team: str, task_id: int, *, by: str, status: TaskStatus | None = None,
                    note: str | None = None, at: float = 0.0) -> TaskRecord:
        want = None if status is None else rules.as_task_status(status)
        with self._tx("updating a task") as c:
            self._party(c, team, by)
            rec = self._task(c, team, task_id, lock=True)  # the row stays as read until the commit
            if rec is None:
                raise rules.unknown_task(team, task_id)
            new_status, owner, claim_first = rules.plan_update(rec, by, want, note)
            if claim_first and c.execute(self._q(_CLAIM), (by, at, team, task_id)).fetchone() is None:
                raise self._refused(c, team, task_id)
            row = c.execute(self._q(f"UPDATE tasks SET status = ?, owner = ?, updated_at = ?, note = coalesce(?, note) "
                                    f"WHERE team = ? AND id = ? RETURNING {TASK_COLS}"),
                            (new_status.value, owner, at, None if note is None else self._clean(note), team, task_id)
                            ).fetchone()
            rec = self._task(c, team, task_id, row)
        assert rec is not None
        return rec

    def release_tasks(self, team: str, owner: str, at: float) -> list[int]:
        with self._tx("releasing tasks") as c:
            self._has_team(c, team)
            rows = c.execute(self._q(f"UPDATE tasks{self.OWNED_INDEX} SET status = 'pending', owner = NULL, "
                                     "updated_at = ? WHERE team = ? AND owner = ? AND status = 'in_progress' "
                                     "RETURNING id"), (at, team, owner))
            return sorted(r[0] for r in rows)

    # -- the mailbox ----------------------------------------------------------------------------
    def unread(self, team: str, recipient: str) -> list[MailRecord]:
        with self._read("reading team mail") as c:
            self._party(c, team, recipient)
            rows = c.execute(self._q(f"SELECT {MAIL_COLS} FROM team_mail{self.UNREAD_INDEX} "
                                     "WHERE team = ? AND recipient = ? AND read = 0 ORDER BY seq"), (team, recipient))
            return [mail_record(r) for r in rows]

    def mark_read(self, team: str, recipient: str, up_to_seq: int) -> None:
        with self._tx("marking team mail read") as c:
            self._party(c, team, recipient)
            c.execute(self._q(f"UPDATE team_mail{self.UNREAD_INDEX} SET read = 1 "
                              "WHERE team = ? AND recipient = ? AND read = 0 AND seq <= ?"),
                      (team, recipient, up_to_seq))

    def mail(self, team: str, limit: int = 50) -> list[MailRecord]:
        with self._read("reading team mail") as c:
            self._has_team(c, team)
            rows = c.execute(self._q(f"SELECT {MAIL_COLS} FROM team_mail WHERE team = ? ORDER BY seq DESC LIMIT ?"),
                             (team, max(limit, 0))).fetchall()
        return [mail_record(r) for r in reversed(rows)]
