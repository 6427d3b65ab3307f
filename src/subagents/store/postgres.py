"""``PostgresStore``: the run store in a PostgreSQL database, shared by runtimes on several machines.

``store="postgresql://user@host/db"`` (or ``[store] url``; any libpq URI or ``postgres://``).  It works
as the SQLite store does (:mod:`subagents.store.sqlite`), on ``psycopg`` 3:

* **Writes** are gathered on the calling thread, folded into their net effect (the shared
  :class:`~subagents.store._batch.Plan`), turned into statements (:mod:`._pg_batch`) and committed by one
  writer thread on its own connection, a batch per transaction, sent as one pipeline (group commit).
  Call order is kept; :meth:`flush` returns once everything before it is committed; ``on_commit``
  callbacks run after the commit that holds the writes before them; the backlog is bounded
  (:data:`MAX_BACKLOG`, back-pressure through :meth:`room`).  A commit is as durable as the server's
  ``synchronous_commit`` makes it.  A dropped connection (server restart, failover) is made again and the
  batch resent, for up to ``lease_s`` (:class:`~subagents.store._pg_support.PgWriter`); any other writer
  failure is kept and raised by every later call.
* **Reads** use a second connection (autocommit) and see what is committed — on every machine; a dropped
  one is made again once.
* **Owner leases** (:mod:`._lease`): the writer renews this store's row in ``owners`` while it owns runs and
  the store deletes it on a clean close, so another machine sees a dead owner's runs orphaned once its
  lease expires and takes them over with :meth:`claim_runs` — one transaction that locks the runs in a
  fixed order and moves each only if it still has the owner expected: of two claimants, one gets it.
* **Schema**: created or migrated forward at open (:mod:`._pg_schema`, version in ``subagents_schema``).
* **Teams**: :meth:`team_store` gives the :class:`~subagents.teams.postgres.PostgresTeamStore` on the same
  database (``open_team_store`` calls it), closed with this store.

The store is used from one thread at a time (the runtime's event loop thread, or a CLI command).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from ..exceptions import StoreError
from ..messages import Message
from ._batch import (
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
)
from ._lease import LEASE_S, RENEW_S, new_owner_id, process_identity
from ._pg_batch import apply_plan
from ._pg_schema import SWEEP_ORDER, open_schema
from ._pg_support import RENEW_SQL, PgReader, PgWriter, clean, connect, describe, pg_error
from ._schema import FINAL_SQL, SWEEP_KEY
from ._sql_reads import SqlReads
from ._writer import LeaseTerms
from .base import (
    AnnouncementRecord,
    Request,
    RunRecord,
    check_run_fields,
    stamp_archive_at,
)

if TYPE_CHECKING:
    from ..teams.postgres import PostgresTeamStore

__all__ = ["MAX_BACKLOG", "PostgresStore"]

MAX_BACKLOG = 2_000
"""Store operations accepted but not yet committed, at most (what a SIGKILL can lose)."""

_SWEEP_STEP = (f"SELECT {COLS_SQL} FROM runs WHERE archived = 0 AND {FINAL_SQL} AND ({SWEEP_ORDER}) > (%s, %s) "
               f"AND ({SWEEP_KEY}) <= %s ORDER BY {SWEEP_ORDER} LIMIT %s")
_CLAIM_LOCK = "SELECT run_id FROM runs WHERE run_id = ANY(%s) ORDER BY run_id FOR UPDATE"
_CLAIM = ("UPDATE runs r SET owner = %s FROM unnest(%s::text[], %s::text[]) AS e(run_id, old) "
          "WHERE r.run_id = e.run_id AND r.owner = e.old RETURNING r.run_id")
_TAKE_REQUESTS = ("UPDATE requests q SET done_at = %s FROM runs r WHERE r.run_id = q.run_id AND q.done_at IS NULL "
                  "AND r.owner = %s RETURNING q.id, q.run_id, q.kind, q.message, q.created_at")


class PostgresStore(SqlReads):
    """A :class:`~subagents.store.base.Store` in a PostgreSQL database.  See the module docstring."""

    writes_at_once = False
    _P, _ORD = "%s", "ord"  # (the shared reads: SqlReads)

    def __init__(self, url: str, *, timeout: float = 10.0, linger_s: float = 0.002, max_backlog: int = MAX_BACKLOG,
                 lease_s: float = LEASE_S, renew_s: float | None = None) -> None:
        if max_backlog < 2:
            raise ValueError("max_backlog must be at least 2 operations")
        if not 0 < (renew_s if renew_s is not None else lease_s / 6) < lease_s:
            raise ValueError("renew_s must be positive and shorter than lease_s")
        self.url = url  # as given (a password in it too); messages show ``where``, never the password
        self.where = describe(url)
        self.owner = new_owner_id()
        self.lease_s = lease_s
        self.renew_s = renew_s if renew_s is not None else min(RENEW_S, lease_s / 6)
        self.max_backlog = max_backlog
        self.archive_after_s: float | None = None
        self.timeout = timeout
        self._linger = linger_s
        self._pending: list[tuple[Any, ...]] = []
        self._npending = 0
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._tails: dict[str, int] = {}
        self._team: PostgresTeamStore | None = None
        wconn = connect(url, timeout, "opening it")
        try:
            self.migrated_from = open_schema(wconn, url, timeout)
            self._reader = PgReader(url, timeout)
        except BaseException:
            wconn.close()
            raise
        self._w = PgWriter(wconn, url, timeout, retry_s=lease_s)
        self.on_close: list[Callable[[], None]] = []  # close() calls them first

    # -- the calling side: snapshot, enqueue, return (as SQLiteStore) -----------------------------
    def _put(self, op: tuple[Any, ...]) -> None:
        w = self._w
        if w.error is not None:
            raise w.error
        if self._closed:
            raise StoreError(f"the run store {self.where} is closed; open a new Runtime to use it")
        if w.backlog >= self.max_backlog:  # back-pressure: hand over what is gathered, wait for the writer
            self._handoff()
            w.wait_room(self.max_backlog)
            if w.error is not None:
                raise w.error
        self._pending.append(op)
        self._npending += 1
        w.submitted += 1
        timer = self._timer_loop
        if timer is not None and not timer.is_closed():
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._handoff()
        else:
            self._timer_loop = loop
            loop.call_later(self._linger, self._handoff_due)

    def _handoff_due(self) -> None:
        loop = self._timer_loop
        if loop is not None and self._w.defer_until_idle(loop, self._handoff_due):
            return
        self._handoff()

    def _handoff(self) -> None:
        """Fold the pending ops into statements (on the calling thread) and queue them for the writer."""
        self._timer_loop = None
        ops, self._pending = self._pending, []
        n, self._npending = self._npending, 0
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
                apply_plan(plan, stmts, self._tails)
        except (ValueError, TypeError, OverflowError) as e:
            self._w.error = pg_error(self.url, e, "preparing a write")
            stmts.calls.clear()
        self._w.submit((stmts.calls, signals, n))

    async def room(self) -> None:
        w = self._w
        if w.backlog >= self.max_backlog // 2:
            if w.inflight == 0:
                self._handoff()
            await w.room(self.max_backlog // 2)

    def create_run(self, rec: RunRecord) -> None:
        if not rec.owner:
            rec.owner = self.owner
        if rec.owner == self.owner:
            self._hold_lease()
        self._put((CREATE, rec))

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        check_run_fields(fields)
        if fields.get("owner") == self.owner:
            self._hold_lease()
        self._put((UPDATE, run_id, dict(fields)))

    def _hold_lease(self) -> None:
        if self._w.lease is None and not self._closed:
            self._w.hold_lease(LeaseTerms(self.owner, self.lease_s, self.renew_s))

    def append_messages(self, run_id: str, start_seq: int, messages: Sequence[Message],
                        delivered: Sequence[str] = (), at: float = 0.0) -> None:
        self._put((APPEND, run_id, start_seq, tuple(messages), tuple(delivered), at))

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        check_run_fields(fields)
        a = announcement
        ann = a and AnnouncementRecord(a.id, a.parent_id, a.child_id, a.text, a.created_at, a.delivered_at)
        self._put((FINISH, run_id, dict(stamp_archive_at(fields, self.archive_after_s, time.time())), ann))

    def mark_delivered(self, announcement_id: str, at: float) -> None:
        self._put((DELIVER, announcement_id, at))

    def delete_run(self, run_id: str) -> None:
        self._put((DELETE, run_id))

    def renew_lease(self, owner: str, at: float, expires_at: float, process: str = "") -> None:
        self._put((SQL, RENEW_SQL, (owner, at, expires_at, process)))

    def release_lease(self, owner: str) -> None:
        if owner == self.owner:
            self._w.lease = None
        self._put((SQL, "DELETE FROM owners WHERE owner = %s", (owner,)))

    def add_request(self, run_id: str, kind: str, message: str, at: float) -> None:
        self._put((SQL, "INSERT INTO requests (run_id, kind, message, created_at) VALUES (%s, %s, %s, %s)",
                   (run_id, kind, clean(message), at)))

    def add_audit(self, run_id: str, kind: str, data: dict[str, Any], at: float) -> None:
        self._put((SQL, "INSERT INTO audit (run_id, at, kind, data) VALUES (%s, %s, %s, %s)",
                   (run_id, at, kind, json.dumps(data, ensure_ascii=False, default=str))))

    def on_commit(self, callback: Callable[[], None]) -> bool:
        self._put((CALL, callback))
        return True

    def hurry(self) -> None:
        if not self._closed and self._w.error is None:
            self._handoff()

    def flush(self) -> None:
        if self._w.error is not None:
            raise self._w.error
        if self._closed:
            return
        done = threading.Event()
        self._pending.append((FLUSH, done))
        self._handoff()
        while not done.wait(0.5):
            if not self._w.thread.is_alive():
                break
        if self._w.error is not None:
            raise self._w.error

    def close(self) -> None:
        """Release the lease (if held), commit everything, stop the writer, close the connections."""
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
            self._w.queue.put(None)
            self._w.thread.join()
            self._w.pg.close()
            self._reader.close()

    def team_store(self) -> PostgresTeamStore:
        """The team store on this database (:func:`~subagents.teams.open.open_team_store` calls this once)."""
        from ..teams.postgres import PostgresTeamStore

        if self._team is None:
            self._team = PostgresTeamStore(self.url, timeout=self.timeout, migrated=True)
            self.on_close.append(self._team.close)
        return self._team

    # -- transactions of their own: the claim, handing out requests -------------------------------
    def claim_runs(self, expected: Mapping[str, str]) -> set[str]:
        """See :meth:`Store.claim_runs`: the runs locked in id order, then moved if their owner is unchanged."""
        if not expected:
            return set()
        self.flush()
        self._hold_lease()
        at = time.time()
        ids = list(expected)

        def claim(c: psycopg.Connection[Any]) -> list[Any]:
            with c.transaction():
                c.execute(_CLAIM_LOCK, (ids,))
                rows = c.execute(_CLAIM, (self.owner, ids, [expected[i] for i in ids])).fetchall()
                if rows:
                    c.execute(RENEW_SQL, (self.owner, at, at + self.lease_s, process_identity()))
            return rows

        return {r[0] for r in self._with_conn(claim, "taking over runs in it")}

    def take_requests(self, owner: str, at: float) -> list[Request]:
        """Open requests for ``owner``'s committed runs, marked done in the same statement (handed out once)."""
        rows = self._with_conn(lambda c: c.execute(_TAKE_REQUESTS, (at, owner)).fetchall(), "taking requests")
        return sorted((Request(*r) for r in rows), key=lambda q: q.id)

    # -- reads ----------------------------------------------------------------------------------
    def _with_conn(self, work: Callable[[psycopg.Connection[Any]], list[Any]], doing: str) -> list[Any]:
        """``work(read connection)`` (see :class:`~subagents.store._pg_support.PgReader`)."""
        if self._w.error is not None:
            raise self._w.error
        if self._closed:
            raise StoreError(f"the run store {self.where} is closed; open a new Runtime to use it")
        return self._reader.run(work, doing)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._with_conn(lambda c: c.execute(sql, params).fetchall(), "reading it")

    def _sweep_step(self, lo: float, last: str, now: float, limit: int) -> list[Any]:
        return self._read(_SWEEP_STEP, (lo, last, now, limit))
