"""The SQLite store's writer **process**: a small script, run as ``python -I -S _writer_main.py CONFIG``.

It imports the standard library only (never the ``subagents`` package: that costs ~275 ms; this starts in ~20
ms) and runs :mod:`._fold` from its file (which loads :mod:`._schema` and :mod:`._checkpoint` by their file
paths).  The calling side is :class:`~subagents.store._proc.ProcWriter`.

Protocol (both ways: frames of a 4-byte little-endian length and a :mod:`marshal` payload):

- parent -> writer, on standard input: ``(BATCH, ops)`` — the plain operations of one batch (:mod:`._fold`),
  folded into statements here and committed in call order; ``(LEASE, owner, lease_s, renew_s, process)`` —
  renew that lease with the next transaction and every ``renew_s`` after (``(LEASE, None)``: stop renewing);
  ``(STATS,)``; ``(KICK,)`` — checkpoint now.
- writer -> parent, on standard output: ``(DONE, n, error)`` — the next ``n`` batches are committed (or
  failed: ``error`` is ``(kind, message)`` of the first failure, after which nothing more is committed; kind
  ``PREPARE``: a batch that could not be made into statements — the batches before it are committed);
  ``(STATS, {...})``.

Everything readable on standard input is committed in **one** transaction (group commit).  End of input —
the store closed, or its process died, even by ``SIGKILL`` — makes the writer commit every complete batch it
has read, run a ``TRUNCATE`` checkpoint and exit; so does its parent changing (the pipe inherited by a
forked child would otherwise keep it open).  ``SIGINT``, ``SIGTERM`` and ``SIGHUP`` are ignored: the parent
decides when the store closes (a Ctrl-C in a terminal reaches the whole process group).
"""

from __future__ import annotations

import importlib.machinery
import marshal
import os
import select
import struct
import sys
import time
from types import ModuleType

# not json, pathlib, typing (~30 ms of the writer's ~80 ms start), nor contextlib, signal (its enums) and the
# sqlite3 package's datetime adapters, threading (~15 ms of the ~50 left): the C modules under them do the work
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    import sqlite3
    from typing import Any
else:
    import _signal
    import _sqlite3 as sqlite3

BATCH, LEASE, STATS, KICK, DONE, STOP = range(6)
PREPARE = "prepare"  # the kind of an error met folding a batch (a value JSON cannot encode)
HEADER = struct.Struct("<I")
STOP_FRAME = HEADER.pack(len(marshal.dumps((STOP,)))) + marshal.dumps((STOP,))
"""The parent's last frame when it closes the store (end of input without it: the parent died)."""
RENEW = "INSERT OR REPLACE INTO owners (owner, heartbeat, expires, process) VALUES (?, ?, ?, ?)"
WRITER_NICE = 10
"""How much lower the writer's priority is than its parent's (a nice increment; measured on the delegation
cycle: 5 -> p90 ~700 us, 10 -> ~570 us, none -> 2.3-2.7 ms, on a busy 2-CPU box)."""
_PARENT_CHECK_S = 1.0  # how often an idle writer checks that its parent is still the same process


def _load_fold() -> dict[str, Any]:
    """:mod:`._fold`'s names, loaded from its file as an import would (its bytecode cached in ``__pycache__``:
    compiling it at every start took ~10 ms of the writer's ~90 ms to get ready); it loads its own
    standard-library-only siblings the same way."""
    name, path = "_subagents_fold", os.path.join(os.path.dirname(__file__), "_fold.py")
    mod = sys.modules[name] = ModuleType(name)
    mod.__file__ = path
    importlib.machinery.SourceFileLoader(name, path).exec_module(mod)
    return vars(mod)


def _error(e: BaseException) -> tuple[str, str]:
    return ("os" if isinstance(e, OSError) else type(e).__name__, str(e))


class WriterProcess:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.path = cfg["path"]
        self.parent = os.getppid()
        self.conn = sqlite3.connect(self.path, timeout=cfg["timeout"], isolation_level=None)
        for pragma in cfg["pragmas"]:
            self.conn.execute(pragma)
        fold = _load_fold()
        self.prepare = fold["prepare"]
        self.tails: dict[str, int] = {}  # run id -> next transcript seq written by the batches prepared so far
        self.ckpt = fold["sibling"]("_checkpoint").Checkpointer(self.path, interval_s=cfg["checkpoint_s"],
                                                    max_wal_pages=cfg["max_wal_pages"], timeout=cfg["timeout"])
        self.error: tuple[str, str] | None = None
        self.lease: tuple[str, float, float, str] | None = None  # owner, lease_s, renew_s, process
        self.next_renewal = 0.0
        self.inbuf = bytearray()
        self.out = bytearray()
        self.out_ok = True  # False once the parent stopped reading (it died)
        self.eof = False
        self.commits = 0  # transactions committed (tests read it through STATS)
        self.stopping = False  # the parent sent STOP: commit everything, then exit
        self.orphaned = False  # the parent died: commit nothing more, exit

    # -- input ----------------------------------------------------------------------------------------
    def read_input(self) -> None:
        while True:
            try:
                data = os.read(0, 1 << 20)
            except BlockingIOError:
                return
            if not data:
                self.eof = True
                return
            self.inbuf += data

    def frames(self) -> list[Any]:
        out, buf, at = [], self.inbuf, 0
        while len(buf) - at >= 4:
            (n,) = HEADER.unpack_from(buf, at)
            if len(buf) - at - 4 < n:
                break
            out.append(marshal.loads(bytes(buf[at + 4:at + 4 + n])))
            at += 4 + n
        del buf[:at]
        return out

    def has_frame(self) -> bool:
        buf = self.inbuf
        return len(buf) >= 4 and len(buf) - 4 >= HEADER.unpack_from(buf, 0)[0]

    # -- output ---------------------------------------------------------------------------------------
    def reply(self, msg: Any) -> None:
        if self.out_ok:
            data = marshal.dumps(msg)
            self.out += HEADER.pack(len(data)) + data

    def write_output(self) -> None:
        while self.out and self.out_ok:
            try:
                n = os.write(1, self.out)
            except BlockingIOError:
                return
            except OSError:  # the parent is gone: nobody reads replies any more
                self.out_ok = False
                self.out.clear()
                return
            del self.out[:n]

    # -- work -----------------------------------------------------------------------------------------
    def handle(self, frames: list[Any]) -> None:
        calls, failed = self.statements([f[1] for f in frames if f[0] == BATCH])
        nbatches = sum(1 for f in frames if f[0] == BATCH)
        for f in frames:
            code = f[0]
            if code == LEASE:
                self.lease = None if f[1] is None else f[1:]
                self.next_renewal = 0.0
            elif code == STATS:
                self.reply((STATS, {"checkpoints": self.ckpt.checkpoints, "restart_due": self.ckpt.restart_due,
                                    "wal_pages": self.ckpt.wal_pages, "pid": os.getpid(), "commits": self.commits,
                                    "autocheckpoint": self.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0],
                                    "temp_store": self.conn.execute("PRAGMA temp_store").fetchone()[0],
                                    "checkpointer_alive": self.ckpt.alive}))
            elif code == KICK:
                self.ckpt.kick()
            elif code == STOP:
                self.stopping = True
        renew = self.renewal()
        if renew is not None:
            calls.insert(0, renew)
        if self.error is None:
            self.commit(calls)
            if self.error is None and failed is not None:
                self.error = failed
        if nbatches:
            self.reply((DONE, nbatches, self.error))
        if self.ckpt.restart_due:  # the WAL grew past its bound: start it over, between our own transactions
            self.ckpt.restart_due = False
            try:
                self.conn.execute("PRAGMA wal_checkpoint(RESTART)")
            except sqlite3.Error:
                pass

    def statements(self, batches: list[Any]) -> tuple[list[Any], tuple[str, str] | None]:
        """The statements of ``batches`` in order, and the error of a batch that could not be prepared (a value
        JSON cannot encode): that batch and the later ones are not written, the earlier ones are."""
        calls: list[Any] = []
        if self.error is None:
            for ops in batches:
                try:
                    calls.extend(self.prepare(ops, self.tails))
                except (ValueError, TypeError, OverflowError, KeyError, IndexError) as e:
                    return calls, (PREPARE, f"{type(e).__name__}: {e}")
        return calls, None

    def renewal(self) -> tuple[str, Any, bool] | None:
        lease, now = self.lease, time.monotonic()
        if lease is None or now < self.next_renewal:
            return None
        self.next_renewal = now + lease[2]
        at = time.time()
        return RENEW, (lease[0], at, at + lease[1], lease[3]), False

    def commit(self, calls: list[tuple[str, Any, bool]], *, scrubbed: bool = False) -> None:
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
            if not self.parent_alive():  # never write after the parent is gone: a new owner may be adopting
                c.execute("ROLLBACK")    # its runs already (the batches it sent are lost, as a SIGKILL loses)
                self.orphaned = True
                return
            c.execute("COMMIT")
            self.commits += 1
        except UnicodeEncodeError as e:  # a lone surrogate (a tool's "surrogateescape" text): SQLite takes UTF-8 only
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if scrubbed:
                self.error = _error(e)
            else:  # the batch again, each lone surrogate as U+FFFD: the runs are kept, not the store stopped
                self.commit([(sql, scrub(params), many) for sql, params, many in calls], scrubbed=True)
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as e:
            self.error = _error(e)
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def parent_alive(self) -> bool:
        """Whether the parent still runs (or closed the store: STOP).  Checked holding the write lock, just
        before ``COMMIT``: once the parent is dead its process is provably gone to a reader, which may adopt
        its runs at once — a commit after that would overwrite the adopter's."""
        if self.stopping:
            return True
        if os.getppid() != self.parent:
            return False
        self.read_input()
        return not self.eof or self.inbuf.endswith(STOP_FRAME)

    def run(self) -> None:
        os.set_blocking(0, False)
        os.set_blocking(1, False)
        while not self.eof and not self.orphaned:
            timeout = _PARENT_CHECK_S
            if self.lease is not None:
                timeout = min(timeout, max(0.0, self.next_renewal - time.monotonic()))
            if self.has_frame():  # read already (by parent_alive, during the last commit)
                timeout = 0.0
            r, _, _ = select.select([0], [1] if self.out else [], [], timeout)
            if r:
                self.read_input()
            self.handle(self.frames())
            self.write_output()
            if os.getppid() != self.parent:  # the parent died and the pipe lives on elsewhere
                self.orphaned = True
        if not self.orphaned:
            self.handle(self.frames())  # (a partial last frame was never promised)
            os.set_blocking(1, True)
            self.write_output()

    def close(self) -> None:
        self.ckpt.stop()
        if self.stopping:
            try:  # leave no WAL behind (the file alone is the store)
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
        self.conn.close()


def scrub(v: Any) -> Any:
    """``v`` (a statement's parameters) with each lone surrogate in its strings replaced by U+FFFD."""
    if type(v) is str:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return v
    if type(v) in (list, tuple):
        return type(v)(scrub(x) for x in v)
    return v


def yield_cpu() -> None:
    """Make this process (and the threads it starts after: they inherit both) give way to the runtime.

    The parent's pipe write wakes the writer on the parent's own CPU (a "sync" wake-up), where, as an equal,
    it would preempt the event loop for its ~1 ms commit.  ``SCHED_BATCH``: a wake-up never preempts;
    :data:`WRITER_NICE`: when the runtime wakes, it takes its CPU back at once (the writer waits or moves to
    another CPU).  Where the OS or a container forbids either, the writer runs as it is."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):  # (not Linux; a seccomp profile refusing it)
        pass
    try:
        os.nice(WRITER_NICE)
    except (AttributeError, OSError):
        pass


def main() -> None:
    yield_cpu()
    for sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(sig, _signal.SIG_IGN)
    cfg = marshal.loads(bytes.fromhex(sys.argv[1]))
    try:
        w = WriterProcess(cfg)
    except (sqlite3.Error, OSError) as e:
        sys.stderr.write(f"cannot open the store for writing: {e}\n")
        sys.exit(3)
    try:
        w.run()
    finally:
        w.close()


if __name__ == "__main__":
    main()
