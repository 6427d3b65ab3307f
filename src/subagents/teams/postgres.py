"""``PostgresTeamStore``: teams, task boards and mail as tables in the PostgreSQL run store's database.

The tables are those of the SQLite team store (:mod:`subagents.teams.sqlite`; schema in
:mod:`subagents.store._pg_schema`), with an identity column ``ord`` for the joined order of members
and the creation order of teams.  Every method is one short transaction on a connection of a small
pool (``psycopg_pool``), so the threads of one process work in parallel, as do processes on many machines.

Under PostgreSQL's ``READ COMMITTED``, what SQLite gets from ``BEGIN IMMEDIATE`` (one writer at a time)
is obtained row by row:

* **the claim** is one conditional ``UPDATE ... RETURNING`` (pending, unowned, every blocker completed:
  :data:`~subagents.teams._sql.CLAIMABLE`): a second claimant waits for the first one's row lock, then
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
from ._sql import CLAIMABLE, MAIL_COLS, TASK_COLS, SQLTeamStore
from .model import MailRecord, TaskRecord, TeamError

__all__ = ["PostgresTeamStore"]

Conn = psycopg.Connection[Any]


class PostgresTeamStore(SQLTeamStore):
    """A :class:`~subagents.teams.store.TeamStore` in the PostgreSQL database at ``url`` (see the module docstring).

    The schema is created or migrated at open unless ``migrated`` (the run store on ``url`` did it);
    ``pool_size``: connections at most (threads beyond wait for one)."""

    PARAM = "%s"
    JOINED = "ord"
    ROW_LOCK = " FOR UPDATE"
    CLAIM_NEXT = (f"UPDATE tasks AS t SET status = 'in_progress', owner = ?, updated_at = ? "
                  f"WHERE t.team = ? AND {CLAIMABLE} AND t.id = (SELECT t.id FROM tasks AS t "
                  f"WHERE t.team = ? AND {CLAIMABLE} ORDER BY t.id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                  f"RETURNING {TASK_COLS}")

    def __init__(self, url: str, timeout: float = 10.0, *, migrated: bool = False, pool_size: int = 4) -> None:
        self.url = url
        self.where = describe(url)
        if not migrated:
            with contextlib.closing(connect(url, timeout, "opening it for teams")) as c:
                open_schema(c, url, timeout)
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

    def _read(self, doing: str) -> contextlib.AbstractContextManager[Conn]:
        return self._tx(doing)

    @staticmethod
    def _clean(text: str) -> str:
        return clean(SQLTeamStore._clean(text))  # (a NUL too, which TEXT cannot hold)

    # -- the task board -------------------------------------------------------------------------
    def create_task(self, team: str, subject: str, description: str = "",
                    blocked_by: Sequence[int] = (), at: float = 0.0) -> TaskRecord:
        rules.check_subject(subject)
        subject, description = self._clean(subject), self._clean(description)
        with self._tx("creating a task") as c:
            self._has_team(c, team, lock=True)  # one new task id at a time per team
            wanted = sorted({b for b in blocked_by if isinstance(b, int) and -2**63 <= b < 2**63})
            existing = [r[0] for r in c.execute("SELECT id FROM tasks WHERE team = %s AND id = ANY(%s::bigint[])",
                                                (team, wanted))] if wanted else []
            blockers = rules.check_blockers(team, blocked_by, existing)
            row = c.execute("SELECT coalesce(max(id), 0) + 1 FROM tasks WHERE team = %s", (team,)).fetchone()
            task_id = int(row[0]) if row else 1
            c.execute(f"INSERT INTO tasks ({TASK_COLS}) VALUES (%s, %s, %s, %s, 'pending', NULL, %s, %s, '')",
                      (team, task_id, subject, description, at, at))
            if blockers:
                with c.cursor() as cur:
                    cur.executemany("INSERT INTO task_deps (team, task, blocker) VALUES (%s, %s, %s)",
                                    [(team, task_id, b) for b in blockers])
        return TaskRecord(team, task_id, subject, description, blocked_by=blockers, created_at=at,
                          updated_at=at)

    # -- the mailbox ----------------------------------------------------------------------------
    def send(self, team: str, sender: str, recipients: Sequence[str], text: str, at: float,
             kind: str = "message") -> list[MailRecord]:
        if isinstance(recipients, str):
            raise TeamError("recipients is a list of names; wrap a single name in a list")
        to, text = list(dict.fromkeys(recipients)), self._clean(text)
        with self._tx("sending team mail") as c:
            self._has_team(c, team, lock=True)  # one sender at a time per team: seq stays max + 1
            self._party(c, team, sender, *to)
            row = c.execute("SELECT coalesce(max(seq), 0) + 1 FROM team_mail WHERE team = %s", (team,)).fetchone()
            first = int(row[0]) if row else 1
            out = [MailRecord(team, first + i, sender, r, text, at, kind) for i, r in enumerate(to)]
            if out:
                with c.cursor() as cur:
                    cur.executemany(f"INSERT INTO team_mail ({MAIL_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s, 0)",
                                    [(m.team, m.seq, m.sender, m.recipient, m.text, m.at, m.kind) for m in out])
        return out

    def close(self) -> None:
        """Close the pool (a second call does nothing; later calls raise :class:`StoreError`)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
