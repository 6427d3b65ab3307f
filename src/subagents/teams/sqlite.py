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

The methods both SQL stores run alike are in :mod:`._sql`; this module keeps how it takes a new task id and mail
``seq``.  A method returns once its transaction is committed (``synchronous`` as the run store set it: a commit
survives the process being killed).  ``sqlite3.Error`` becomes :class:`~subagents.exceptions.StoreError`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..exceptions import StoreError
from ..store._open import open_writer
from ..store._support import store_error
from . import _rules as rules
from ._sql import CLAIMABLE, MAIL_COLS, TASK_COLS, SQLTeamStore
from .model import MailRecord, TaskRecord, TeamError

__all__ = ["CLAIMABLE", "SQLiteTeamStore"]


class SQLiteTeamStore(SQLTeamStore):
    """A :class:`~subagents.teams.store.TeamStore` in the SQLite file at ``path`` (see the module docstring).

    ``path`` may be a new file (a run store is created there) or an older store (migrated forward).
    ``autocheckpoint=False`` when the run store on the same file runs its checkpointer (it copies this
    connection's commits back too); standalone, SQLite's own checkpoints keep the WAL bounded.
    """

    OWNED_INDEX = " INDEXED BY tasks_owned"
    UNREAD_INDEX = " INDEXED BY team_mail_unread"
    CLAIM_NEXT = (f"UPDATE tasks AS t SET status = 'in_progress', owner = ?, updated_at = ? WHERE t.team = ? "
                  f"AND t.id = (SELECT t.id FROM tasks AS t INDEXED BY tasks_claimable WHERE t.team = ? "
                  f"AND {CLAIMABLE} ORDER BY t.id LIMIT 1) RETURNING {TASK_COLS}")

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

    def _tx(self, doing: str) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._transaction(doing, write=True)

    def _read(self, doing: str) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._transaction(doing, write=False)

    @contextlib.contextmanager
    def _transaction(self, doing: str, write: bool) -> Iterator[sqlite3.Connection]:
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

    # -- the task board -------------------------------------------------------------------------
    def create_task(self, team: str, subject: str, description: str = "",
                    blocked_by: Sequence[int] = (), at: float = 0.0) -> TaskRecord:
        rules.check_subject(subject)
        subject, description = self._clean(subject), self._clean(description)
        with self._tx("creating a task") as c:
            self._has_team(c, team)
            wanted = {b for b in blocked_by if isinstance(b, int) and -(2**63) <= b < 2**63}  # (else: none such)
            existing = [r[0] for r in c.execute(
                f"SELECT id FROM tasks WHERE team = ? AND id IN ({', '.join('?' * len(wanted))})",
                (team, *wanted))] if wanted else []
            blockers = rules.check_blockers(team, blocked_by, existing)
            task_id = c.execute("SELECT coalesce(max(id), 0) + 1 FROM tasks WHERE team = ?", (team,)).fetchone()[0]
            c.execute(f"INSERT INTO tasks ({TASK_COLS}) VALUES (?, ?, ?, ?, 'pending', NULL, ?, ?, '')",
                      (team, task_id, subject, description, at, at))
            c.executemany("INSERT INTO task_deps (team, task, blocker) VALUES (?, ?, ?)",
                          [(team, task_id, b) for b in blockers])
        return TaskRecord(team, task_id, subject, description, blocked_by=blockers, created_at=at, updated_at=at)

    # -- the mailbox ----------------------------------------------------------------------------
    def send(self, team: str, sender: str, recipients: Sequence[str], text: str, at: float,
             kind: str = "message") -> list[MailRecord]:
        if isinstance(recipients, str):
            raise TeamError("recipients is a list of names; wrap a single name in a list")
        to, text = list(dict.fromkeys(recipients)), self._clean(text)
        with self._tx("sending team mail") as c:
            self._party(c, team, sender, *to)
            first = c.execute("SELECT coalesce(max(seq), 0) + 1 FROM team_mail WHERE team = ?", (team,)).fetchone()[0]
            out = [MailRecord(team, first + i, sender, r, text, at, kind) for i, r in enumerate(to)]
            c.executemany(f"INSERT INTO team_mail ({MAIL_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                          [(m.team, m.seq, m.sender, m.recipient, m.text, m.at, m.kind) for m in out])
        return out

    def close(self) -> None:
        """Close the connection (a second call does nothing; later calls raise :class:`StoreError`)."""
        with self._lock:
            c, self._conn = self._conn, None
        if c is not None:
            with contextlib.suppress(sqlite3.Error):
                c.close()
