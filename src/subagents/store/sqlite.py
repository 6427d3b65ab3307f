"""``SQLiteStore``: the embedded, durable default store (WAL mode, one writer, group commit).

How a write travels:

1. The calling thread (the event loop) snapshots its arguments into a tuple and appends it to the
   batch being gathered — about a microsecond, no I/O.  The first op of a batch schedules its
   hand-off ``linger_s`` later (2 ms; at once when no event loop runs, and on :meth:`flush`).
2. The hand-off folds the batch into its net effect (a run created, updated and finished within
   one batch becomes one ``INSERT``), serializes it and turns it into a few multi-row statements,
   still on the calling thread, then puts them on the writer's queue (which never blocks).
3. One writer thread commits everything queued in **one** transaction, in queue order (so the
   store applies operations in call order), then runs the batch's :meth:`on_commit` callbacks (the
   runtime publishes the events that announce status changes from there — see ``docs/durability.md``)
   and wakes :meth:`flush` waiters.  Preparing on the calling thread keeps the writer's use of the
   GIL to a few short calls per batch, so it seldom makes the event loop wait for it.

``synchronous=NORMAL`` in WAL mode: a committed batch survives the process being killed; an OS
crash or power loss may lose the last batches (``durable=True`` selects ``synchronous=FULL``).
A SIGKILL loses at most the batch being gathered (``linger_s``) and the one being committed.

The store is used from one thread at a time (the runtime's event loop thread, or a CLI command).
Reads use their own connection and see what is committed; call :meth:`flush` first when a read
must see this process's own recent writes.  A writer failure is kept and raised (as
:class:`~subagents.exceptions.StoreError`) by every later call — it never vanishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ..messages import Message, message_from_dict
from ._batch import (
    ANN_COLS,
    APPEND,
    CALL,
    COLS_SQL,
    CREATE,
    DELETE,
    DELIVER,
    FINISH,
    FLUSH,
    SQL,
    STOP,
    UPDATE,
    Plan,
    Recorder,
    record_from_row,
)
from ._schema import SCHEMA_VERSION, migrate
from .base import AnnouncementRecord, AuditRecord, Request, RunRecord, check_run_fields
from .memory import new_owner_id

__all__ = ["GITIGNORE", "SQLiteStore", "write_gitignore"]

#: What ``.subagents/.gitignore`` holds: the state stays out of git, config and agent definitions may go in.
GITIGNORE = """\
# Written by subagents when it first created its state here: the run store (state.db and its
# WAL files) must never be committed; the project's config and agent definitions may be.
*
!.gitignore
!config.toml
!agents/
!agents/**
"""


def write_gitignore(directory: Path) -> None:
    """Create ``directory/.gitignore`` (:data:`GITIGNORE`) when ``directory`` is a ``.subagents`` directory
    and has none; an existing file is never overwritten, and a failure never stops the store."""
    if directory.name != ".subagents":
        return
    with contextlib.suppress(OSError), open(directory / ".gitignore", "x", encoding="utf-8") as f:
        f.write(GITIGNORE)

def _error(path: Path, e: BaseException, doing: str) -> StoreError:
    """A :class:`StoreError` naming the file, what went wrong and what to do."""
    msg = str(e)
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return StoreError(
            f"the run store {path} is locked by another process ({msg}) while {doing}; stop the other "
            "subagents process that holds it, or point [store] url at another file")
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return StoreError(
            f"the run store {path} is corrupt or not a SQLite database ({msg}); move it aside "
            f"(mv {path} {path}.bad) to start a new store, or restore it from a backup")
    if "readonly" in low or "unable to open" in low or "permission" in low or "disk i/o" in low \
            or isinstance(e, OSError):
        return StoreError(
            f"the run store {path} cannot be written ({msg}) while {doing}; check the permissions and free "
            "space of the file and its directory, or point [store] url at a writable path")
    return StoreError(f"the run store {path} failed while {doing} ({msg}); run 'subagents runs list' to check it, "
                      "or point [store] url at another file")


class SQLiteStore:
    """A :class:`~subagents.store.base.Store` in one SQLite file.  See the module docstring."""

    def __init__(self, path: str | Path, *, timeout: float = 5.0, linger_s: float = 0.002,
                 durable: bool = False) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.owner = new_owner_id()
        self.migrated_from: int = SCHEMA_VERSION
        self._linger = linger_s
        self._pending: list[tuple[Any, ...]] = []  # ops of the batch being gathered (calling thread)
        self._timer_loop: asyncio.AbstractEventLoop | None = None  # where the hand-off of that batch is due
        # prepared batches for the writer; SimpleQueue.put never blocks the caller (no lock the writer holds)
        self._queue: queue.SimpleQueue[tuple[list[tuple[str, Any, bool]], list[tuple[Any, ...]]]] = (
            queue.SimpleQueue())
        self._error: StoreError | None = None
        self._closed = False
        self._read_lock = threading.Lock()
        self._tails: dict[str, int] = {}  # run id -> next transcript seq written by the batches prepared so far
        self._wconn = self._open(timeout, durable)
        try:
            self._rconn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self._rconn.execute("PRAGMA query_only=1")
        except sqlite3.Error as e:
            self._wconn.close()
            raise _error(self.path, e, "opening it for reading") from None
        self._thread = threading.Thread(target=self._writer, name=f"subagents-store:{self.path.name}", daemon=True)
        self._thread.start()

    # -- opening --------------------------------------------------------------------------------
    def _open(self, timeout: float, durable: bool) -> sqlite3.Connection:
        creating = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the directory of the run store {self.path} ({e}); create it, "
                             "or point [store] url at a writable path") from None
        try:
            conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise _error(self.path, e, "opening it") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                found, _ = migrate(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            self.migrated_from = found
            if creating:
                write_gitignore(self.path.parent)
        except ValueError as e:
            conn.close()
            raise StoreError(f"the run store {self.path} has schema version {e.args[0]}, newer than the "
                             f"{SCHEMA_VERSION} this subagents understands; upgrade subagents, "
                             "or point [store] url at another file") from None
        except LookupError:
            conn.close()
            raise StoreError(f"the run store {self.path} is a SQLite database but not a subagents store; "
                             "point [store] url at another file") from None
        except sqlite3.Error as e:
            conn.close()
            raise _error(self.path, e, "opening it") from None
        return conn

    # -- the calling side: snapshot, enqueue, return -------------------------------------------
    def _put(self, op: tuple[Any, ...]) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise StoreError(f"the run store {self.path} is closed; open a new Runtime to use it")
        self._pending.append(op)
        timer = self._timer_loop
        if timer is not None and not timer.is_closed():
            return  # a hand-off is already due for this batch
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._handoff()
        else:  # the first op of a batch: hand it over in linger_s
            self._timer_loop = loop
            loop.call_later(self._linger, self._handoff)

    def _handoff(self) -> None:
        """Fold the pending ops into statements (on the calling thread) and queue them for the writer.

        Preparing here keeps the writer's use of the GIL to a few short calls per batch, so it
        hardly ever makes the event loop wait.
        """
        self._timer_loop = None
        ops, self._pending = self._pending, []
        if not ops:
            return
        plan = Plan()
        signals: list[tuple[Any, ...]] = []
        for op in ops:
            if op[0] in (FLUSH, CALL, STOP):
                signals.append(op)
            else:
                plan.add(op)
        stmts = Recorder()
        try:
            if not plan.empty():
                plan.apply(stmts, self._tails)
        except (ValueError, TypeError, OverflowError) as e:
            self._error = _error(self.path, e, "preparing a write")
            stmts.calls.clear()
        self._queue.put((stmts.calls, signals))

    def create_run(self, rec: RunRecord) -> None:
        """Record a new run; the store takes ``rec`` over (the caller must not change it afterwards)."""
        if not rec.owner:
            rec.owner = self.owner
        self._put((CREATE, rec))

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        check_run_fields(fields)
        self._put((UPDATE, run_id, dict(fields)))

    def append_messages(self, run_id: str, start_seq: int, messages: Sequence[Message],
                        delivered: Sequence[str] = (), at: float = 0.0) -> None:
        self._put((APPEND, run_id, start_seq, tuple(messages), tuple(delivered), at))

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        check_run_fields(fields)
        ann = None if announcement is None else dataclasses.replace(announcement)
        self._put((FINISH, run_id, dict(fields), ann))

    def mark_delivered(self, announcement_id: str, at: float) -> None:
        self._put((DELIVER, announcement_id, at))

    def delete_run(self, run_id: str) -> None:
        self._put((DELETE, run_id))

    def heartbeat(self, owner: str, at: float) -> None:
        self._put((SQL, "INSERT OR REPLACE INTO owners (owner, heartbeat) VALUES (?, ?)", (owner, at)))

    def add_request(self, run_id: str, kind: str, message: str, at: float) -> None:
        self._put((SQL, "INSERT INTO requests (run_id, kind, message, created_at) VALUES (?, ?, ?, ?)",
                   (run_id, kind, message, at)))

    def add_audit(self, run_id: str, kind: str, data: dict[str, Any], at: float) -> None:
        self._put((SQL, "INSERT INTO audit (run_id, at, kind, data) VALUES (?, ?, ?, ?)",
                   (run_id, at, kind, json.dumps(data, ensure_ascii=False, default=str))))

    def audit_of(self, run_id: str) -> list[AuditRecord]:
        rows = self._read("SELECT run_id, at, kind, data FROM audit WHERE run_id = ? ORDER BY id", (run_id,))
        return [AuditRecord(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    def on_commit(self, callback: Callable[[], None]) -> bool:
        self._put((CALL, callback))
        return True

    def flush(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            return
        done = threading.Event()
        self._pending.append((FLUSH, done))
        self._handoff()
        while not done.wait(0.5):
            if not self._thread.is_alive():
                break
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._pending.append((STOP,))
            self._handoff()
            self._thread.join()
            self._wconn.close()
            self._rconn.close()

    # -- reads ----------------------------------------------------------------------------------
    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise StoreError(f"the run store {self.path} is closed; open a new Runtime to use it")
        try:
            with self._read_lock:
                return self._rconn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as e:
            raise _error(self.path, e, "reading it") from None

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(f"SELECT {COLS_SQL} FROM runs WHERE run_id = ?", (run_id,))
        return record_from_row(rows[0]) if rows else None

    def list_runs(self, *, include_archived: bool = False, status: str | None = None,
                  root_id: str | None = None) -> list[RunRecord]:
        where, params = [], []
        if not include_archived:
            where.append("archived = 0")
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if root_id is not None:
            where.append("(root_id = ? OR run_id = ?)")
            params += [root_id, root_id]
        cond = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._read(f"SELECT {COLS_SQL} FROM runs{cond} ORDER BY created_at, rowid", params)
        return [record_from_row(r) for r in rows]

    def child_ids(self, parent_id: str) -> list[str]:
        rows = self._read("SELECT run_id FROM runs WHERE parent_id = ? ORDER BY created_at, rowid", (parent_id,))
        return [r[0] for r in rows]

    def transcript(self, run_id: str) -> list[Message]:
        rows = self._read("SELECT message FROM transcript WHERE run_id = ? ORDER BY seq", (run_id,))
        return [message_from_dict(json.loads(r[0])) for r in rows]

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]:
        cond, params = ("AND parent_id = ?", (parent_id,)) if parent_id is not None else ("", ())
        rows = self._read(f"SELECT {ANN_COLS} FROM announcements WHERE delivered_at IS NULL {cond} "
                          "ORDER BY created_at, rowid", params)
        return [AnnouncementRecord(*r) for r in rows]

    def announcements_of(self, child_id: str | None = None, parent_id: str | None = None
                         ) -> list[AnnouncementRecord]:
        rows = self._read(f"SELECT {ANN_COLS} FROM announcements WHERE (?1 IS NULL OR child_id = ?1) "
                          "AND (?2 IS NULL OR parent_id = ?2) ORDER BY created_at, rowid", (child_id, parent_id))
        return [AnnouncementRecord(*r) for r in rows]

    def cleanup_candidates(self, now: float) -> list[RunRecord]:
        rows = self._read(f"SELECT {COLS_SQL} FROM runs WHERE archived = 0 AND status IN "
                          "('completed', 'errored', 'shutdown') AND (cleanup = 'delete' OR archive_at IS NULL "
                          "OR archive_at <= ?) ORDER BY created_at, rowid", (now,))
        return [record_from_row(r) for r in rows]

    def owner_heartbeat(self, owner: str) -> float | None:
        rows = self._read("SELECT heartbeat FROM owners WHERE owner = ?", (owner,))
        return float(rows[0][0]) if rows else None

    def take_requests(self, owner: str, at: float) -> list[Request]:
        """Hand out open requests for this owner's committed runs (once each: marked done in the same call)."""
        rows = self._read("SELECT q.id, q.run_id, q.kind, q.message, q.created_at FROM requests q JOIN runs r "
                          "ON r.run_id = q.run_id WHERE q.done_at IS NULL AND r.owner = ? ORDER BY q.id", (owner,))
        if rows:
            ids = [(at, r[0]) for r in rows]
            self._put((SQL, "UPDATE requests SET done_at = ? WHERE id = ? AND done_at IS NULL", ids, True))
        return [Request(*r) for r in rows]

    # -- the writer thread ----------------------------------------------------------------------
    def _writer(self) -> None:
        q = self._queue
        while True:
            batches = [q.get()]
            while not q.empty():
                batches.append(q.get_nowait())
            if self._error is None:
                self._commit_or_fail([c for calls, _ in batches for c in calls])
            stop = False
            for _, signals in batches:  # flush waiters and commit callbacks run even after a failure
                for op in signals:
                    if op[0] == FLUSH:
                        op[1].set()
                    elif op[0] == CALL:
                        with contextlib.suppress(RuntimeError):  # the event loop that asked is closed
                            op[1]()
                    else:
                        stop = True
            if stop:
                return

    def _commit_or_fail(self, calls: list[tuple[str, Any, bool]]) -> None:
        if not calls:
            return
        c = self._wconn
        try:
            c.execute("BEGIN IMMEDIATE")
            for sql, params, many in calls:
                if many:
                    c.executemany(sql, params)
                else:
                    c.execute(sql, params)
            c.execute("COMMIT")
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as e:
            self._error = _error(self.path, e, "writing to it")
            with contextlib.suppress(sqlite3.Error):
                c.execute("ROLLBACK")


