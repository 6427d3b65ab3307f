"""The PostgreSQL store's schema, its version (table ``subagents_schema``) and the forward migrations.

The tables are those of the SQLite store at its schema 7 (:mod:`subagents.store._schema`), column for
column, so one row codec (:mod:`subagents.store._batch`) serves both: JSON fields are ``TEXT`` holding
JSON, flags are ``INTEGER`` 0/1, times are ``DOUBLE PRECISION`` seconds since the epoch.  What SQLite
orders by ``rowid`` (runs, announcements, teams and members created at the same instant) is ordered
here by an identity column ``ord``.

Version history (PostgreSQL numbering, independent of SQLite's):

* **1** — everything of SQLite schema 7: ``runs``, ``prompts``, ``transcript``, ``announcements``,
  ``owners`` (owner leases), ``requests``, ``audit``, and the team tables ``teams``, ``team_members``,
  ``tasks``, ``task_deps``, ``team_mail``, with the same partial indexes (``runs_open``, ``runs_sweep``,
  ``tasks_claimable``, ``tasks_owned``, ``team_mail_unread``).

:func:`migrate` runs at open, in one transaction.  A database at the current version is only read (no lock, no
``CREATE``), so a user who may only read the tables opens it.  Otherwise the change is made under a
transaction-level advisory lock, so several processes opening a new database at once create the schema once;
a lock held longer than the store's ``timeout`` (another process stuck in its migration) is an error, not a
hang.  A database written by a newer ``subagents`` is refused (never downgraded).  To add a version: append its
SQL to :data:`MIGRATIONS`.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ..exceptions import StoreError
from ._pg_support import describe, pg_error
from ._schema import FINAL_SQL, SWEEP_KEY

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SWEEP_ORDER", "migrate", "open_schema", "recorded_version"]

#: The sweeper's order (:func:`~subagents.store.base.sweep_key`): run ids compared byte by byte (``"C"``), as in
#: Python and SQLite, whatever the database's collation.  The ``runs_sweep`` index is on exactly this.
SWEEP_ORDER = f'({SWEEP_KEY}), run_id COLLATE "C"'

_V1 = f"""
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, nickname TEXT NOT NULL, agent_type TEXT NOT NULL,
    task TEXT NOT NULL, child_session_key TEXT NOT NULL DEFAULT '', requester_session_key TEXT,
    parent_id TEXT, root_id TEXT, depth INTEGER NOT NULL DEFAULT 0, label TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '', cleanup TEXT NOT NULL DEFAULT 'keep', background INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL, outcome TEXT, created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION,
    ended_at DOUBLE PRECISION, archive_at DOUBLE PRECISION, archived INTEGER NOT NULL DEFAULT 0,
    usage TEXT NOT NULL DEFAULT '{{}}', cost_usd DOUBLE PRECISION, turns INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0, truncated INTEGER NOT NULL DEFAULT 0, "limit" TEXT, result_text TEXT,
    error TEXT, system_prompt TEXT NOT NULL DEFAULT '', limits TEXT NOT NULL DEFAULT '{{}}',
    runs INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL DEFAULT '', permission_mode TEXT NOT NULL DEFAULT '',
    worktree TEXT NOT NULL DEFAULT '{{}}', trace TEXT NOT NULL DEFAULT '{{}}', prompt_key TEXT,
    ord BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX runs_parent ON runs (parent_id);
CREATE INDEX runs_root ON runs (root_id);
CREATE INDEX runs_created ON runs (created_at, ord);
CREATE INDEX runs_open ON runs (status) WHERE NOT {FINAL_SQL};
CREATE INDEX runs_sweep ON runs ({SWEEP_ORDER}) WHERE archived = 0 AND {FINAL_SQL};
CREATE TABLE prompts (key TEXT PRIMARY KEY, text TEXT NOT NULL, refs INTEGER NOT NULL DEFAULT 0);
CREATE INDEX prompts_unused ON prompts (key) WHERE refs <= 0;
CREATE TABLE transcript (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (run_id, seq)
);
CREATE TABLE announcements (
    id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, child_id TEXT NOT NULL, text TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, delivered_at DOUBLE PRECISION, ord BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX announcements_parent ON announcements (parent_id, delivered_at);
CREATE INDEX announcements_child ON announcements (child_id);
CREATE TABLE owners (
    owner TEXT PRIMARY KEY, heartbeat DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL DEFAULT 0,
    process TEXT NOT NULL DEFAULT ''
);
CREATE TABLE requests (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL,
    message TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, done_at DOUBLE PRECISION
);
CREATE INDEX requests_open ON requests (run_id, id) WHERE done_at IS NULL;
CREATE TABLE audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
    kind TEXT NOT NULL, data TEXT NOT NULL
);
CREATE INDEX audit_run ON audit (run_id, id);
CREATE TABLE teams (
    name TEXT PRIMARY KEY, lead_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    description TEXT NOT NULL DEFAULT '', ord BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE TABLE team_members (
    team TEXT NOT NULL, name TEXT NOT NULL, agent_type TEXT NOT NULL, agent_id TEXT, model TEXT NOT NULL DEFAULT '',
    mode TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, require_plan_approval INTEGER NOT NULL DEFAULT 0,
    plan_approved INTEGER NOT NULL DEFAULT 0, joined_at DOUBLE PRECISION NOT NULL,
    ord BIGINT GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (team, name)
);
CREATE TABLE tasks (
    team TEXT NOT NULL, id INTEGER NOT NULL, subject TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'pending', owner TEXT, created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL, note TEXT NOT NULL DEFAULT '', PRIMARY KEY (team, id)
);
CREATE INDEX tasks_claimable ON tasks (team, id) WHERE status = 'pending' AND owner IS NULL;
CREATE INDEX tasks_owned ON tasks (team, owner) WHERE status = 'in_progress';
CREATE TABLE task_deps (
    team TEXT NOT NULL, task INTEGER NOT NULL, blocker INTEGER NOT NULL, PRIMARY KEY (team, task, blocker)
);
CREATE TABLE team_mail (
    team TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL, recipient TEXT NOT NULL, text TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL, kind TEXT NOT NULL DEFAULT 'message', read INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (team, seq)
);
CREATE INDEX team_mail_unread ON team_mail (team, recipient, seq) WHERE read = 0;
"""

#: ``MIGRATIONS[v]`` brings a database from version ``v`` to ``v + 1`` (0: a database without our tables).
MIGRATIONS: tuple[str, ...] = (_V1,)
SCHEMA_VERSION = len(MIGRATIONS)

_LOCK_KEY = 0x5A6E_7453_7562_4147  # pg_advisory_xact_lock key: "subagents schema" (any fixed 63-bit number)


def recorded_version(conn: psycopg.Connection[Any]) -> int | None:
    """The schema version the database records; ``None`` without a ``subagents_schema`` table."""
    if conn.execute("SELECT to_regclass('subagents_schema') IS NOT NULL").fetchone() != (True,):
        return None
    row = conn.execute("SELECT max(version) FROM subagents_schema").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def migrate(conn: psycopg.Connection[Any], lock_timeout_s: float = 0.0) -> int:
    """Bring the database to :data:`SCHEMA_VERSION` inside the caller's transaction; the version found.

    A database already at it is only read (no lock, no ``CREATE``: a user who may only read opens it).
    Otherwise the change is made under the schema lock, waited for at most ``lock_timeout_s`` (0: without
    a bound; then ``psycopg.errors.LockNotAvailable``).  Raises ``ValueError(version)`` for a newer schema,
    ``LookupError`` for a database that holds a ``runs`` table but no schema version (not ours)."""
    if recorded_version(conn) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    if lock_timeout_s > 0:
        conn.execute(f"SET LOCAL lock_timeout = {max(1, int(lock_timeout_s * 1000))}")
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
    conn.execute("CREATE TABLE IF NOT EXISTS subagents_schema (version INTEGER NOT NULL)")
    found = recorded_version(conn) or 0
    if found > SCHEMA_VERSION:
        raise ValueError(found)
    if found == 0 and conn.execute("SELECT to_regclass('runs') IS NOT NULL").fetchone() == (True,):
        raise LookupError("the database holds a runs table but no subagents schema version")
    for v in range(found, SCHEMA_VERSION):
        conn.execute(MIGRATIONS[v])  # several statements: allowed in one query without parameters
    if found < SCHEMA_VERSION:
        conn.execute("DELETE FROM subagents_schema")
        conn.execute("INSERT INTO subagents_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
    return found


def open_schema(conn: psycopg.Connection[Any], url: str, timeout: float = 10.0) -> int:
    """Create or migrate the schema on ``conn`` (one transaction); the version found.  StoreError when it cannot
    (also when another process has been creating or migrating it for more than ``timeout`` seconds)."""
    where = describe(url)
    try:
        with conn.transaction():
            return migrate(conn, timeout)
    except ValueError as e:
        raise StoreError(f"the run store {where} has schema version {e.args[0]}, newer than the {SCHEMA_VERSION} "
                         "this subagents understands; upgrade subagents, or point [store] url at another "
                         "database") from None
    except LookupError:
        raise StoreError(f"the database {where} holds a 'runs' table that is not a subagents store; point "
                         "[store] url at another database") from None
    except psycopg.errors.LockNotAvailable:
        raise StoreError(f"another process has been creating or migrating the tables of the run store {where} for "
                         f"more than {timeout:g} s (it holds the schema lock); try again once it is done, or end "
                         "that session (pg_stat_activity shows it)") from None
    except psycopg.Error as e:
        raise pg_error(url, e, "creating its tables") from None
