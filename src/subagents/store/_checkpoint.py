"""The SQLite store's checkpointer: copies the write-ahead log back into the database, off the writer thread.

SQLite's default (``wal_autocheckpoint=1000``) makes the connection whose ``COMMIT`` pushes the WAL
past 1,000 pages run the checkpoint itself, inside that ``COMMIT``: it copies the WAL into the
database and fsyncs the file.  Measured on the delegation cycle that was half of the writer thread's
time, and the event loop waited for it through back-pressure.  So the writer connection runs with
``wal_autocheckpoint=0`` and this thread, on its own connection, runs
``PRAGMA wal_checkpoint(PASSIVE)`` every ``interval_s``, and as soon as the WAL file grows past
``max_wal_pages`` frames (a passive checkpoint never blocks the writer or readers; it copies what no
reader still needs).

The WAL stays bounded: SQLite starts writing the WAL from its beginning again as soon as a
checkpoint has copied all of it (and :data:`JOURNAL_SIZE_LIMIT` truncates the file then).  Under
writes so continuous that passive checkpoints never catch up (each sees new frames appended behind
it), the WAL passing ``max_wal_pages`` makes this thread run passive checkpoints one after the other, each
copying what was written while the one before ran, until one copies little (measured on the delegation
cycle: the writer's ``RESTART`` then stops it ~30 ms instead of ~55 ms), and then sets
:attr:`Checkpointer.restart_due`: the writer thread runs a ``RESTART`` checkpoint itself right after its
next commit — between its own transactions, so it never waits for itself (a ``RESTART`` from this
thread would compete for the write lock with a busy writer and could starve) — copying the little the
passive ones left, so the next transaction starts the WAL over.  The store runs a ``TRUNCATE``
checkpoint when it closes.

Durability does not depend on checkpoints: a committed transaction is in the WAL, and SQLite replays
the WAL when a crashed store is opened again.
"""

from __future__ import annotations

import _thread
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
else:  # the C module: the ``sqlite3`` package adds datetime adapters the writer never uses (~4 ms of its start)
    import _sqlite3 as sqlite3

__all__ = ["JOURNAL_SIZE_LIMIT", "MAX_WAL_PAGES", "Checkpointer"]

MAX_WAL_PAGES = 4_096
"""WAL frames (pages, 4 KiB by default) past which the writer restarts the WAL (``RESTART``): ~16 MiB."""

JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024
"""Bytes the WAL file is truncated to when SQLite starts it over (``PRAGMA journal_size_limit``)."""


CATCH_UP_ROUNDS = 8
"""Passive checkpoints at most, one after the other, before the writer is asked for a ``RESTART``."""

CATCH_UP_LEFT = 256
"""A catch-up checkpoint that copied no more WAL frames than this ends the catch-up: the writer's ``RESTART`` copies
about as few."""


WATCH_S = 0.05
"""How often the thread looks at the WAL file's size between checkpoints (one ``stat``)."""


class Checkpointer:
    """A daemon thread with its own connection that checkpoints the WAL every ``interval_s``, and at once when
    the WAL file grows past ``max_wal_pages`` frames (its size is looked at every :data:`WATCH_S`): under
    continuous writes the WAL then stays near its bound instead of growing for a whole interval (~10,000
    frames a second on the delegation cycle), and the writer's ``RESTART`` never has a big file to truncate.

    Failures are ignored here (a checkpoint that cannot run now runs later; a store whose file fails
    reports it through its writer).  :meth:`kick` asks for a checkpoint now; :meth:`stop` ends the thread.
    """

    def __init__(self, path: str | os.PathLike[str], *, interval_s: float = 1.0, max_wal_pages: int = MAX_WAL_PAGES,
                 timeout: float = 5.0) -> None:
        self.path = path
        self.interval_s = interval_s
        self.max_wal_pages = max_wal_pages
        self.checkpoints = 0        # checkpoints run (tests and benchmarks read it)
        self.wal_pages = 0          # WAL frames the last checkpoint saw
        self.restart_due = False    # the WAL passed max_wal_pages: the writer restarts it after its next commit
        self._timeout = timeout
        self._wal = f"{path}-wal"
        self._grown = 0  # the WAL file's size at the last checkpoint: it grows past it only when more is written
        self._wake = _Wake()
        self._stopping = False
        self._running = _thread.allocate_lock()  # held while the thread runs (what a join waits for)
        self._running.acquire()
        _thread.start_new_thread(self._run, ())

    @property
    def alive(self) -> bool:
        """Whether its thread still runs."""
        return self._running.locked()

    def kick(self) -> None:
        """Checkpoint now rather than at the next interval."""
        self._wake.set()

    def stop(self) -> None:
        """End the thread (after the checkpoint it may be running)."""
        self._stopping = True
        self._wake.set()
        with self._running:  # (released as the thread ends)
            pass

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self._running.release()

    def _loop(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return
        try:
            frame = conn.execute("PRAGMA page_size").fetchone()[0] + 24
            bound = self.max_wal_pages * frame + 32  # bytes: the WAL header and max_wal_pages frames
            last = time.monotonic()
            while True:
                kicked = self._wake.wait(min(WATCH_S, self.interval_s))
                if self._stopping:
                    return
                if (not kicked and time.monotonic() - last < self.interval_s
                        and (self.restart_due or not self._over(bound))):  # (the writer has yet to restart it)
                    continue
                last = time.monotonic()
                try:
                    self._checkpoint(conn)
                except sqlite3.Error:
                    pass
                try:  # a WAL that starts over is truncated to JOURNAL_SIZE_LIMIT
                    size = os.stat(self._wal).st_size
                except OSError:
                    continue
                self._grown = min(size, JOURNAL_SIZE_LIMIT) if self.restart_due else size
        except sqlite3.Error:
            return
        finally:
            conn.close()

    def _over(self, bound: int) -> bool:
        """Whether the WAL file grew past ``bound`` bytes since the last checkpoint (a file that started over
        keeps its size until written past it)."""
        try:
            size = os.stat(self._wal).st_size
        except OSError:
            return False
        return size > bound and size > self._grown

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """A passive checkpoint; past ``max_wal_pages``, more until one copies little, then ask the writer for the
        ``RESTART`` (which then copies only the frames of its last few commits: a short stop of its thread
        instead of one as long as copying all that was written while the first checkpoint ran).
        :attr:`checkpoints` counts the whole pass, once :attr:`restart_due` is decided."""
        _, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        self.wal_pages = int(log)
        if log >= self.max_wal_pages:
            for _ in range(CATCH_UP_ROUNDS):  # each copies what was written while the one before ran
                before = done
                _, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                if done - before <= CATCH_UP_LEFT or self._stopping:  # (less: the WAL started over meanwhile)
                    break
            self.restart_due = True
        self.checkpoints += 1


class _Wake:
    """An event that resets as a waiter sees it (``threading.Event`` + ``clear``), on a :mod:`_thread` lock:
    ``threading`` cost the writer process ~2 ms to import.  Locked: not set; :meth:`set` unlocks it, a
    :meth:`wait` that gets it locks it again."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        if self._lock.locked():
            try:
                self._lock.release()
            except RuntimeError:  # another set() released it first
                pass

    def wait(self, timeout: float) -> bool:
        """Whether it was set (within ``timeout`` seconds); it is not set any more either way."""
        return self._lock.acquire(timeout=timeout)
