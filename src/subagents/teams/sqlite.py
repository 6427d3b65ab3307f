"""``SQLiteTeamStore``: teams, their task boards and their mail as tables in the run store's SQLite file.

The tables (schema 6, :mod:`subagents.store._schema`)::

    teams(name PK, lead_id, created_at, description)
    team_members(team, name, agent_type, agent_id, model, mode, status, require_plan_approval,
                 plan_approved, joined_at, PK(team, name))           -- joined order: rowid
    tasks(team, id, subject, description, status, owner, created_at, updated_at, note,
          PK(team, id)) WITHOUT ROWID
      tasks_claimable(team, id) WHERE status = 'pending' AND owner IS NULL
      tasks_owned(team, owner) WHERE status = 'in_progress'
    task_deps(team, task, blocker, PK(team, task, blocker)) WITHOUT ROWID   -- task waits for blocker
    team_mail(team, seq, sender, recipient, text, at, kind, read, PK(team, seq)) WITHOUT ROWID
      team_mail_unread(team, recipient, seq) WHERE read = 0

How it writes: on its **own** connection (not the run store's writer thread, whose batches are
deferred), every method one short transaction — ``BEGIN IMMEDIATE`` for a write, so the write lock
is taken at the start and two processes on one file serialize instead of failing on an upgrade.  A
task id and a mail ``seq`` are ``max + 1`` within the team, read inside that transaction.  Tasks are
never deleted one by one (only with their team), so ids are never reused.

The claim is one conditional ``UPDATE`` (:data:`CLAIMABLE`: pending, unowned, and no blocker that is not
completed), never a read-then-write: 50 claimants in one process or several get a task exactly once.
When it changes no row, the store reads why (owned, blocked, completed, unknown) and raises
:class:`~subagents.teams.model.ClaimRefused`.  ``claim_next`` is the same ``UPDATE`` on the lowest id
the ``tasks_claimable`` index offers.  The queries name their partial indexes (``INDEXED BY``): without
statistics SQLite would rather walk the primary key of the whole team.  Threads of one process share
the connection under a lock.

A method returns once its transaction is committed (``synchronous`` as the run store set it: a commit
survives the process being killed).  ``sqlite3.Error`` becomes :class:`~subagents.exceptions.StoreError`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ..store._open import open_writer
from ..store._support import store_error
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

__all__ = ["CLAIMABLE", "SQLiteTeamStore"]

#: A task that can be claimed, on alias ``t``: pending, unowned, every blocker completed.
CLAIMABLE = ("t.status = 'pending' AND t.owner IS NULL AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks b "
             "ON b.team = d.team AND b.id = d.blocker WHERE d.team = t.team AND d.task = t.id "
             "AND b.status <> 'completed')")

_TASK_COLS = "team, id, subject, description, status, owner, created_at, updated_at, note"
_MEMBER_COLS = ("team, name, agent_type, agent_id, model, mode, status, require_plan_approval, plan_approved, "
                "joined_at")
_MAIL_COLS = "team, seq, sender, recipient, text, at, kind, read"
_CLAIM = (f"UPDATE tasks AS t SET status = 'in_progress', owner = ?1, updated_at = ?2 "
          f"WHERE t.team = ?3 AND t.id = ?4 AND {CLAIMABLE} RETURNING {_TASK_COLS}")
_CLAIM_NEXT = (f"UPDATE tasks AS t SET status = 'in_progress', owner = ?1, updated_at = ?2 WHERE t.team = ?3 "
               f"AND t.id = (SELECT t.id FROM tasks AS t INDEXED BY tasks_claimable WHERE t.team = ?3 AND {CLAIMABLE} "
               f"ORDER BY t.id LIMIT 1) "
               f"RETURNING {_TASK_COLS}")
_OPEN_BLOCKERS = ("SELECT d.blocker FROM task_deps d JOIN tasks b ON b.team = d.team AND b.id = d.blocker "
                  "WHERE d.team = ? AND d.task = ? AND b.status <> 'completed' ORDER BY d.blocker")


def _member(r: Sequence[Any]) -> MemberRecord:
    return MemberRecord(r[0], r[1], r[2], r[3], r[4], r[5], MemberStatus(r[6]), bool(r[7]), bool(r[8]), r[9])


def _mail(r: Sequence[Any]) -> MailRecord:
    return MailRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]))


class SQLiteTeamStore:
    """A :class:`~subagents.teams.store.TeamStore` in the SQLite file at ``path`` (see the module docstring).

    ``path`` may be a new file (a run store is created there) or an older store (migrated forward).
    ``autocheckpoint=False`` when the run store on the same file runs its checkpointer (it copies this
    connection's commits back too); standalone, SQLite's own checkpoints keep the WAL bounded.
    """

    def __init__(self, path: str | Path, timeout: float = 5.0, *, autocheckpoint: bool = True) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None
        self._conn, _ = open_writer(self.path, timeout, durable=False)
        if autocheckpoint:
            try:
                self._conn.execute("PRAGMA wal_autocheckpoint=1000")
            except sqlite3.Error as e:
                self._conn.close()
                raise store_error(self.path, e, "opening it for teams") from None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _tx(self, doing: str, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction on the connection, under the lock: committed when the block ends, rolled back when
        it raises (a :class:`TeamError` goes through unchanged, an ``sqlite3.Error`` becomes a StoreError)."""
        with self._lock:
            c = self._conn
            if c is None:
                raise StoreError(f"the team store on {self.path} is closed; open the run store again to use it")
            try:
                c.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield c
                except BaseException:
                    c.execute("ROLLBACK")
                    raise
                c.execute("COMMIT")
            except sqlite3.Error as e:
                if c.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        c.execute("ROLLBACK")
                raise store_error(self.path, e, doing) from None

    # -- reads inside a transaction ---------------------------------------------------------------
    @staticmethod
    def _has_team(c: sqlite3.Connection, team: str) -> None:
        if c.execute("SELECT 1 FROM teams WHERE name = ?", (team,)).fetchone() is None:
            raise rules.unknown_team(team)

    @staticmethod
    def _names(c: sqlite3.Connection, team: str) -> list[str]:
        return [r[0] for r in c.execute("SELECT name FROM team_members WHERE team = ? ORDER BY rowid", (team,))]

    def _party(self, c: sqlite3.Connection, team: str, *names: str) -> None:
        """The team exists and each of ``names`` is its lead or one of its members."""
        self._has_team(c, team)
        members = self._names(c, team)
        for n in names:
            rules.check_party(team, n, members)

    @staticmethod
    def _task(c: sqlite3.Connection, team: str, task_id: int, row: Sequence[Any] | None = None) -> TaskRecord | None:
        if row is None:
            row = c.execute(f"SELECT {_TASK_COLS} FROM tasks WHERE team = ? AND id = ?", (team, task_id)).fetchone()
            if row is None:
                return None
        deps = tuple(r[0] for r in c.execute(
            "SELECT blocker FROM task_deps WHERE team = ? AND task = ? ORDER BY blocker", (team, row[1])))
        return TaskRecord(row[0], row[1], row[2], row[3], TaskStatus(row[4]), row[5], deps, row[6], row[7], row[8])

    def _refused(self, c: sqlite3.Connection, team: str, task_id: int) -> TeamError:
        rec = self._task(c, team, task_id)
        blockers = [] if rec is None else [r[0] for r in c.execute(_OPEN_BLOCKERS, (team, task_id))]
        return rules.refused(team, task_id, rec, blockers)

    # -- teams ----------------------------------------------------------------------------------
    def create_team(self, name: str, lead_id: str, at: float, description: str = "") -> TeamRecord:
        check_name("team", name)
        with self._tx("creating a team") as c:
            if c.execute("SELECT 1 FROM teams WHERE name = ?", (name,)).fetchone() is not None:
                raise rules.duplicate_team(name)
            c.execute("INSERT INTO teams (name, lead_id, created_at, description) VALUES (?, ?, ?, ?)",
                      (name, lead_id, at, description))
        return TeamRecord(name, lead_id, at, description)

    def get_team(self, name: str) -> TeamRecord | None:
        with self._tx("reading a team", write=False) as c:
            r = c.execute("SELECT name, lead_id, created_at, description FROM teams WHERE name = ?", (name,)).fetchone()
        return None if r is None else TeamRecord(*r)

    def list_teams(self) -> list[TeamRecord]:
        with self._tx("listing teams", write=False) as c:
            rows = c.execute("SELECT name, lead_id, created_at, description FROM teams ORDER BY created_at, rowid")
            return [TeamRecord(*r) for r in rows]

    def delete_team(self, name: str) -> None:
        with self._tx("deleting a team") as c:
            self._has_team(c, name)
            live = c.execute("SELECT name, status FROM team_members WHERE team = ? AND status <> ? ORDER BY rowid",
                             (name, MemberStatus.SHUT_DOWN.value)).fetchall()
            if live:
                raise rules.delete_refused(name, live)
            for table, col in (("team_mail", "team"), ("task_deps", "team"), ("tasks", "team"),
                               ("team_members", "team"), ("teams", "name")):
                c.execute(f"DELETE FROM {table} WHERE {col} = ?", (name,))

    # -- members --------------------------------------------------------------------------------
    def add_member(self, rec: MemberRecord) -> None:
        check_name("member", rec.name)
        status = rules.as_member_status(rec.status)
        with self._tx("adding a team member") as c:
            self._has_team(c, rec.team)
            if c.execute("SELECT 1 FROM team_members WHERE team = ? AND name = ?", (rec.team, rec.name)).fetchone():
                raise rules.duplicate_member(rec.team, rec.name)
            c.execute(f"INSERT INTO team_members ({_MEMBER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (rec.team, rec.name, rec.agent_type, rec.agent_id, rec.model, rec.mode, status.value,
                       int(rec.require_plan_approval), int(rec.plan_approved), rec.joined_at))

    def update_member(self, team: str, name: str, *, status: MemberStatus | None = None,
                      agent_id: str | None = None, plan_approved: bool | None = None) -> MemberRecord:
        new_status = None if status is None else rules.as_member_status(status).value
        approved = None if plan_approved is None else int(plan_approved)
        with self._tx("updating a team member") as c:
            self._has_team(c, team)
            row = c.execute(f"UPDATE team_members SET status = coalesce(?, status), agent_id = coalesce(?, agent_id), "
                            f"plan_approved = coalesce(?, plan_approved) WHERE team = ? AND name = ? "
                            f"RETURNING {_MEMBER_COLS}", (new_status, agent_id, approved, team, name)).fetchone()
            if row is None:
                raise rules.unknown_member(team, name, self._names(c, team))
        return _member(row)

    def members(self, team: str) -> list[MemberRecord]:
        with self._tx("reading team members", write=False) as c:
            self._has_team(c, team)
            rows = c.execute(f"SELECT {_MEMBER_COLS} FROM team_members WHERE team = ? ORDER BY rowid", (team,))
            return [_member(r) for r in rows]

    def member(self, team: str, name: str) -> MemberRecord | None:
        with self._tx("reading a team member", write=False) as c:
            r = c.execute(f"SELECT {_MEMBER_COLS} FROM team_members WHERE team = ? AND name = ?",
                          (team, name)).fetchone()
        return None if r is None else _member(r)

    # -- the task board -------------------------------------------------------------------------
    def create_task(self, team: str, subject: str, description: str = "",
                    blocked_by: Sequence[int] = (), at: float = 0.0) -> TaskRecord:
        rules.check_subject(subject)
        with self._tx("creating a task") as c:
            self._has_team(c, team)
            wanted = {b for b in blocked_by if isinstance(b, int)}
            existing = [r[0] for r in c.execute(
                f"SELECT id FROM tasks WHERE team = ? AND id IN ({', '.join('?' * len(wanted))})",
                (team, *wanted))] if wanted else []
            blockers = rules.check_blockers(team, blocked_by, existing)
            task_id = c.execute("SELECT coalesce(max(id), 0) + 1 FROM tasks WHERE team = ?", (team,)).fetchone()[0]
            c.execute(f"INSERT INTO tasks ({_TASK_COLS}) VALUES (?, ?, ?, ?, 'pending', NULL, ?, ?, '')",
                      (team, task_id, subject, description, at, at))
            c.executemany("INSERT INTO task_deps (team, task, blocker) VALUES (?, ?, ?)",
                          [(team, task_id, b) for b in blockers])
        return TaskRecord(team, task_id, subject, description, blocked_by=blockers, created_at=at, updated_at=at)

    def tasks(self, team: str, status: TaskStatus | None = None) -> list[TaskRecord]:
        want = None if status is None else rules.as_task_status(status).value
        with self._tx("reading the task board", write=False) as c:
            self._has_team(c, team)
            deps: dict[int, list[int]] = {}
            for task, blocker in c.execute("SELECT task, blocker FROM task_deps WHERE team = ? ORDER BY task, blocker",
                                           (team,)):
                deps.setdefault(task, []).append(blocker)
            rows = c.execute(f"SELECT {_TASK_COLS} FROM tasks WHERE team = ?1 AND (?2 IS NULL OR status = ?2) "
                             "ORDER BY id", (team, want)).fetchall()
        return [TaskRecord(r[0], r[1], r[2], r[3], TaskStatus(r[4]), r[5], tuple(deps.get(r[1], ())), r[6], r[7], r[8])
                for r in rows]

    def task(self, team: str, task_id: int) -> TaskRecord | None:
        with self._tx("reading a task", write=False) as c:
            return self._task(c, team, task_id)

    def claim(self, team: str, task_id: int, owner: str, at: float) -> TaskRecord:
        with self._tx("claiming a task") as c:
            self._party(c, team, owner)
            row = c.execute(_CLAIM, (owner, at, team, task_id)).fetchone()
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
            row = c.execute(_CLAIM_NEXT, (owner, at, team)).fetchone()
            return None if row is None else self._task(c, team, row[1], row)

    def update_task(self, team: str, task_id: int, *, by: str, status: TaskStatus | None = None,
                    note: str | None = None, at: float = 0.0) -> TaskRecord:
        want = None if status is None else rules.as_task_status(status)
        with self._tx("updating a task") as c:
            self._party(c, team, by)
            rec = self._task(c, team, task_id)
            if rec is None:
                raise rules.unknown_task(team, task_id)
            new_status, owner, claim_first = rules.plan_update(rec, by, want)
            if claim_first and c.execute(_CLAIM, (by, at, team, task_id)).fetchone() is None:
                raise self._refused(c, team, task_id)
            row = c.execute(f"UPDATE tasks SET status = ?, owner = ?, updated_at = ?, note = coalesce(?, note) "
                            f"WHERE team = ? AND id = ? RETURNING {_TASK_COLS}",
                            (new_status.value, owner, at, note, team, task_id)).fetchone()
            rec = self._task(c, team, task_id, row)
        assert rec is not None
        return rec

    def release_tasks(self, team: str, owner: str, at: float) -> list[int]:
        with self._tx("releasing tasks") as c:
            self._has_team(c, team)
            rows = c.execute("UPDATE tasks INDEXED BY tasks_owned SET status = 'pending', owner = NULL, updated_at = ? "
                             "WHERE team = ? AND owner = ? AND status = 'in_progress' RETURNING id", (at, team, owner))
            return sorted(r[0] for r in rows)

    # -- the mailbox ----------------------------------------------------------------------------
    def send(self, team: str, sender: str, recipients: Sequence[str], text: str, at: float,
             kind: str = "message") -> list[MailRecord]:
        if isinstance(recipients, str):
            raise TeamError("recipients is a list of names; wrap a single name in a list")
        to = list(dict.fromkeys(recipients))
        with self._tx("sending team mail") as c:
            self._party(c, team, sender, *to)
            first = c.execute("SELECT coalesce(max(seq), 0) + 1 FROM team_mail WHERE team = ?", (team,)).fetchone()[0]
            out = [MailRecord(team, first + i, sender, r, text, at, kind) for i, r in enumerate(to)]
            c.executemany(f"INSERT INTO team_mail ({_MAIL_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                          [(m.team, m.seq, m.sender, m.recipient, m.text, m.at, m.kind) for m in out])
        return out

    def unread(self, team: str, recipient: str) -> list[MailRecord]:
        with self._tx("reading team mail", write=False) as c:
            self._party(c, team, recipient)
            rows = c.execute(f"SELECT {_MAIL_COLS} FROM team_mail INDEXED BY team_mail_unread "
                             "WHERE team = ? AND recipient = ? AND read = 0 ORDER BY seq", (team, recipient))
            return [_mail(r) for r in rows]

    def mark_read(self, team: str, recipient: str, up_to_seq: int) -> None:
        with self._tx("marking team mail read") as c:
            self._party(c, team, recipient)
            c.execute("UPDATE team_mail INDEXED BY team_mail_unread SET read = 1 "
                      "WHERE team = ? AND recipient = ? AND read = 0 AND seq <= ?", (team, recipient, up_to_seq))

    def mail(self, team: str, limit: int = 50) -> list[MailRecord]:
        with self._tx("reading team mail", write=False) as c:
            self._has_team(c, team)
            rows = c.execute(f"SELECT {_MAIL_COLS} FROM team_mail WHERE team = ? ORDER BY seq DESC LIMIT ?",
                             (team, max(limit, 0))).fetchall()
        return [_mail(r) for r in reversed(rows)]

    def close(self) -> None:
        """Close the connection (a second call does nothing; later calls raise :class:`StoreError`)."""
        with self._lock:
            c, self._conn = self._conn, None
        if c is not None:
            with contextlib.suppress(sqlite3.Error):
                c.close()
