"""``PostgresTeamStore``: teams, task boards and mail as tables in the PostgreSQL run store's database.

The tables are those of the SQLite team store (:mod:`subagents.teams.sqlite`; schema in
:mod:`subagents.store._pg_schema`), with an identity column ``ord`` for the joined order of members
and the creation order of teams.  Every method is one short transaction on a connection of a small
pool (``psycopg_pool``), so the threads of one process work in parallel, as do processes on many machines.

Under PostgreSQL's ``READ COMMITTED``, what SQLite gets from ``BEGIN IMMEDIATE`` (one writer at a time)
is obtained row by row:

* **the claim** is one conditional ``UPDATE ... RETURNING`` (pending, unowned, every blocker completed:
  :data:`~subagents.teams.sqlite.CLAIMABLE`): a second claimant waits for the first one's row lock, then
  re-checks the condition on the row the first committed, and changes nothing — a task is claimed once.
  ``claim_next`` picks its task with ``FOR UPDATE SKIP LOCKED`` inside that statement, so claimants racing
  for "the next task" take different tasks instead of queueing on one.
* a task id and a mail ``seq`` (``max + 1`` within the team), adding a member and deleting a team take
  the team's row lock first (``SELECT ... FOR UPDATE``): they serialize per team.
* ``update_task`` locks the task's row before it reads it, so its rules see the state it changes.

Errors: :class:`~subagents.teams.model.TeamError` as the SQLite store words them (:mod:`._rules`); a failing
database becomes :class:`~subagents.exceptions.StoreError` saying what to do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..exceptions import StoreError
from ..store._pg_schema import open_schema
from ..store._pg_support import clean, connect, describe, pg_error
from . import _rules as rules
from .model import MailRecord, MemberRecord, MemberStatus, TaskRecord, TaskStatus, TeamError, TeamRecord, check_name
from .sqlite import CLAIMABLE

__all__ = ["PostgresTeamStore"]

_TASK_COLS = "team, id, subject, description, status, owner, created_at, updated_at, note"
_MEMBER_COLS = ("team, name, agent_type, agent_id, model, mode, status, require_plan_approval, plan_approved, "
                "joined_at")
_MAIL_COLS = "team, seq, sender, recipient, text, at, kind, read"
_CLAIM = (f"UPDATE tasks AS t SET status = 'in_progress', owner = %(owner)s, updated_at = %(at)s "
          f"WHERE t.team = %(team)s AND t.id = %(id)s AND {CLAIMABLE} RETURNING {_TASK_COLS}")
_CLAIM_NEXT = (f"UPDATE tasks AS t SET status = 'in_progress', owner = %(owner)s, updated_at = %(at)s "
               f"WHERE t.team = %(team)s AND {CLAIMABLE} AND t.id = (SELECT t.id FROM tasks AS t "
               f"WHERE t.team = %(team)s AND {CLAIMABLE} ORDER BY t.id LIMIT 1 FOR UPDATE SKIP LOCKED) "
               f"RETURNING {_TASK_COLS}")
_OPEN_BLOCKERS = ("SELECT d.blocker FROM task_deps d JOIN tasks b ON b.team = d.team AND b.id = d.blocker "
                  "WHERE d.team = %s AND d.task = %s AND b.status <> 'completed' ORDER BY d.blocker")

Conn = psycopg.Connection[Any]


def _member(r: Sequence[Any]) -> MemberRecord:
    return MemberRecord(r[0], r[1], r[2], r[3], r[4], r[5], MemberStatus(r[6]), bool(r[7]), bool(r[8]), r[9])


def _mail(r: Sequence[Any]) -> MailRecord:
    return MailRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]))


class PostgresTeamStore:
    """A :class:`~subagents.teams.store.TeamStore` in the PostgreSQL database at ``url`` (see the module docstring).

    The schema is created or migrated at open unless ``migrated`` (the run store on ``url`` did it);
    ``pool_size``: connections at most (threads beyond wait for one)."""

    def __init__(self, url: str, timeout: float = 10.0, *, migrated: bool = False, pool_size: int = 4) -> None:
        self.url = url
        self.where = describe(url)
        if not migrated:
            with contextlib.closing(connect(url, timeout, "opening it for teams")) as c:
                open_schema(c, url)
        self._pool: ConnectionPool[Conn] | None = ConnectionPool(
            url, min_size=1, max_size=max(1, pool_size), timeout=timeout, open=False, name="subagents-teams",
            check=ConnectionPool.check_connection,  # a connection the server dropped is replaced, not handed out
            kwargs={"autocommit": True, "application_name": "subagents-teams"})
        try:
            self._pool.open(wait=True, timeout=timeout)
        except psycopg.Error as e:
            self._pool.close()
            raise pg_error(url, e, "opening it for teams") from None

    @contextlib.contextmanager
    def _tx(self, doing: str) -> Iterator[Conn]:
        """One transaction on a pooled connection: committed when the block ends, rolled back when it raises
        (a :class:`TeamError` goes through unchanged, a ``psycopg.Error`` becomes a StoreError)."""
        pool = self._pool
        if pool is None:
            raise StoreError(f"the team store on {self.where} is closed; open the run store again to use it")
        try:
            with pool.connection() as c, c.transaction():
                yield c
        except psycopg.Error as e:
            raise pg_error(self.url, e, doing) from None

    # -- reads inside a transaction ---------------------------------------------------------------
    @staticmethod
    def _has_team(c: Conn, team: str, lock: bool = False) -> None:
        sql = "SELECT 1 FROM teams WHERE name = %s" + (" FOR UPDATE" if lock else "")
        if c.execute(sql, (team,)).fetchone() is None:
            raise rules.unknown_team(team)

    @staticmethod
    def _names(c: Conn, team: str) -> list[str]:
        return [r[0] for r in c.execute("SELECT name FROM team_members WHERE team = %s ORDER BY ord", (team,))]

    def _party(self, c: Conn, team: str, *names: str) -> None:
        """The team exists and each of ``names`` is its lead or one of its members."""
        self._has_team(c, team)
        members = self._names(c, team)
        for n in names:
            rules.check_party(team, n, members)

    @staticmethod
    def _task(c: Conn, team: str, task_id: int, row: Sequence[Any] | None = None, lock: bool = False
              ) -> TaskRecord | None:
        if row is None:
            row = c.execute(f"SELECT {_TASK_COLS} FROM tasks WHERE team = %s AND id = %s"
                            + (" FOR UPDATE" if lock else ""), (team, task_id)).fetchone()
            if row is None:
                return None
        deps = tuple(r[0] for r in c.execute(
            "SELECT blocker FROM task_deps WHERE team = %s AND task = %s ORDER BY blocker", (team, row[1])))
        return TaskRecord(row[0], row[1], row[2], row[3], TaskStatus(row[4]), row[5], deps, row[6], row[7], row[8])

    def _refused(self, c: Conn, team: str, task_id: int) -> TeamError:
        rec = self._task(c, team, task_id)
        blockers = [] if rec is None else [r[0] for r in c.execute(_OPEN_BLOCKERS, (team, task_id))]
        return rules.refused(team, task_id, rec, blockers)

    # -- teams ----------------------------------------------------------------------------------
    def create_team(self, name: str, lead_id: str, at: float, description: str = "") -> TeamRecord:
        check_name("team", name)
        with self._tx("creating a team") as c:
            if c.execute("INSERT INTO teams (name, lead_id, created_at, description) VALUES (%s, %s, %s, %s) "
                         "ON CONFLICT (name) DO NOTHING RETURNING name", (name, lead_id, at, clean(description))
                         ).fetchone() is None:
                raise rules.duplicate_team(name)
        return TeamRecord(name, lead_id, at, clean(description))

    def get_team(self, name: str) -> TeamRecord | None:
        with self._tx("reading a team") as c:
            r = c.execute("SELECT name, lead_id, created_at, description FROM teams WHERE name = %s",
                          (name,)).fetchone()
        return None if r is None else TeamRecord(*r)

    def list_teams(self) -> list[TeamRecord]:
        with self._tx("listing teams") as c:
            rows = c.execute("SELECT name, lead_id, created_at, description FROM teams ORDER BY created_at, ord")
            return [TeamRecord(*r) for r in rows]

    def delete_team(self, name: str) -> None:
        with self._tx("deleting a team") as c:
            self._has_team(c, name, lock=True)
            live = c.execute("SELECT name, status FROM team_members WHERE team = %s AND status <> %s ORDER BY ord",
                             (name, MemberStatus.SHUT_DOWN.value)).fetchall()
            if live:
                raise rules.delete_refused(name, live)
            for table, col in (("team_mail", "team"), ("task_deps", "team"), ("tasks", "team"),
                               ("team_members", "team"), ("teams", "name")):
                c.execute(f"DELETE FROM {table} WHERE {col} = %s", (name,))

    # -- members --------------------------------------------------------------------------------
    def add_member(self, rec: MemberRecord) -> None:
        check_name("member", rec.name)
        status = rules.as_member_status(rec.status)
        with self._tx("adding a team member") as c:
            self._has_team(c, rec.team, lock=True)
            if c.execute(f"INSERT INTO team_members ({_MEMBER_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                         "ON CONFLICT (team, name) DO NOTHING RETURNING name",
                         (rec.team, rec.name, rec.agent_type, rec.agent_id, rec.model, rec.mode, status.value,
                          int(rec.require_plan_approval), int(rec.plan_approved), rec.joined_at)).fetchone() is None:
                raise rules.duplicate_member(rec.team, rec.name)

    def update_member(self, team: str, name: str, *, status: MemberStatus | None = None,
                      agent_id: str | None = None, plan_approved: bool | None = None) -> MemberRecord:
        new_status = None if status is None else rules.as_member_status(status).value
        approved = None if plan_approved is None else int(plan_approved)
        with self._tx("updating a team member") as c:
            self._has_team(c, team)
            row = c.execute(f"UPDATE team_members SET status = coalesce(%s, status), "
                            f"agent_id = coalesce(%s, agent_id), plan_approved = coalesce(%s::integer, plan_approved) "
                            f"WHERE team = %s AND name = %s "
                            f"RETURNING {_MEMBER_COLS}", (new_status, agent_id, approved, team, name)).fetchone()
            if row is None:
                raise rules.unknown_member(team, name, self._names(c, team))
        return _member(row)

    def members(self, team: str) -> list[MemberRecord]:
        with self._tx("reading team members") as c:
            self._has_team(c, team)
            rows = c.execute(f"SELECT {_MEMBER_COLS} FROM team_members WHERE team = %s ORDER BY ord", (team,))
            return [_member(r) for r in rows]

    def member(self, team: str, name: str) -> MemberRecord | None:
        with self._tx("reading a team member") as c:
            r = c.execute(f"SELECT {_MEMBER_COLS} FROM team_members WHERE team = %s AND name = %s",
                          (team, name)).fetchone()
        return None if r is None else _member(r)

    # -- the task board -------------------------------------------------------------------------
    def create_task(self, team: str, subject: str, description: str = "",
                    blocked_by: Sequence[int] = (), at: float = 0.0) -> TaskRecord:
        rules.check_subject(subject)
        with self._tx("creating a task") as c:
            self._has_team(c, team, lock=True)  # one new task id at a time per team
            wanted = sorted({b for b in blocked_by if isinstance(b, int) and -2**63 <= b < 2**63})
            existing = [r[0] for r in c.execute("SELECT id FROM tasks WHERE team = %s AND id = ANY(%s::bigint[])",
                                                (team, wanted))] if wanted else []
            blockers = rules.check_blockers(team, blocked_by, existing)
            row = c.execute("SELECT coalesce(max(id), 0) + 1 FROM tasks WHERE team = %s", (team,)).fetchone()
            task_id = int(row[0]) if row else 1
            c.execute(f"INSERT INTO tasks ({_TASK_COLS}) VALUES (%s, %s, %s, %s, 'pending', NULL, %s, %s, '')",
                      (team, task_id, clean(subject), clean(description), at, at))
            if blockers:
                with c.cursor() as cur:
                    cur.executemany("INSERT INTO task_deps (team, task, blocker) VALUES (%s, %s, %s)",
                                    [(team, task_id, b) for b in blockers])
        return TaskRecord(team, task_id, clean(subject), clean(description), blocked_by=blockers, created_at=at,
                          updated_at=at)

    def tasks(self, team: str, status: TaskStatus | None = None) -> list[TaskRecord]:
        want = None if status is None else rules.as_task_status(status).value
        with self._tx("reading the task board") as c:
            self._has_team(c, team)
            deps: dict[int, list[int]] = {}
            for task, blocker in c.execute("SELECT task, blocker FROM task_deps WHERE team = %s "
                                           "ORDER BY task, blocker", (team,)):
                deps.setdefault(task, []).append(blocker)
            cond, params = (" AND status = %s", (team, want)) if want is not None else ("", (team,))
            rows = c.execute(f"SELECT {_TASK_COLS} FROM tasks WHERE team = %s{cond} ORDER BY id", params).fetchall()
        return [TaskRecord(r[0], r[1], r[2], r[3], TaskStatus(r[4]), r[5], tuple(deps.get(r[1], ())), r[6], r[7],
                           r[8]) for r in rows]

    def task(self, team: str, task_id: int) -> TaskRecord | None:
        with self._tx("reading a task") as c:
            return self._task(c, team, task_id)

    def claim(self, team: str, task_id: int, owner: str, at: float) -> TaskRecord:
        with self._tx("claiming a task") as c:
            self._party(c, team, owner)
            row = c.execute(_CLAIM, {"owner": owner, "at": at, "team": team, "id": task_id}).fetchone()
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
            row = c.execute(_CLAIM_NEXT, {"owner": owner, "at": at, "team": team}).fetchone()
            return None if row is None else self._task(c, team, row[1], row)

    def update_task(self, team: str, task_id: int, *, by: str, status: TaskStatus | None = None,
                    note: str | None = None, at: float = 0.0) -> TaskRecord:
        want = None if status is None else rules.as_task_status(status)
        with self._tx("updating a task") as c:
            self._party(c, team, by)
            rec = self._task(c, team, task_id, lock=True)  # the row stays as read until the commit
            if rec is None:
                raise rules.unknown_task(team, task_id)
            new_status, owner, claim_first = rules.plan_update(rec, by, want)
            if claim_first and c.execute(_CLAIM, {"owner": by, "at": at, "team": team, "id": task_id}
                                         ).fetchone() is None:
                raise self._refused(c, team, task_id)
            row = c.execute(f"UPDATE tasks SET status = %s, owner = %s, updated_at = %s, note = coalesce(%s, note) "
                            f"WHERE team = %s AND id = %s RETURNING {_TASK_COLS}",
                            (new_status.value, owner, at, None if note is None else clean(note), team, task_id)
                            ).fetchone()
            rec = self._task(c, team, task_id, row)
        assert rec is not None
        return rec

    def release_tasks(self, team: str, owner: str, at: float) -> list[int]:
        with self._tx("releasing tasks") as c:
            self._has_team(c, team)
            rows = c.execute("UPDATE tasks SET status = 'pending', owner = NULL, updated_at = %s "
                             "WHERE team = %s AND owner = %s AND status = 'in_progress' RETURNING id",
                             (at, team, owner))
            return sorted(r[0] for r in rows)

    # -- the mailbox ----------------------------------------------------------------------------
    def send(self, team: str, sender: str, recipients: Sequence[str], text: str, at: float,
             kind: str = "message") -> list[MailRecord]:
        if isinstance(recipients, str):
            raise TeamError("recipients is a list of names; wrap a single name in a list")
        to = list(dict.fromkeys(recipients))
        with self._tx("sending team mail") as c:
            self._has_team(c, team, lock=True)  # one sender at a time per team: seq stays max + 1
            self._party(c, team, sender, *to)
            row = c.execute("SELECT coalesce(max(seq), 0) + 1 FROM team_mail WHERE team = %s", (team,)).fetchone()
            first = int(row[0]) if row else 1
            out = [MailRecord(team, first + i, sender, r, clean(text), at, kind) for i, r in enumerate(to)]
            if out:
                with c.cursor() as cur:
                    cur.executemany(f"INSERT INTO team_mail ({_MAIL_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s, 0)",
                                    [(m.team, m.seq, m.sender, m.recipient, m.text, m.at, m.kind) for m in out])
        return out

    def unread(self, team: str, recipient: str) -> list[MailRecord]:
        with self._tx("reading team mail") as c:
            self._party(c, team, recipient)
            rows = c.execute(f"SELECT {_MAIL_COLS} FROM team_mail WHERE team = %s AND recipient = %s AND read = 0 "
                             "ORDER BY seq", (team, recipient))
            return [_mail(r) for r in rows]

    def mark_read(self, team: str, recipient: str, up_to_seq: int) -> None:
        with self._tx("marking team mail read") as c:
            self._party(c, team, recipient)
            c.execute("UPDATE team_mail SET read = 1 WHERE team = %s AND recipient = %s AND read = 0 "
                      "AND seq <= %s", (team, recipient, up_to_seq))

    def mail(self, team: str, limit: int = 50) -> list[MailRecord]:
        with self._tx("reading team mail") as c:
            self._has_team(c, team)
            rows = c.execute(f"SELECT {_MAIL_COLS} FROM team_mail WHERE team = %s ORDER BY seq DESC LIMIT %s",
                             (team, max(limit, 0))).fetchall()
        return [_mail(r) for r in reversed(rows)]

    def close(self) -> None:
        """Close the pool (a second call does nothing; later calls raise :class:`StoreError`)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
