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
import functools
import json
import operator
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ..messages import Message, TextBlock, ToolUseBlock, message_from_dict
from ._schema import RUN_COLUMNS, SCHEMA_VERSION, migrate
from .base import AnnouncementRecord, Request, RunRecord
from .memory import new_owner_id

__all__ = ["SQLiteStore"]

_JSON_COLS = frozenset({"usage", "limits"})
_BOOL_COLS = frozenset({"background", "archived", "truncated"})
_RUN_FIELDS = frozenset(RUN_COLUMNS)
_COLS_SQL = ", ".join(f'"{c}"' for c in RUN_COLUMNS)
_INSERT_RUN = f"INSERT OR REPLACE INTO runs ({_COLS_SQL}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})"
_ANN_COLS = "id, parent_id, child_id, text, created_at, delivered_at"

# queue op codes
_CREATE, _UPDATE, _APPEND, _FINISH, _DELIVER, _DELETE, _SQL, _CALL, _FLUSH, _STOP = range(10)


def _col_value(name: str, v: Any) -> Any:
    if name in _JSON_COLS:
        return _encode(v)
    if name in _BOOL_COLS:
        return int(bool(v))
    return v


_get_row = operator.attrgetter(*RUN_COLUMNS)
_JSON_IDX = tuple(RUN_COLUMNS.index(c) for c in sorted(_JSON_COLS))
_BOOL_IDX = tuple(RUN_COLUMNS.index(c) for c in sorted(_BOOL_COLS))
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_esc: Callable[[str], str] = json.encoder.encode_basestring


def message_json(m: Message) -> str:
    """``json.dumps(message_to_dict(m))`` in compact form, built directly (2-3x faster on the hot path)."""
    parts = []
    for b in m.content:
        if isinstance(b, TextBlock):
            parts.append('{"kind":"text","text":' + _esc(b.text) + "}")
        elif isinstance(b, ToolUseBlock):
            parts.append('{"kind":"tool_use","id":' + _esc(b.id) + ',"name":' + _esc(b.name)
                         + ',"arguments":' + _encode(b.arguments) + "}")
        else:
            parts.append('{"kind":"tool_result","tool_use_id":' + _esc(b.tool_use_id) + ',"content":'
                         + _esc(b.content) + (',"is_error":true}' if b.is_error else "}"))
    return '{"role":' + _esc(m.role) + ',"content":[' + ",".join(parts) + "]}"


def _from_json(i: int, col: str) -> str:
    v = f"json_extract(value, '$[{i}]')"
    return f"json({v})" if col in _JSON_COLS else v


_INSERT_RUN_PREFIX = f"INSERT OR REPLACE INTO runs ({_COLS_SQL}) VALUES "


def _insert_rows(c: _Recorder, prefix: str, ncols: int, rows: Sequence[Sequence[Any]]) -> None:
    """Insert many rows with one multi-row ``VALUES`` statement per chunk: one GIL release per chunk
    instead of one per row (``executemany`` steps row by row, and each step re-takes the GIL)."""
    per = max(1, 32_000 // ncols)
    one = "(" + ", ".join("?" * ncols) + ")"
    for i in range(0, len(rows), per):
        chunk = rows[i:i + per]
        c.execute(prefix + ", ".join([one] * len(chunk)), [v for row in chunk for v in row])


@functools.lru_cache(maxsize=64)
def _update_sql(keys: tuple[str, ...]) -> str:
    sets = ", ".join(f'"{k}" = {_from_json(i + 1, k)}' for i, k in enumerate(keys))
    return (f"UPDATE runs SET {sets} FROM (SELECT value FROM json_each(?)) AS j "
            "WHERE runs.run_id = json_extract(j.value, '$[0]')")


def _record_row(rec: RunRecord) -> list[Any]:
    row: list[Any] = list(_get_row(rec))
    for i in _JSON_IDX:
        row[i] = _encode(row[i])
    for i in _BOOL_IDX:
        row[i] = int(bool(row[i]))
    return row


def _record_from_row(row: Sequence[Any]) -> RunRecord:
    d: dict[str, Any] = {}
    for c, v in zip(RUN_COLUMNS, row, strict=True):
        if c in _JSON_COLS:
            v = json.loads(v) if v else {}
        elif c in _BOOL_COLS:
            v = bool(v)
        d[c] = v
    return RunRecord(**d)


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
        plan = _Plan()
        signals: list[tuple[Any, ...]] = []
        for op in ops:
            if op[0] in (_FLUSH, _CALL, _STOP):
                signals.append(op)
            else:
                plan.add(op)
        stmts = _Recorder()
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
        self._put((_CREATE, rec))

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        self._check_fields(fields)
        self._put((_UPDATE, run_id, dict(fields)))

    def append_messages(self, run_id: str, start_seq: int, messages: Sequence[Message],
                        delivered: Sequence[str] = (), at: float = 0.0) -> None:
        self._put((_APPEND, run_id, start_seq, tuple(messages), tuple(delivered), at))

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        self._check_fields(fields)
        ann = None if announcement is None else dataclasses.replace(announcement)
        self._put((_FINISH, run_id, dict(fields), ann))

    def mark_delivered(self, announcement_id: str, at: float) -> None:
        self._put((_DELIVER, announcement_id, at))

    def delete_run(self, run_id: str) -> None:
        self._put((_DELETE, run_id))

    def heartbeat(self, owner: str, at: float) -> None:
        self._put((_SQL, "INSERT OR REPLACE INTO owners (owner, heartbeat) VALUES (?, ?)", (owner, at)))

    def add_request(self, run_id: str, kind: str, message: str, at: float) -> None:
        self._put((_SQL, "INSERT INTO requests (run_id, kind, message, created_at) VALUES (?, ?, ?, ?)",
                   (run_id, kind, message, at)))

    def on_commit(self, callback: Callable[[], None]) -> bool:
        self._put((_CALL, callback))
        return True

    def flush(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            return
        done = threading.Event()
        self._pending.append((_FLUSH, done))
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
            self._pending.append((_STOP,))
            self._handoff()
            self._thread.join()
            self._wconn.close()
            self._rconn.close()

    @staticmethod
    def _check_fields(fields: dict[str, Any]) -> None:
        for k in fields:
            if k not in _RUN_FIELDS or k == "run_id":
                raise StoreError(f"unknown run record field {k!r}; the fields are those of RunRecord")

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
        rows = self._read(f"SELECT {_COLS_SQL} FROM runs WHERE run_id = ?", (run_id,))
        return _record_from_row(rows[0]) if rows else None

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
        rows = self._read(f"SELECT {_COLS_SQL} FROM runs{cond} ORDER BY created_at, rowid", params)
        return [_record_from_row(r) for r in rows]

    def transcript(self, run_id: str) -> list[Message]:
        rows = self._read("SELECT message FROM transcript WHERE run_id = ? ORDER BY seq", (run_id,))
        return [message_from_dict(json.loads(r[0])) for r in rows]

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]:
        cond, params = ("AND parent_id = ?", (parent_id,)) if parent_id is not None else ("", ())
        rows = self._read(f"SELECT {_ANN_COLS} FROM announcements WHERE delivered_at IS NULL {cond} "
                          "ORDER BY created_at, rowid", params)
        return [AnnouncementRecord(*r) for r in rows]

    def announcements_of(self, child_id: str | None = None, parent_id: str | None = None
                         ) -> list[AnnouncementRecord]:
        rows = self._read(f"SELECT {_ANN_COLS} FROM announcements WHERE (?1 IS NULL OR child_id = ?1) "
                          "AND (?2 IS NULL OR parent_id = ?2) ORDER BY created_at, rowid", (child_id, parent_id))
        return [AnnouncementRecord(*r) for r in rows]

    def cleanup_candidates(self, now: float) -> list[RunRecord]:
        rows = self._read(f"SELECT {_COLS_SQL} FROM runs WHERE archived = 0 AND status IN "
                          "('completed', 'errored', 'shutdown') AND (cleanup = 'delete' OR archive_at IS NULL "
                          "OR archive_at <= ?) ORDER BY created_at, rowid", (now,))
        return [_record_from_row(r) for r in rows]

    def owner_heartbeat(self, owner: str) -> float | None:
        rows = self._read("SELECT heartbeat FROM owners WHERE owner = ?", (owner,))
        return float(rows[0][0]) if rows else None

    def take_requests(self, owner: str, at: float) -> list[Request]:
        """Hand out open requests for this owner's committed runs (once each: marked done in the same call)."""
        rows = self._read("SELECT q.id, q.run_id, q.kind, q.message, q.created_at FROM requests q JOIN runs r "
                          "ON r.run_id = q.run_id WHERE q.done_at IS NULL AND r.owner = ? ORDER BY q.id", (owner,))
        if rows:
            ids = [(at, r[0]) for r in rows]
            self._put((_SQL, "UPDATE requests SET done_at = ? WHERE id = ? AND done_at IS NULL", ids, True))
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
                    if op[0] == _FLUSH:
                        op[1].set()
                    elif op[0] == _CALL:
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


class _Recorder:
    """Stands in for a connection while a batch is prepared: records the statements for the writer."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, bool]] = []

    def execute(self, sql: str, params: Any = ()) -> None:
        self.calls.append((sql, params, False))

    def executemany(self, sql: str, params: Any) -> None:
        self.calls.append((sql, params, True))


class _Plan:
    """The net effect of one batch, applied in a fixed order that gives the same result as the ops in order."""

    __slots__ = ("anns", "delete", "delivered", "inserts", "sql", "trans", "updates")

    def __init__(self) -> None:
        self.delete: list[str] = []
        self.inserts: dict[str, RunRecord] = {}
        self.updates: dict[str, dict[str, Any]] = {}
        self.trans: dict[str, list[Any]] = {}  # run id -> [lowest seq written, next seq, {seq: message}]
        self.anns: dict[str, AnnouncementRecord] = {}
        self.delivered: dict[str, float] = {}
        self.sql: list[tuple[Any, ...]] = []

    def empty(self) -> bool:
        return not (self.delete or self.inserts or self.updates or self.trans or self.anns or self.delivered
                    or self.sql)

    def add(self, op: tuple[Any, ...]) -> None:
        code = op[0]
        if code == _CREATE:
            rec: RunRecord = op[1]
            self.inserts[rec.run_id] = rec
            self.updates.pop(rec.run_id, None)
        elif code in (_UPDATE, _FINISH):
            self._update(op[1], op[2])
            if code == _FINISH and op[3] is not None:
                ann: AnnouncementRecord = op[3]
                self.anns.setdefault(ann.id, ann)
        elif code == _APPEND:
            _, run_id, start, msgs, delivered, at = op
            self._append(run_id, start, msgs)
            for ann_id in delivered:
                self._deliver(ann_id, at)
        elif code == _DELIVER:
            self._deliver(op[1], op[2])
        elif code == _DELETE:
            run_id = op[1]
            self.inserts.pop(run_id, None)
            self.updates.pop(run_id, None)
            self.trans.pop(run_id, None)
            for a in [a for a in self.anns.values() if a.child_id == run_id and a.delivered_at is not None]:
                del self.anns[a.id]
            self.delete.append(run_id)
        elif code == _SQL:
            self.sql.append(op)

    def _append(self, run_id: str, start: int, msgs: tuple[Message, ...]) -> None:
        t = self.trans.get(run_id)
        if t is None:
            t = self.trans[run_id] = [start, start, {}]
        tail: dict[int, Message] = t[2]
        if start < t[1]:  # rewriting the tail (rare): drop what it replaces
            for k in [k for k in tail if k >= start]:
                del tail[k]
            t[0] = min(t[0], start)
        for i, m in enumerate(msgs):
            tail[start + i] = m
        t[1] = start + len(msgs)

    def _update(self, run_id: str, fields: dict[str, Any]) -> None:
        if not fields:
            return
        rec = self.inserts.get(run_id)
        if rec is not None:
            for k, v in fields.items():
                setattr(rec, k, v)
        else:
            self.updates.setdefault(run_id, {}).update(fields)

    def _deliver(self, ann_id: str, at: float) -> None:
        ann = self.anns.get(ann_id)
        if ann is not None:
            if ann.delivered_at is None:
                ann.delivered_at = at
        else:
            self.delivered.setdefault(ann_id, at)

    def apply(self, c: _Recorder, tails: dict[str, int]) -> None:
        """Write the batch with a handful of statements: rows travel as one JSON array per statement
        (``json_each``), so the writer holds the GIL briefly and releases it a few times per batch, not per row.

        ``tails`` (run id -> next transcript seq known committed) spares the ``DELETE`` of plain appends.
        """
        if self.delete:
            ids = [(r,) for r in self.delete]
            c.executemany("DELETE FROM runs WHERE run_id = ?", ids)
            c.executemany("DELETE FROM transcript WHERE run_id = ?", ids)
            c.executemany("DELETE FROM announcements WHERE child_id = ? AND delivered_at IS NOT NULL", ids)
            for r in self.delete:
                tails.pop(r, None)
        if self.inserts:
            _insert_rows(c, _INSERT_RUN_PREFIX, len(RUN_COLUMNS), [_record_row(r) for r in self.inserts.values()])
        by_keys: dict[tuple[str, ...], list[list[Any]]] = {}
        for run_id, fields in self.updates.items():
            by_keys.setdefault(tuple(fields), []).append([run_id, *fields.values()])
        for keys, rows in by_keys.items():
            c.execute(_update_sql(keys), (_encode(rows),))
        if self.trans:
            self._apply_transcript(c, tails)
        self._apply_announcements(c)

    def _apply_transcript(self, c: _Recorder, tails: dict[str, int]) -> None:
        cut = [(r, t[0]) for r, t in self.trans.items()
               if r not in self.inserts and (r not in tails or t[0] < tails[r])]
        if cut:
            c.executemany("DELETE FROM transcript WHERE run_id = ? AND seq >= ?", cut)
        _insert_rows(c, "INSERT OR REPLACE INTO transcript (run_id, seq, message) VALUES ", 3,
                     [(r, seq, message_json(m)) for r, t in self.trans.items() for seq, m in t[2].items()])
        if len(tails) > 50_000:
            tails.clear()
        for r, t in self.trans.items():
            tails[r] = t[1]

    def _apply_announcements(self, c: _Recorder) -> None:
        if self.anns:
            c.executemany(f"INSERT OR IGNORE INTO announcements ({_ANN_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
                          [(a.id, a.parent_id, a.child_id, a.text, a.created_at, a.delivered_at)
                           for a in self.anns.values()])
        if self.delivered:
            c.executemany("UPDATE announcements SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL",
                          [(at, i) for i, at in self.delivered.items()])
        for op in self.sql:
            if len(op) > 3:
                c.executemany(op[1], op[2])
            else:
                c.execute(op[1], op[2])

