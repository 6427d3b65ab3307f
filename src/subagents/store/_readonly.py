"""``SQLiteReader``: a SQLite run store opened only to read it — no write lock, no writer process, no migration, and
no file created or changed, even where it could be.  What ``subagents runs list/show/tree/tail/wait/timeline`` and
``subagents team list/show`` use (the teams through :meth:`SQLiteReader.team_store`,
:mod:`subagents.teams.sqlite_reader`), so they read a store the user may not write (another user's, a read-only
mount).

How it opens the file ``F`` (``sqlite3`` URI ``file:F?mode=ro``; a WAL database also needs its ``F-wal`` and
``F-shm``, and a ``mode=ro`` connection *creates* them — owned by the reader, where the store's owner may then be
unable to write them — whenever they are missing and the directory is writable):

* ``F-wal`` and ``F-shm`` are there (a runtime has the store open, or one was killed): ``mode=ro``.  SQLite shares
  the ``-shm`` index with the live connections (read-only when the reader may not write it) and the reader sees
  every committed transaction; a write transaction in progress neither blocks it nor shows.
* No ``F-wal`` (no connection has the store open: everything committed is in ``F``): ``mode=ro&immutable=1`` — no
  lock, no ``-wal``/``-shm``.  The reader checks ``F`` (inode, size, modification time) and the absence of ``F-wal``
  after every read: once a process opens the store (``F-wal`` appears) or ``F`` changes, it reads again on a new
  connection — so ``runs wait`` on a closed store sees a runtime open it and finish the run.
* ``F-wal`` without ``F-shm``: read as immutable when the WAL is empty; otherwise the committed transactions in it can
  only be recovered by a process that may write the store, and the reader says so (:class:`NeedsWriter`).

A store with an older schema is read as it is: the reads see the missing columns and tables with the values the
migrations would give them (temporary views on the reader's own connection, never in the file; before schema 6, empty
team tables).  A newer schema, a file that is not a SQLite database or not a subagents store is refused with a
sentence saying what to do; a missing or empty file (0 bytes, or a database without tables) is :class:`NoStoreFile`.
The writing methods of the :class:`~subagents.store.base.Store` protocol raise
:class:`~subagents.exceptions.StoreError`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..exceptions import StoreError
from ._batch import _SWEEP_STEP, sweep_values
from ._lease import new_owner_id
from ._open import file_problem, refused_schema
from ._schema import RUN_COLUMNS, SCHEMA_VERSION, schema_problem
from ._sql_reads import SqlReads
from ._support import store_error

if TYPE_CHECKING:
    from ..teams.sqlite_reader import SQLiteTeamReader

__all__ = ["NeedsWriter", "NoStoreFile", "SQLiteReader"]

_HEADER = b"SQLite format 3\x00"
_RETRIES = 20  # reads again while an unlocked (immutable) snapshot keeps changing under it

#: The ``runs`` columns an older schema lacks, as the migrations that add them fill them in.
_ADDED: dict[str, str] = {"runs": "0", "owner": "''", "permission_mode": "''", "worktree": "'{}'",
                          "prompt_key": "NULL", "trace": "'{}'"}
#: The tables an older schema lacks, as empty views (``owners`` before schema 2, ``audit`` before 3, ``prompts``
#: before 5, the team tables before 6 — read by :mod:`subagents.teams.sqlite_reader`).
_EMPTY: dict[str, str] = {
    "owners": "SELECT '' AS owner, 0.0 AS heartbeat, 0.0 AS expires, '' AS process WHERE 0",
    "audit": "SELECT 0 AS id, '' AS run_id, 0.0 AS at, '' AS kind, '{}' AS data WHERE 0",
    "prompts": "SELECT '' AS key, '' AS text, 0 AS refs WHERE 0",
}
_NO_TEAMS: dict[str, str] = {
    "teams": "'' AS name, '' AS lead_id, 0.0 AS created_at, '' AS description, 0 AS rowid",
    "team_members": "'' AS team, '' AS name, '' AS agent_type, NULL AS agent_id, '' AS model, '' AS mode, "
                    "'' AS status, 0 AS require_plan_approval, 0 AS plan_approved, 0.0 AS joined_at, 0 AS rowid",
    "tasks": "'' AS team, 0 AS id, '' AS subject, '' AS description, '' AS status, NULL AS owner, 0.0 AS created_at, "
             "0.0 AS updated_at, '' AS note",
    "task_deps": "'' AS team, 0 AS task, 0 AS blocker",
    "team_mail": "'' AS team, 0 AS seq, '' AS sender, '' AS recipient, '' AS text, 0.0 AS at, '' AS kind, 0 AS read",
}


class NoStoreFile(StoreError):
    """There is no run store to read at the path: no file, an empty file or a database with nothing in it."""


class NeedsWriter(StoreError):
    """The store's committed writes are in a ``-wal`` that only a process that may write the store can recover."""


def _readonly_answer(e: sqlite3.Error) -> bool:
    """Whether SQLite answered with one of its SQLITE_READONLY_* codes (the reader's connection may not write)."""
    msg = str(e).lower()
    return "readonly" in msg or "read-only" in msg


def _compat_views(conn: sqlite3.Connection, version: int) -> None:
    """Temporary views that give a store of schema ``version`` (older than ours) the tables and columns reads use."""
    cols = {r[1] for r in conn.execute("PRAGMA main.table_info(runs)")}
    select = ", ".join(f'main.runs."{c}" AS "{c}"' if c in cols else f'{_ADDED[c]} AS "{c}"'
                       for c in (*RUN_COLUMNS, "prompt_key"))
    conn.execute(f"CREATE TEMP VIEW runs AS SELECT main.runs.rowid AS rowid, {select} FROM main.runs")
    if version < 2:
        conn.execute(f"CREATE TEMP VIEW owners AS {_EMPTY['owners']}")
    elif version < 4:  # a heartbeat row: trusted for 60 s (the schema 4 migration)
        conn.execute("CREATE TEMP VIEW owners AS SELECT owner, heartbeat, heartbeat + 60 AS expires, '' AS process "
                     "FROM main.owners")
    if version < 3:
        conn.execute(f"CREATE TEMP VIEW audit AS {_EMPTY['audit']}")
    if version < 5:
        conn.execute(f"CREATE TEMP VIEW prompts AS {_EMPTY['prompts']}")
    if version < 6:
        for table, columns in _NO_TEAMS.items():
            conn.execute(f"CREATE TEMP VIEW {table} AS SELECT {columns} WHERE 0")


class SQLiteReader(SqlReads):
    """The reads of :class:`~subagents.store.sqlite.SQLiteStore` on a file it never writes.  See the module docstring.

    Raises :class:`NoStoreFile` when there is no store at ``path``, :class:`StoreError` when the file cannot be read
    as one.
    """

    writes_at_once = True  # (nothing to wait for: it writes nothing)
    archive_after_s: float | None = None

    def __init__(self, path: str | Path, *, timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.owner = new_owner_id(tagged=False)  # (owns no run: every run is someone else's)
        self.schema_version = 0
        self._timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._stamp: tuple[object, ...] | None = None  # immutable: what the file was when read (else None)
        self._closed = False
        with self._lock:
            self._connect()

    # -- opening --------------------------------------------------------------------------------
    def _now(self) -> tuple[object, ...]:
        """What tells that the file changed since an unlocked read: its identity, size and time, and a ``-wal``."""
        try:
            st = os.stat(self.path)
        except OSError:
            return ("gone",)
        return st.st_ino, st.st_size, st.st_mtime_ns, os.path.exists(f"{self.path}-wal")

    def _uri(self) -> tuple[str, bool]:
        """The URI to open (see the module docstring) and whether it is an unlocked, immutable snapshot."""
        p = self.path
        problem = file_problem(p)  # (a FIFO: reading it would wait forever; a -shm that is a link: SQLite writes it)
        if problem is not None:
            raise StoreError(problem)
        try:
            with open(p, "rb") as f:
                head = f.read(len(_HEADER))
        except FileNotFoundError:
            raise NoStoreFile(f"there is no run store yet at {p}") from None
        except IsADirectoryError:
            raise StoreError(f"the run store {p} is a directory, not a file; point --store (or [store] url) at "
                             "the store's file, e.g. .subagents/state.db") from None
        except OSError as e:
            raise StoreError(f"the run store {p} cannot be read ({e.strerror}); ask its owner for read access to "
                             "the file and its directory, or point --store at another file") from None
        shm = Path(f"{p}-shm")
        try:
            wal_size: int | None = os.stat(f"{p}-wal").st_size
        except OSError:
            wal_size = None
        if not head and not wal_size:
            raise NoStoreFile(f"the run store {p} is an empty file (0 bytes): no run has been recorded in it yet "
                              "(the first 'subagents run' or Runtime that opens it makes it a store)")
        if head and head != _HEADER:
            raise store_error(p, sqlite3.DatabaseError("file is not a database"), "reading it")
        base = f"file:{quote(str(p.resolve()))}?mode=ro"
        if wal_size is None or (wal_size == 0 and not shm.exists()):
            return base + "&immutable=1", True
        if not shm.exists():
            raise self._unrecovered()
        return base, False

    def _unrecovered(self) -> NeedsWriter:
        return NeedsWriter(
            f"the run store {self.path} was left by a process that stopped without closing it: {self.path}-wal holds "
            "committed writes that only a process that may write the store can recover; open it once, as a user who "
            "may write it, with a command that writes (any 'subagents run' in its project, or 'subagents runs "
            "sweep'), then read it again")

    def _connect(self) -> None:
        """(Re)open the connection; an unlocked snapshot that changes while it is checked is opened again."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        last: sqlite3.Error | None = None
        for _ in range(_RETRIES):
            uri, immutable = self._uri()
            stamp = self._now() if immutable else None
            try:
                conn = sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None,
                                       check_same_thread=False)
            except sqlite3.Error as e:
                raise self._error(e, "opening it") from None
            try:
                self.schema_version = self._check(conn)
            except sqlite3.Error as e:
                conn.close()
                if self._again(e, stamp):
                    last = e
                    continue
                raise self._error(e, "opening it") from None
            except BaseException:
                conn.close()
                raise
            self._conn, self._stamp = conn, stamp
            return
        raise self._gave_up(last)

    def _check(self, conn: sqlite3.Connection) -> int:
        """The schema version of the store on ``conn`` (views added for an older one); refuses what it cannot read."""
        conn.execute("PRAGMA temp_store=MEMORY")  # (the views of an older schema: never a file)
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version > SCHEMA_VERSION:
            raise StoreError(f"the run store {self.path} has schema version {version}, newer than the "
                             f"{SCHEMA_VERSION} this subagents understands: a newer subagents wrote it; upgrade "
                             "subagents to read it (it was left as it is)")
        if version == 0 and not tables:
            raise NoStoreFile(f"the run store {self.path} is an empty SQLite database: no run has been recorded "
                              "in it yet")
        if version <= 0 or not {"runs", "transcript", "announcements"} <= tables:
            raise StoreError(f"the run store {self.path} is a SQLite database but not a subagents store; point "
                             "--store (or [store] url) at a run store, e.g. .subagents/state.db")
        problem = schema_problem(conn, version)  # (a view's SQL would run as it is read; one may never end)
        if problem is not None:
            raise refused_schema(self.path, problem)
        conn.execute("PRAGMA trusted_schema=OFF")
        if version < SCHEMA_VERSION:
            _compat_views(conn, version)
        conn.execute("PRAGMA query_only=1")
        return version

    def _again(self, e: sqlite3.Error, stamp: tuple[object, ...] | None) -> bool:
        """Whether a read that failed with ``e`` is worth making again (pausing briefly): an unlocked snapshot changed
        under it; or, on a live store, the last writer closed it (its -wal and -shm went) as the reader opened it, or
        the ``-shm`` index was being set up by a writer (SQLite's "read-only" answers while it is)."""
        if stamp is not None:
            changed = self._now() != stamp
        else:
            changed = not (os.path.exists(f"{self.path}-wal") and os.path.exists(f"{self.path}-shm"))
        if changed or (stamp is None and _readonly_answer(e)):
            time.sleep(0.05)
            return True
        return False

    def _gave_up(self, last: sqlite3.Error | None) -> StoreError:
        """After :data:`_RETRIES` reads made again: SQLite's last answer, or a store that would not hold still."""
        if last is not None and _readonly_answer(last):
            return self._unrecovered()
        return StoreError(f"the run store {self.path} kept changing while it was being read; try again")

    def _error(self, e: sqlite3.Error, doing: str) -> StoreError:
        msg = str(e).lower()
        if _readonly_answer(e):  # the -shm index needs a rebuild that only a writer may make
            return self._unrecovered()
        if "not a database" in msg or "malformed" in msg or "corrupt" in msg or "locked" in msg or "busy" in msg:
            return store_error(self.path, e, f"{doing} for reading")
        if "decode to utf-8" in msg:  # (text SQLite holds as it was given, not as subagents writes it)
            return self._unreadable(f"text that is not UTF-8 ({e})")
        return StoreError(f"the run store {self.path} cannot be read ({e}) while {doing}; check that you may read the "
                          "file and its directory, or point --store at another file")

    # -- reads ----------------------------------------------------------------------------------
    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self._closed:
            raise StoreError(f"the run store {self.path} is closed")
        last: sqlite3.Error | None = None
        with self._lock:
            for _ in range(_RETRIES):
                if self._conn is None or (self._stamp is not None and self._now() != self._stamp):
                    self._connect()  # an unlocked snapshot that changed (or a process opened the store): read anew
                assert self._conn is not None
                try:
                    rows = self._conn.execute(sql, tuple(params)).fetchall()
                except sqlite3.Error as e:
                    if self._again(e, self._stamp):
                        self._conn.close()
                        self._conn, last = None, e
                        continue
                    raise self._error(e, "reading it") from None
                if self._stamp is None or self._now() == self._stamp:
                    return rows
        raise self._gave_up(last)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows ``sql`` selects, read as every read of this store is (the team reader's reads)."""
        return self._read(sql, params)

    def team_store(self) -> SQLiteTeamReader:
        """The teams of this store, read through this reader (:func:`subagents.teams.open_team_store` calls it)."""
        from ..teams.sqlite_reader import SQLiteTeamReader

        return SQLiteTeamReader(self)

    def _sweep_step(self, lo: float, last: str, now: float, limit: int) -> list[Any]:
        sql = _SWEEP_STEP  # (an older schema's ``runs`` is a view: no index to name)
        if self.schema_version < SCHEMA_VERSION:
            sql = sql.replace(" INDEXED BY runs_sweep", "")
        return self._read(sql, sweep_values(lo, last, now, limit))

    def close(self) -> None:
        self._closed = True
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- the writing half of the Store protocol: refused ----------------------------------------
    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreError(f"the run store {self.path} was opened only to read it; a command that writes opens it "
                         "for writing")

    create_run = update_run = append_messages = finish_run = mark_delivered = delete_run = add_audit = _refuse
    renew_lease = release_lease = claim_runs = add_request = take_requests = _refuse

    async def room(self) -> None:
        return None

    def on_commit(self, callback: Any) -> bool:
        return False  # nothing written, nothing to wait for

    def hurry(self) -> None:
        return None

    def flush(self) -> None:
        return None
