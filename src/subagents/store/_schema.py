"""The SQLite store's schema, its version (``PRAGMA user_version``) and the forward migrations.

Version history:

* **1** — ``runs`` (without ``runs``/``owner``), ``transcript``, ``announcements``.
* **2** — ``runs.runs`` and ``runs.owner`` (restart recovery), ``owners`` (heartbeats of live
  runtimes), ``requests`` (cancel/resume asked by another process), an index on ``runs.owner``.
* **3** — ``runs.permission_mode``, ``runs.worktree`` and ``audit`` (approval decisions, denials, hook
  blocks and errors).
* **4** — ``owners.expires`` and ``owners.process``: the heartbeat row became an owner **lease** (see
  :mod:`subagents.store._lease`); an old row keeps the 60 s the heartbeat was trusted for.
* **5** — system prompts stored once: ``prompts`` (key = a hash of the text, the text, how many runs use
  it) and ``runs.prompt_key``; a new run's ``runs.system_prompt`` is empty (runs written before keep
  their text there, and reads fall back to it: :data:`PROMPT_SQL`).  Indexes for the hot path and
  the sweeper: ``runs_status`` became ``runs_open`` (only unfinished runs: a finished run leaves it,
  so it stays small), ``runs_owner`` (no query used it) is gone, and ``runs_sweep`` orders the final,
  unarchived runs by when the sweeper must look at them (:data:`SWEEP_KEY`), so a sweep reads only
  what is due, in bounded steps.
* **6** — teams (issue 14, :mod:`subagents.teams.sqlite`): ``teams``, ``team_members``, ``tasks`` (the
  task board, ``PK(team, id)``), ``task_deps`` (one row per blocker of a task) and ``team_mail`` (one row
  per recipient, ``PK(team, seq)``); ``tasks_claimable`` (the pending, unowned tasks of a team by id:
  what a claim looks at), ``tasks_owned`` (the in-progress tasks of an owner: what a release looks at)
  and ``team_mail_unread`` (a recipient's unread mail in order).  No run table changes.
* **7** — ``runs.trace``: the W3C trace context (``traceparent``) a run's spans hang under, so a resumed or
  restored run joins its original trace (:mod:`subagents.telemetry`).

A store opened by an older ``subagents`` is migrated forward in one transaction at open; a store
written by a newer one is refused (never downgraded).
"""

from __future__ import annotations

TYPE_CHECKING = False  # (the writer process loads this file: no typing, no sqlite3 wrapper at run time)
if TYPE_CHECKING:
    import sqlite3

__all__ = ["FINAL_SQL", "PROMPT_SQL", "RUN_COLUMNS", "SCHEMA_VERSION", "SWEEP_KEY", "V1_SCHEMA", "migrate",
           "schema_problem", "schema_version"]

SCHEMA_VERSION = 7

#: The final statuses as an SQL condition (spelled the same in the partial indexes and the queries that use them).
FINAL_SQL = "status IN ('completed', 'errored', 'shutdown')"

#: A run's system prompt, as reads select it: from ``prompts`` by its key, else (runs written before schema 5)
#: the run's own ``system_prompt`` column.
PROMPT_SQL = "coalesce((SELECT p.text FROM prompts p WHERE p.key = runs.prompt_key), runs.system_prompt)"

#: When the sweeper must look at a final run: ``archive_at`` for a kept run that has one, else when it ended
#: (a ``delete`` run, or a kept run the sweeper has not stamped yet: at once).  See ``runs_sweep``.
SWEEP_KEY = ("(CASE WHEN cleanup <> 'delete' AND archive_at IS NOT NULL THEN archive_at "
             "ELSE coalesce(ended_at, 0) END)")

#: The ``runs`` columns, in :class:`~subagents.store.base.RunRecord` field order.
RUN_COLUMNS: tuple[str, ...] = (
    "run_id", "agent_id", "nickname", "agent_type", "task", "child_session_key", "requester_session_key",
    "parent_id", "root_id", "depth", "label", "model", "cleanup", "background", "status", "outcome",
    "created_at", "started_at", "ended_at", "archive_at", "archived", "usage", "cost_usd", "turns",
    "tool_calls", "truncated", "limit", "result_text", "error", "system_prompt", "limits", "runs", "owner",
    "permission_mode", "worktree", "trace",
)

V1_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, nickname TEXT NOT NULL, agent_type TEXT NOT NULL,
    task TEXT NOT NULL, child_session_key TEXT NOT NULL DEFAULT '', requester_session_key TEXT,
    parent_id TEXT, root_id TEXT, depth INTEGER NOT NULL DEFAULT 0, label TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '', cleanup TEXT NOT NULL DEFAULT 'keep', background INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL, outcome TEXT, created_at REAL NOT NULL, started_at REAL, ended_at REAL,
    archive_at REAL, archived INTEGER NOT NULL DEFAULT 0, usage TEXT NOT NULL DEFAULT '{}', cost_usd REAL,
    turns INTEGER NOT NULL DEFAULT 0, tool_calls INTEGER NOT NULL DEFAULT 0, truncated INTEGER NOT NULL DEFAULT 0,
    "limit" TEXT, result_text TEXT, error TEXT, system_prompt TEXT NOT NULL DEFAULT '',
    limits TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX runs_parent ON runs(parent_id);
CREATE INDEX runs_root ON runs(root_id);
CREATE INDEX runs_status ON runs(status);
CREATE TABLE transcript (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE announcements (
    id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, child_id TEXT NOT NULL, text TEXT NOT NULL,
    created_at REAL NOT NULL, delivered_at REAL
);
CREATE INDEX announcements_parent ON announcements(parent_id, delivered_at);
CREATE INDEX announcements_child ON announcements(child_id);
PRAGMA user_version = 1;
"""

_V1_TO_V2 = """
ALTER TABLE runs ADD COLUMN runs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_owner ON runs(owner);
CREATE TABLE owners (owner TEXT PRIMARY KEY, heartbeat REAL NOT NULL);
CREATE TABLE requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL,
    created_at REAL NOT NULL, done_at REAL
);
CREATE INDEX requests_open ON requests(done_at, run_id);
PRAGMA user_version = 2;
"""

_V2_TO_V3 = """
ALTER TABLE runs ADD COLUMN permission_mode TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN worktree TEXT NOT NULL DEFAULT '{}';
CREATE TABLE audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX audit_run ON audit(run_id, id);
PRAGMA user_version = 3;
"""

_V3_TO_V4 = """
ALTER TABLE owners ADD COLUMN expires REAL NOT NULL DEFAULT 0;
ALTER TABLE owners ADD COLUMN process TEXT NOT NULL DEFAULT '';
UPDATE owners SET expires = heartbeat + 60;
PRAGMA user_version = 4;
"""

_V4_TO_V5 = f"""
ALTER TABLE runs ADD COLUMN prompt_key TEXT;
CREATE TABLE prompts (key TEXT PRIMARY KEY, text TEXT NOT NULL, refs INTEGER NOT NULL DEFAULT 0);
CREATE INDEX prompts_unused ON prompts(key) WHERE refs <= 0;
DROP INDEX runs_status;
DROP INDEX runs_owner;
CREATE INDEX runs_open ON runs(status) WHERE NOT {FINAL_SQL};
CREATE INDEX runs_sweep ON runs({SWEEP_KEY}, run_id) WHERE archived = 0 AND {FINAL_SQL};
PRAGMA user_version = 5;
"""

_V5_TO_V6 = """
CREATE TABLE teams (
    name TEXT PRIMARY KEY, lead_id TEXT NOT NULL, created_at REAL NOT NULL, description TEXT NOT NULL DEFAULT ''
);
CREATE TABLE team_members (
    team TEXT NOT NULL, name TEXT NOT NULL, agent_type TEXT NOT NULL, agent_id TEXT, model TEXT NOT NULL DEFAULT '',
    mode TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, require_plan_approval INTEGER NOT NULL DEFAULT 0,
    plan_approved INTEGER NOT NULL DEFAULT 0, joined_at REAL NOT NULL, PRIMARY KEY (team, name)
);
CREATE TABLE tasks (
    team TEXT NOT NULL, id INTEGER NOT NULL, subject TEXT NOT NULL, description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'pending', owner TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    note TEXT NOT NULL DEFAULT '', PRIMARY KEY (team, id)
) WITHOUT ROWID;
CREATE INDEX tasks_claimable ON tasks(team, id) WHERE status = 'pending' AND owner IS NULL;
CREATE INDEX tasks_owned ON tasks(team, owner) WHERE status = 'in_progress';
CREATE TABLE task_deps (
    team TEXT NOT NULL, task INTEGER NOT NULL, blocker INTEGER NOT NULL, PRIMARY KEY (team, task, blocker)
) WITHOUT ROWID;
CREATE TABLE team_mail (
    team TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL, recipient TEXT NOT NULL, text TEXT NOT NULL,
    at REAL NOT NULL, kind TEXT NOT NULL DEFAULT 'message', read INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (team, seq)
) WITHOUT ROWID;
CREATE INDEX team_mail_unread ON team_mail(team, recipient, seq) WHERE read = 0;
PRAGMA user_version = 6;
"""

_V6_TO_V7 = """
ALTER TABLE runs ADD COLUMN trace TEXT NOT NULL DEFAULT '{}';
PRAGMA user_version = 7;
"""

#: ``from version -> script`` that brings a store to ``from version + 1``.
_MIGRATIONS: dict[int, str] = {0: V1_SCHEMA, 1: _V1_TO_V2, 2: _V2_TO_V3, 3: _V3_TO_V4, 4: _V4_TO_V5,
                               5: _V5_TO_V6, 6: _V6_TO_V7}


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version of the database on ``conn`` (0: a new, empty one), read without changing anything.

    Raises ``ValueError`` for a newer schema, ``LookupError`` for a database that is not a store.
    """
    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise ValueError(found)
    if found < 0 or (found == 0 and conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'")
                     .fetchone()[0]):
        raise LookupError("the file holds tables but no subagents schema version")
    return found


def migrate(conn: sqlite3.Connection) -> tuple[int, int]:
    """Bring the database to :data:`SCHEMA_VERSION` inside the caller's transaction.

    Returns ``(version found, version now)``; raises as :func:`schema_version` does.
    """
    found = schema_version(conn)
    v = found
    while v < SCHEMA_VERSION:
        for stmt in _statements(_MIGRATIONS[v]):
            conn.execute(stmt)
        v += 1
    return found, v


_TABLES: dict[int, dict[str, tuple[frozenset[str], bool]]] = {}  # version -> table -> (its columns, has a rowid)


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    """Whether ``SELECT rowid`` works on ``main.table`` (the reads order by it; a ``WITHOUT ROWID`` table has none)."""
    try:
        conn.execute(f'SELECT rowid FROM main."{table}" LIMIT 0')
    except conn.OperationalError:  # (no such column: rowid)
        return False
    return True


def tables_of(version: int) -> dict[str, tuple[frozenset[str], bool]]:
    """The tables a store of schema ``version`` has, each with its columns and whether it has a rowid, as the
    migrations make them (in memory)."""
    got = _TABLES.get(version)
    if got is None:
        import sqlite3  # (only the runtime's process asks: not the writer process, which imports no wrapper)

        mem = sqlite3.connect(":memory:")
        try:
            for v in range(version):
                for stmt in _statements(_MIGRATIONS[v]):
                    mem.execute(stmt)
            names = [r[0] for r in mem.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                               "AND name NOT LIKE 'sqlite%'")]
            got = _TABLES[version] = {t: (frozenset(r[1] for r in mem.execute(f'PRAGMA table_info("{t}")')),
                                          _has_rowid(mem, t)) for t in names}
        finally:
            mem.close()
    return got


def _made_by_us(kind: str, sql: str | None) -> bool:
    """Whether a ``sqlite_master`` row is of a kind the store makes: a table or an index (``sql`` NULL: one SQLite
    made for a key).  What SQLite loads is what its SQL text says (its type column is not checked), so that is read."""
    if sql is None:
        return kind == "index"
    words = sql.split(None, 3)[:3]
    return [w.upper() for w in words[:2]] in (["CREATE", "TABLE"], ["CREATE", "INDEX"]) or \
        [w.upper() for w in words] == ["CREATE", "UNIQUE", "INDEX"]


def schema_problem(conn: sqlite3.Connection, version: int) -> str | None:
    """What keeps the database on ``conn`` (``main``) from being used as a store of schema ``version`` — ``None``
    when nothing does.

    * A schema object the store never makes: a trigger (SQL someone else wrote, run by the store's own writes: it
      could rewrite or delete this user's runs), a view (SQL run by a read, which may never end), a virtual table or a
      generated column.  A store made by subagents has only tables and indexes.
    * A table or column of that schema that is missing, or a table without the rowid its reads order by (reads and
      writes would fail on it).
    """
    rows = conn.execute("SELECT type, name, sql FROM main.sqlite_master").fetchall()
    alien = [f"{kind} {name!r}" for kind, name, sql in rows if not _made_by_us(kind, sql)]
    if alien:
        return (f"it holds {', '.join(alien[:5])}{' and more' if len(alien) > 5 else ''}: a subagents store has only "
                "tables and indexes, and SQL of someone else's in a trigger or view would run as this store is "
                "written or read")
    tables = {name for kind, name, _ in rows if kind == "table"}
    for table in sorted(tables):  # (hidden 2 or 3: a generated column, computed by SQL of its own)
        if conn.execute("SELECT count(*) FROM pragma_table_xinfo(?, 'main') WHERE hidden > 1", (table,)).fetchone()[0]:
            return f"its table {table!r} has generated columns, which a subagents store never has"
    for table, (columns, rowid) in tables_of(version).items():
        if table not in tables:
            return f"it lacks the table {table} of schema {version}"
        have = {r[0] for r in conn.execute("SELECT name FROM pragma_table_info(?, 'main')", (table,))}
        if not columns <= have:
            return f"its table {table} lacks the columns {', '.join(sorted(columns - have))} of schema {version}"
        if rowid and not _has_rowid(conn, table):
            return f"its table {table} is a WITHOUT ROWID table, which it is not in schema {version}"
    return None
