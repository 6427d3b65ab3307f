"""The SQLite store's writer thread: commits prepared batches, bounds the backlog, renews the owner lease.

The calling side (:class:`~subagents.store.sqlite.SQLiteStore`) counts every operation it accepts
(:attr:`Writer.submitted`); the writer counts those it committed (:attr:`Writer.committed`).  Their
difference is the **backlog** — everything a SIGKILL would lose.  Callers keep it under a bound:
a synchronous caller blocks in :meth:`Writer.wait_room` (briefly: that also hands the GIL to the
writer), an asynchronous one awaits :meth:`Writer.room` without blocking its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ._batch import CALL, FLUSH
from ._lease import process_identity
from ._support import store_error

__all__ = ["Batch", "LeaseTerms", "Writer"]

Call = tuple[str, Any, bool]
Batch = tuple[list[Call], list[tuple[Any, ...]], int]  # (statements, signals, operations it holds)
_RENEW = "INSERT OR REPLACE INTO owners (owner, heartbeat, expires, process) VALUES (?, ?, ?, ?)"


class LeaseTerms:
    """The lease a store holds while it owns runs: renewed every ``renew_s`` for ``lease_s`` more seconds."""

    __slots__ = ("lease_s", "owner", "process", "renew_s")

    def __init__(self, owner: str, lease_s: float, renew_s: float) -> None:
        self.owner, self.lease_s, self.renew_s = owner, lease_s, renew_s
        self.process = process_identity()


class Writer:
    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.queue: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()  # None: stop
        self.error: StoreError | None = None
        self.submitted = 0   # operations accepted (calling thread)
        self.committed = 0   # operations committed or failed (writer thread)
        self.lease: LeaseTerms | None = None  # set by the calling side when it first owns a run
        self.inflight = 0  # batches queued or being committed (under _idle_lock)
        self._idle_lock = threading.Lock()
        self._on_idle: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None
        self._next_renewal = 0.0
        self._cond = threading.Condition()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None], int]] = []
        self.thread = threading.Thread(target=self._run, name=f"subagents-store:{path.name}", daemon=True)
        self.thread.start()

    @property
    def backlog(self) -> int:
        return self.submitted - self.committed

    # -- the calling side ------------------------------------------------------------------------
    def hold_lease(self, terms: LeaseTerms) -> None:
        """Write the lease with the next transaction (so with the first run it covers), then renew it."""
        self._next_renewal = 0.0
        self.lease = terms

    def submit(self, batch: Batch) -> None:
        """Queue a prepared batch for the writer."""
        with self._idle_lock:
            self.inflight += 1
        self.queue.put(batch)

    def defer_until_idle(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> bool:
        """Have ``callback`` called on ``loop`` once no batch is queued or committing (one at a time: a new
        one replaces the last); ``False``, and nothing registered, when the writer is idle already.

        Group commit: while the writer commits, the calling side keeps gathering instead of queueing
        one small batch after another, so each transaction carries everything since the last."""
        with self._idle_lock:
            if self.inflight == 0:
                return False
            self._on_idle = (loop, callback)
            return True

    def wait_room(self, limit: int) -> None:
        """Block until the backlog is under ``limit`` (or the writer failed or stopped)."""
        with self._cond:
            while self.backlog >= limit and self.error is None and self.thread.is_alive():
                self._cond.wait(0.5)

    async def room(self, limit: int) -> None:
        """Wait, without blocking the event loop, until the backlog is under ``limit``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self.backlog < limit or self.error is not None or not self.thread.is_alive():
                return
            self._waiters.append((loop, fut, limit))
        await fut

    # -- the writer thread -----------------------------------------------------------------------
    def _run(self) -> None:
        q = self.queue
        while True:
            lease = self.lease
            timeout = None if lease is None else max(0.0, self._next_renewal - time.monotonic())
            batches: list[Batch | None] = []
            with contextlib.suppress(queue.Empty):  # no batch in time: only the lease is due
                batches.append(q.get(timeout=timeout))
            while not q.empty():
                batches.append(q.get_nowait())
            stop = None in batches
            real = [b for b in batches if b is not None]
            calls = [c for b in real for c in b[0]]
            renew = self._renewal()
            if renew is not None:
                calls.insert(0, renew)
            if self.error is None:
                self._commit(calls)
            self._done(sum(b[2] for b in real), stop)
            with self._idle_lock:
                self.inflight -= len(real)
                wake, self._on_idle = (self._on_idle, None) if self.inflight == 0 else (None, self._on_idle)
            if wake is not None:
                with contextlib.suppress(RuntimeError):  # that event loop is closed
                    wake[0].call_soon_threadsafe(wake[1])
            _signal(real)  # flush waiters and commit callbacks run even after a failure
            if stop:
                return

    def _renewal(self) -> Call | None:
        lease, now = self.lease, time.monotonic()
        if lease is None or now < self._next_renewal:
            return None
        self._next_renewal = now + lease.renew_s
        at = time.time()
        return _RENEW, (lease.owner, at, at + lease.lease_s, lease.process), False

    def _done(self, n: int, stop: bool) -> None:
        """Count ``n`` operations as committed; wake the callers waiting for room."""
        with self._cond:
            self.committed += n
            self._cond.notify_all()
            if not self._waiters:
                return
            every = stop or self.error is not None
            wake: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
            keep = []
            for w in self._waiters:  # (one pass: thousands of runs may wait, in a fan-out)
                if every or self.backlog < w[2]:
                    wake.setdefault(w[0], []).append(w[1])
                else:
                    keep.append(w)
            self._waiters = keep
        for loop, futs in wake.items():  # one hand-over per event loop, not one per waiter
            with contextlib.suppress(RuntimeError):  # that event loop is closed
                loop.call_soon_threadsafe(_resolve, futs)

    def _commit(self, calls: list[Call]) -> None:
        if not calls:
            return
        c = self.conn
        try:
            c.execute("BEGIN IMMEDIATE")
            for sql, params, many in calls:
                if many:
                    c.executemany(sql, params)
                else:
                    c.execute(sql, params)
            c.execute("COMMIT")
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as e:
            self.error = store_error(self.path, e, "writing to it")
            with contextlib.suppress(sqlite3.Error):
                c.execute("ROLLBACK")


def _signal(batches: list[Batch]) -> None:
    """Wake the batches' flush waiters and run their commit callbacks: those asked on an event loop are called
    there, together — one hand-over (one round trip of the GIL to a busy loop) per loop and batch."""
    on_loops: dict[asyncio.AbstractEventLoop, list[Callable[[], None]]] = {}
    for _, signals, _ in batches:
        for op in signals:
            if op[0] == FLUSH:
                op[1].set()
            elif op[0] == CALL:
                if len(op) > 2 and op[2] is not None:
                    on_loops.setdefault(op[2], []).append(op[1])
                    continue
                with contextlib.suppress(RuntimeError):  # the event loop that asked is closed
                    op[1]()
    for loop, callbacks in on_loops.items():
        with contextlib.suppress(RuntimeError):  # that event loop is closed
            loop.call_soon_threadsafe(_call_all, callbacks)


def _call_all(callbacks: list[Callable[[], None]]) -> None:
    """On the event loop: each callback in turn; one that fails is reported and does not stop the others."""
    for cb in callbacks:
        try:
            cb()
        except RuntimeError:  # (an event loop it hands over to is closed)
            pass
        except Exception as e:
            asyncio.get_running_loop().call_exception_handler(
                {"message": "a store commit callback failed", "exception": e})


def _resolve(futs: list[asyncio.Future[None]]) -> None:
    for fut in futs:
        if not fut.done():
            fut.set_result(None)

