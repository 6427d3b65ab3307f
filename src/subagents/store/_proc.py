"""The calling side of the SQLite store's writer process (:mod:`._writer_main`): no thread in this process.

Batches of plain operations (:mod:`._batch`) go :mod:`marshal`-encoded to the writer's standard input; the
writer folds them into statements (:mod:`._fold`), commits and replies how many batches it committed.  The event
loop reads the replies itself (``loop.add_reader``: no second thread competes with it for the GIL; the writer's
CPU runs on another core) and writes large batches as the pipe drains (``add_writer``); a caller without a loop
reads and writes the pipe blocking (:meth:`ProcWriter.wait`).  The writer starts on the first write: a store
only read never starts one.  :attr:`ProcWriter.submitted` - :attr:`ProcWriter.committed` is the **backlog**,
what a SIGKILL of this process can lose at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import marshal
import os
import select
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ._batch import CALL, FLUSH
from ._support import running_loop, store_error
from ._wire import frame, writer_error
from ._writer import _call_all, _resolve  # (the thread writer's: the same hand-over on the loop)
from ._writer_main import BATCH, DONE, HEADER, KICK, LEASE, STATS, STOP_FRAME

__all__ = ["Batch", "ProcWriter"]

Batch = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]  # (plain operations, signals, operations counted)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # (Linux)
_SCRIPT = str(Path(__file__).with_name("_writer_main.py"))


class ProcWriter:
    """Feeds one writer process; see the module docstring.  Used from one thread at a time."""

    def __init__(self, path: Path, *, timeout: float, pragmas: tuple[str, ...], checkpoint_s: float,
                 max_wal_pages: int) -> None:
        self.path = path
        self._cfg = marshal.dumps({"path": str(path), "timeout": timeout, "pragmas": list(pragmas),  # (hex: argv)
                                   "checkpoint_s": checkpoint_s, "max_wal_pages": max_wal_pages}).hex()
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: StoreError | None = None
        self.submitted = 0  # operations accepted
        self.committed = 0  # operations committed or failed
        self.inflight = 0   # batches sent, not yet answered
        self.lease: tuple[str, float, float, str] | None = None  # (owner, lease_s, renew_s, process)
        self._batches: deque[tuple[int, list[tuple[Any, ...]]]] = deque()  # in flight: (operations, signals)
        self._rbuf = bytearray()
        self._lock = threading.RLock()  # one thread at a time sends, reads and answers (the store hands a thread's
        # writes to its event loop; this keeps a stray one from sending a frame twice or counting a reply twice)
        self._rfd = self._wfd = -1  # the pipe's ends (-1: none, or the writer is gone)
        self._out = bytearray()  # frames not yet written to the writer's input
        self._writer_loop: asyncio.AbstractEventLoop | None = None  # the loop writing them as the pipe drains
        self._reader: asyncio.AbstractEventLoop | None = None  # the loop reading replies
        self._on_idle: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None], int]] = []
        self._stats: dict[str, Any] | None = None
        self._in_reader = False
        self._closing = False

    @property
    def backlog(self) -> int:
        return self.submitted - self.committed

    # -- sending ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer process: at the first write, or sooner (:meth:`SQLiteStore.start_writer
        <subagents.store.sqlite.SQLiteStore.start_writer>`); once, and not for a store that failed or closes."""
        with self._lock:
            if self.proc is not None or self.error is not None or self._closing:
                return
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", _SCRIPT, self._cfg], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True, bufsize=0,
                                         process_group=0)  # a Ctrl-C in the terminal is the runtime's to handle
            assert self.proc.stdout is not None
            assert self.proc.stdin is not None
            self._rfd = self.proc.stdout.fileno()
            self._wfd = self.proc.stdin.fileno()
            os.set_blocking(self._rfd, False)
            os.set_blocking(self._wfd, False)
            with contextlib.suppress(OSError):  # a bigger pipe: fewer wake-ups to write a large batch
                fcntl.fcntl(self._wfd, _F_SETPIPE_SZ, 1 << 20)
            if self.lease is not None:
                self._send((LEASE, *self.lease))

    def _send(self, msg: tuple[Any, ...]) -> None:
        """Queue ``msg`` for the writer and write what the pipe takes now; the rest goes as it drains (the
        event loop's ``add_writer``, or a blocking wait): a large batch never blocks the loop on a full pipe."""
        with self._lock:
            self._send_locked(msg)

    def _send_locked(self, msg: tuple[Any, ...]) -> None:
        if self.proc is None:
            self.start()
        data = frame(msg)
        if self._wfd < 0:
            return  # the writer is gone: the store has failed already
        self._out += data
        self._write()
        if self._out:
            loop = running_loop()
            if loop is None:
                self.wait(lambda: not self._out)
            elif self._writer_loop is not loop:
                self._writer_loop = loop
                loop.add_writer(self._wfd, self._writable)

    def _write(self) -> None:
        try:
            while self._out:
                n = os.write(self._wfd, self._out)
                del self._out[:n]
        except BlockingIOError:
            pass
        except OSError:  # the writer is gone (its end of input closed)
            self._out.clear()
            self._died()

    def _writable(self) -> None:
        with self._lock:
            self._writable_locked()

    def _writable_locked(self) -> None:
        self._write()
        if not self._out:
            self._unwatch_writes()

    def _unwatch_writes(self) -> None:
        loop, self._writer_loop = self._writer_loop, None
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(Exception):
                loop.remove_writer(self._wfd)

    def hold_lease(self, owner: str, lease_s: float, renew_s: float, process: str) -> None:
        """Write the lease with the next transaction, then renew it every ``renew_s`` (in the writer process)."""
        self.lease = (owner, lease_s, renew_s, process)
        self._send((LEASE, *self.lease))

    def drop_lease(self) -> None:
        """Stop renewing the lease (its row is deleted by a write of its own)."""
        if self.lease is not None:
            self.lease = None
            if self.proc is not None:
                self._send((LEASE, None))

    def submit(self, batch: Batch) -> None:
        """Send a batch to the writer (it folds and commits it)."""
        ops, signals, n = batch
        with self._lock:
            self.inflight += 1
            self._batches.append((n, signals))
            if self.error is not None:  # (nothing more is written; the batch is answered at once)
                self._answer_locked(1)
                return
            try:
                self._send_locked((BATCH, ops))
            except ValueError as e:  # a value no column can hold (as sqlite3 would refuse to bind it)
                self.error = store_error(self.path, e, "writing to it")
                self._answer_locked(1)
                return
        self._listen()

    def defer_until_idle(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> bool:
        """Have ``callback`` called on ``loop`` once no batch is in flight; ``False`` when none is (group commit)."""
        if self.inflight == 0:
            return False
        self._on_idle = (loop, callback)
        self._listen()
        return True

    # -- receiving -------------------------------------------------------------------------------------
    def _listen(self) -> None:
        """Have the running event loop read the replies (once per loop)."""
        loop = running_loop()
        if loop is None or loop is self._reader or self.proc is None:
            return
        old, self._reader = self._reader, loop
        if old is not None and not old.is_closed():
            with contextlib.suppress(Exception):
                old.remove_reader(self._rfd)
        loop.add_reader(self._rfd, self._readable)

    def _readable(self) -> None:
        self._in_reader = True
        try:
            self._read()
        finally:
            self._in_reader = False

    def _read(self) -> None:
        """Read what the writer replied and act on it; end of output means the writer died."""
        with self._lock:
            self._read_locked()

    def _read_locked(self) -> None:
        if self._rfd < 0:
            return
        while True:
            try:
                data = os.read(self._rfd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                self._died()
                return
            self._rbuf += data
        buf, at = self._rbuf, 0
        done = 0
        while len(buf) - at >= 4:
            (n,) = HEADER.unpack_from(buf, at)
            if len(buf) - at - 4 < n:
                break
            msg = marshal.loads(bytes(buf[at + 4:at + 4 + n]))
            at += 4 + n
            if msg[0] == DONE:
                done += msg[1]
                if msg[2] is not None and self.error is None:
                    self.error = writer_error(self.path, msg[2])
            elif msg[0] == STATS:
                self._stats = msg[1]
        del buf[:at]
        if done:
            self._answer(done)

    def _answer(self, nbatches: int) -> None:
        """``nbatches`` batches are committed (or failed): count them, run their signals, wake waiters."""
        with self._lock:
            self._answer_locked(nbatches)

    def _answer_locked(self, nbatches: int) -> None:
        on_loops: dict[asyncio.AbstractEventLoop, list[Callable[[], None]]] = {}
        here = running_loop() if self._in_reader else None
        if nbatches > len(self._batches):  # (never: a frame sent twice, or a reply read twice)
            nbatches = self._overcounted()
        for _ in range(nbatches):
            n, signals = self._batches.popleft()
            self.committed += n
            self.inflight -= 1
            for op in signals:
                if op[0] == FLUSH:
                    op[1].set()
                elif op[0] == CALL:
                    loop = op[2] if len(op) > 2 else None
                    if loop is None:
                        with contextlib.suppress(RuntimeError):
                            op[1]()
                    else:
                        on_loops.setdefault(loop, []).append(op[1])
        running = here or running_loop()
        for loop, callbacks in on_loops.items():  # together, on the loop that asked
            if loop is here:
                _call_all(callbacks)
            elif loop is running:  # (a reply read by a synchronous call made on the loop: not re-entrant)
                loop.call_soon(_call_all, callbacks)
            else:
                with contextlib.suppress(RuntimeError):  # that event loop is closed
                    loop.call_soon_threadsafe(_call_all, callbacks)
        self._wake(here)
        if self.inflight == 0 and self._on_idle is not None:
            loop, cb = self._on_idle
            self._on_idle = None
            if loop is here:
                cb()
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(cb)

    def _overcounted(self) -> int:
        """The writer answered more batches than were sent: fail the store (answering the ones there are)."""
        if self.error is None:
            self.error = StoreError(f"the run store {self.path}: its writer process answered more batches than were "
                                    "sent (a bug in subagents: please report it); close this Runtime and open a new "
                                    "one (what was committed is intact)")
        return len(self._batches)

    def _wake(self, here: asyncio.AbstractEventLoop | None) -> None:
        if not self._waiters:
            return
        every = self.error is not None or self.proc is None
        keep = []
        wake: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for w in self._waiters:
            if every or self.backlog < w[2]:
                wake.setdefault(w[0], []).append(w[1])
            else:
                keep.append(w)
        self._waiters = keep
        for loop, futs in wake.items():
            if loop is here:
                _resolve(futs)
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_resolve, futs)

    def _died(self) -> None:
        """The writer exited while batches may be in flight: fail the store for good, answer every batch."""
        proc = self.proc
        if proc is None or self._rfd < 0:
            return
        if self._reader is not None and not self._reader.is_closed():
            with contextlib.suppress(Exception):
                self._reader.remove_reader(self._rfd)
        self._reader = None
        self._unwatch_writes()
        self._rfd = self._wfd = -1
        self._out.clear()
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        err = b""
        with contextlib.suppress(OSError, ValueError):
            assert proc.stderr is not None
            err = proc.stderr.read() or b""
        how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        detail = err.decode("utf-8", "replace").strip().splitlines()[-1:] if err else []
        if self.error is None and not (self._closing and code == 0):
            self.error = StoreError(
                f"the run store {self.path}: its writer process ({proc.pid}) stopped ({how}"
                + (f": {detail[0]}" if detail else "") + "); writes not yet committed are lost. Close this "
                "Runtime and open a new one to go on with the store (what was committed is intact)")
        self._answer(len(self._batches))

    def poll(self) -> int:
        """Read the replies already there without waiting (a long step of the event loop: a burst of spawns,
        whose loop cannot run the reader); returns the batches still in flight."""
        if self.inflight and self._rfd >= 0:
            self._read()
        return self.inflight

    # -- blocking (no event loop, or a synchronous call) ----------------------------------------------
    def wait(self, done: Callable[[], bool]) -> None:
        """Read replies until ``done()`` (or the writer failed or stopped)."""
        while not done() and self.error is None and self._rfd >= 0:
            r, w, _ = select.select([self._rfd], [self._wfd] if self._out else [], [], 0.5)
            if w:
                with self._lock:
                    self._write()
            if r:
                self._read()

    def wait_room(self, limit: int) -> None:
        """Block until the backlog is under ``limit`` (or the writer failed or stopped)."""
        self.wait(lambda: self.backlog < limit)

    async def room(self, limit: int) -> None:
        """Wait, without blocking the event loop, until the backlog is under ``limit``."""
        if self.backlog < limit or self.error is not None or self._rfd < 0:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append((loop, fut, limit))
        self._listen()
        await fut

    def stats(self, kick: bool = False) -> dict[str, Any]:
        """The writer's counters (checkpoints run, ...); ``kick``: ask for a checkpoint first.  For tests."""
        if kick:
            self._send((KICK,))
        self._stats = None
        self._send((STATS,))
        self.wait(lambda: self._stats is not None)
        return self._stats or {}

    def close(self) -> None:
        """End the writer's input; it commits what it read, checkpoints and exits; reap it."""
        proc = self.proc
        if proc is None:
            return
        assert proc.stdin is not None
        self._closing = True
        if self._wfd >= 0:
            with self._lock:
                self._out += STOP_FRAME
            self.wait(lambda: not self._out)
        self._unwatch_writes()
        with contextlib.suppress(OSError):
            proc.stdin.close()
        self.wait(lambda: False)  # until end of output: every reply read
        proc.wait()
        for f in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()

