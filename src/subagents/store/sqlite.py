"""``SQLiteStore``: the embedded, durable default store (WAL mode, one writer, group commit).

How a write travels:

1. The calling thread (the event loop) snapshots its arguments into a tuple and appends it to the
   batch being gathered — about a microsecond, no I/O.  The first op of a batch schedules its
   hand-off ``linger_s`` later (2 ms; at once when no event loop runs, and on :meth:`flush`).
2. The hand-off folds the batch into its net effect (a run created, updated and finished within
   one batch becomes one ``INSERT``), serializes it and turns it into a few multi-row statements,
   still on the calling thread, then puts them on the writer's queue.
3. One writer process (:mod:`._proc`) commits everything queued in **one** transaction, in queue order (so the
   store applies operations in call order), then runs the batch's :meth:`on_commit` callbacks (the
   runtime publishes the events that announce status changes from there — see ``docs/durability.md``)
   and wakes :meth:`flush` waiters.  Preparing on the calling thread keeps the writer's use of the
   GIL to a few short calls per batch, so it seldom makes the event loop wait for it.

``synchronous=NORMAL`` in WAL mode: a committed batch survives the process being killed; an OS
crash or power loss may lose the last batches (``durable=True`` selects ``synchronous=FULL``).
The backlog (accepted, not yet committed: gathered, queued and committing) is at most
``max_backlog`` operations (:data:`MAX_BACKLOG`): a SIGKILL loses no more.  A call that would go over
it blocks until the writer catches up; an async producer awaits :meth:`SQLiteStore.room` instead.
The store renews its owner lease from the writer process (:mod:`._writer_main`, :mod:`._lease`).

The store belongs to the event loop that first writes to it (the runtime's); a write or flush from another
thread of the process (a model or tool thread) is handed to that loop and waited for, so the batch being
gathered and the writer's pipe are only ever touched by one thread.  Without a running loop (a CLI command)
the calling thread does the work itself.  Reads use their own connection and see what is committed; call
:meth:`flush` first when a read must see this process's own recent writes.  A writer failure is kept and raised (as
:class:`~subagents.exceptions.StoreError`) by every later call — it never vanishes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ..messages import Message
from ._batch import (
    _SWEEP_STEP,
    APPEND,
    CALL,
    CREATE,
    DELETE,
    DELIVER,
    FINISH,
    SQL,
    UPDATE,
    announcement_values,
    message_values,
    record_values,
    sweep_values,
)
from ._checkpoint import MAX_WAL_PAGES
from ._lease import LEASE_S, RENEW_S, claim_runs, new_owner_id, process_identity
from ._open import WRITER_PRAGMAS, open_writer
from ._proc import ProcWriter
from ._sql_reads import SqlReads
from ._support import on_loop, running_loop, store_error
from .base import (
    AnnouncementRecord,
    Request,
    RunRecord,
    check_run_fields,
    stamp_archive_at,
)

__all__ = ["MAX_BACKLOG", "SQLiteStore"]

MAX_BACKLOG = 2_000
"""Store operations accepted but not yet committed, at most (the batch being gathered included): what a
SIGKILL can lose.  A caller that would go over it waits for the writer (see :meth:`SQLiteStore.room`)."""


class SQLiteStore(SqlReads):
    """A :class:`~subagents.store.base.Store` in one SQLite file.  See the module docstring."""

    writes_at_once = False

    def __init__(self, path: str | Path, *, timeout: float = 5.0, linger_s: float = 0.002,
                 durable: bool = False, max_backlog: int = MAX_BACKLOG, lease_s: float = LEASE_S,
                 renew_s: float | None = None, checkpoint_s: float = 1.0,
                 max_wal_pages: int = MAX_WAL_PAGES) -> None:
        if max_backlog < 2:
            raise ValueError("max_backlog must be at least 2 operations")
        if not 0 < (renew_s if renew_s is not None else lease_s / 6) < lease_s:
            raise ValueError("renew_s must be positive and shorter than lease_s")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.owner = new_owner_id()
        self.lease_s = lease_s
        self.renew_s = renew_s if renew_s is not None else min(RENEW_S, lease_s / 6)
        self.max_backlog = max_backlog
        # pending ops handed at once to an idle writer: the batching delay's timer waits for the loop's next step
        self._eager = max(1, max_backlog // 8)
        self.archive_after_s: float | None = None
        self._timeout = timeout
        self._linger = linger_s
        self._pending: list[tuple[Any, ...]] = []  # ops of the batch being gathered (calling thread)
        self._npending = 0  # how many of them came through _put (the writer counts them committed)
        self._signals: list[tuple[Any, ...]] = []  # the batch's commit callbacks (CALL ops), kept apart
        self._timer_loop: asyncio.AbstractEventLoop | None = None  # where the hand-off of that batch is due
        self._home: asyncio.AbstractEventLoop | None = None  # the event loop the store belongs to (first to write)
        self._batch = 0  # the number of the batch being gathered (hand-offs so far)
        self._closed = False
        self._read_lock = threading.Lock()
        wconn, self.migrated_from = open_writer(self.path, timeout, durable)
        wconn.close()  # the writer process opens its own, on the first write
        try:
            self._rconn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self._rconn.execute("PRAGMA query_only=1")
        except sqlite3.Error as e:
            raise store_error(self.path, e, "opening it for reading") from None
        pragmas = ("PRAGMA journal_mode=WAL", f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}", *WRITER_PRAGMAS)
        self._w = ProcWriter(self.path, timeout=timeout, pragmas=pragmas, checkpoint_s=checkpoint_s,
                             max_wal_pages=max_wal_pages)
        self.on_close: list[Callable[[], None]] = []  # close() calls them first (teams.open: the team store)

    @property
    def _error(self) -> StoreError | None:
        return self._w.error

    # -- the calling side: snapshot, enqueue, return -------------------------------------------
    def _put(self, op: tuple[Any, ...], signal: bool = False) -> None:
        loop = running_loop()
        if loop is not self._home and self._elsewhere(loop, lambda: self._put(op, signal)):
            return
        w = self._w
        if w.error is not None:
            raise w.error
        if self._closed:
            raise StoreError(f"the run store {self.path} is closed; open a new Runtime to use it")
        if w.submitted - w.committed >= self.max_backlog:  # (w.backlog) at its bound: back-pressure; hand
            self._handoff()                                # over what is gathered and wait for the writer
            w.wait_room(self.max_backlog)
            if w.error is not None:
                raise w.error
        (self._signals if signal else self._pending).append(op)
        self._npending += 1
        w.submitted += 1
        timer = self._timer_loop  # (the running loop is not closed: asked only of another)
        if timer is not None and (timer is loop or not timer.is_closed()):
            if self._npending >= self._eager and not self._npending & 31 and w.poll() <= 1:
                self._handoff()  # a long step of the event loop (a burst of spawns) keeps the writer fed
            return  # a hand-off is already due for this batch
        if loop is None:
            self._handoff()
        else:  # the first op of a batch: hand it over in linger_s
            self._timer_loop = loop
            loop.call_later(self._linger, self._handoff_due)

    def _elsewhere(self, loop: asyncio.AbstractEventLoop | None, fn: Callable[[], None]) -> bool:
        """Called from a thread other than the home loop's: run ``fn`` there (and wait) while that loop runs;
        ``False`` when this thread is to do it itself (it is the first loop to write: now the home)."""
        home = self._home
        if home is not None and home.is_running() and on_loop(home, fn):
            return True
        if loop is not None:
            self._home = loop
        return False

    def _handoff_due(self) -> None:
        """The batching delay passed: hand the batch over — or, while the writer is still busy, keep
        gathering and hand over the moment it is done (one transaction then carries all of it)."""
        loop = self._timer_loop
        if loop is not None and self._w.poll() > 1 and self._w.defer_until_idle(loop, self._handoff_due):
            return  # (one batch committing, one waiting: the writer never idles between them)
        self._handoff()

    def _handoff(self) -> None:
        """Send the pending operations to the writer process, which folds them into statements and commits."""
        self._timer_loop = None
        self._batch += 1
        ops, self._pending = self._pending, []
        signals, self._signals = self._signals, []
        n, self._npending = self._npending, 0
        if ops or signals:
            self._w.submit((ops, signals, n))

    @property
    def gathering(self) -> int | None:
        """The batch being gathered (``None`` once failed or closed): :meth:`on_commit` callbacks asked while it stays
        the same run together, after the commit of every write made until it changes (one event gate per batch)."""
        return None if self._w.error is not None or self._closed else self._batch

    async def room(self) -> None:
        """Wait, without blocking the event loop, while the backlog is over half its bound (back-pressure
        for asynchronous producers; a synchronous call blocks briefly only at the bound itself)."""
        w = self._w
        if w.backlog >= self.max_backlog // 2:
            if w.inflight == 0:  # else the gathered batch goes as soon as the writer is idle (group commit)
                self._handoff()
            await w.room(self.max_backlog // 2)

    def create_run(self, rec: RunRecord) -> None:
        """Record a new run; the store takes ``rec`` over (the caller must not change it afterwards)."""
        if not rec.owner:
            rec.owner = self.owner
        if rec.owner == self.owner:
            self._hold_lease()
        self._put((CREATE, record_values(rec)))

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        check_run_fields(fields)
        if fields.get("owner") == self.owner:  # adopting a run
            self._hold_lease()
        self._put((UPDATE, run_id, dict(fields)))

    def _hold_lease(self) -> None:
        if self._w.lease is None and not self._closed:
            self._w.hold_lease(self.owner, self.lease_s, self.renew_s, process_identity())

    def append_messages(self, run_id: str, start_seq: int, messages: Sequence[Message],
                        delivered: Sequence[str] = (), at: float = 0.0) -> None:
        self._put((APPEND, run_id, start_seq, tuple([message_values(m) for m in messages]), tuple(delivered), at))

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        check_run_fields(fields)
        self._put((FINISH, run_id, dict(stamp_archive_at(fields, self.archive_after_s, time.time())),
                   announcement_values(announcement)))

    def mark_delivered(self, announcement_id: str, at: float) -> None:
        self._put((DELIVER, announcement_id, at))

    def delete_run(self, run_id: str) -> None:
        self._put((DELETE, run_id))

    def renew_lease(self, owner: str, at: float, expires_at: float, process: str = "") -> None:
        self._put((SQL, "INSERT OR REPLACE INTO owners (owner, heartbeat, expires, process) VALUES (?, ?, ?, ?)",
                   (owner, at, expires_at, process)))

    def claim_runs(self, expected: Mapping[str, str]) -> set[str]:
        """See :meth:`Store.claim_runs`: one ``BEGIN IMMEDIATE`` transaction, on its own connection."""
        if not expected:
            return set()
        self.flush()
        self._hold_lease()
        return claim_runs(self.path, self._timeout, self.owner, self.lease_s, expected)

    def release_lease(self, owner: str) -> None:
        if owner == self.owner:
            self._w.drop_lease()
        self._put((SQL, "DELETE FROM owners WHERE owner = ?", (owner,)))

    def add_request(self, run_id: str, kind: str, message: str, at: float) -> None:
        self._put((SQL, "INSERT INTO requests (run_id, kind, message, created_at) VALUES (?, ?, ?, ?)",
                   (run_id, kind, message, at)))

    def add_audit(self, run_id: str, kind: str, data: dict[str, Any], at: float) -> None:
        self._put((SQL, "INSERT INTO audit (run_id, at, kind, data) VALUES (?, ?, ?, ?)",
                   (run_id, at, kind, json.dumps(data, ensure_ascii=False, default=str))))

    def on_commit(self, callback: Callable[[], None]) -> bool:
        """See :meth:`Store.on_commit`; asked on an event loop, it is called on that loop (with the batch's others)."""
        loop = running_loop()
        self._put((CALL, callback, loop), True)
        if loop is None:  # no event loop to call it later: wait for the commit (a CLI command, a thread)
            self._drain()
        return True

    def start_writer(self) -> None:
        """Start the writer process now, not at the first write: it takes ~50-100 ms to be ready, and the first
        writes of a busy runtime wait for it (back-pressure).  A :class:`~subagents.Runtime` calls it as it opens."""
        if not self._closed:
            self._w.start()

    def hurry(self) -> None:
        if not self._closed and self._w.error is None:
            loop = running_loop()
            if loop is self._home or not self._elsewhere(loop, self.hurry):
                self._handoff()

    def _drain(self) -> None:
        """Hand the gathered batch over and wait until the writer answered every batch (on the home loop)."""
        loop = running_loop()
        if loop is not self._home and self._elsewhere(loop, self._drain):
            return
        self._handoff()
        self._w.wait(lambda: self._w.inflight == 0)

    def flush(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            return
        self._drain()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Release the lease (if held), commit everything, stop the writer process and reap it."""
        if self._closed:
            return
        for hook in self.on_close:  # each must not raise
            hook()
        try:
            if self._w.lease is not None and self._w.error is None:
                self.release_lease(self.owner)
            self.flush()
        finally:
            self._closed = True
            self._handoff()
            self._w.close()  # it commits what it read, checkpoints (TRUNCATE) and exits
            self._rconn.close()

    # -- reads ----------------------------------------------------------------------------------
    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise StoreError(f"the run store {self.path} is closed; open a new Runtime to use it")
        try:
            with self._read_lock:
                return self._rconn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as e:
            raise store_error(self.path, e, "reading it") from None

    def _sweep_step(self, lo: float, last: str, now: float, limit: int) -> list[Any]:
        return self._read(_SWEEP_STEP, sweep_values(lo, last, now, limit))

    def take_requests(self, owner: str, at: float) -> list[Request]:
        """Hand out open requests for this owner's committed runs (once each: marked done in the same call)."""
        rows = self._read("SELECT q.id, q.run_id, q.kind, q.message, q.created_at FROM requests q JOIN runs r "
                          "ON r.run_id = q.run_id WHERE q.done_at IS NULL AND r.owner = ? ORDER BY q.id", (owner,))
        if rows:
            ids = [(at, r[0]) for r in rows]
            self._put((SQL, "UPDATE requests SET done_at = ? WHERE id = ? AND done_at IS NULL", ids, True))
        return [Request(*r) for r in rows]
