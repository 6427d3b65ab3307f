"""What the SQLite store's writer process spends per delegation cycle / per child, measured alone.

    python bench/store_writer.py [--workload cycle|fanout] [--n 2000] [--reps 5]

1. **Record.**  Runs the workload in this process (instant ``FunctionModel``, SQLite store; the scripted models
   of ``bench/ours.py``): ``cycle`` — ``--n`` delegation cycles, a parent that spawns one foreground child
   (``ours.py seq``); ``fanout`` — one parent turn that spawns ``--n`` background children and waits for them
   (``ours.py fanout N``).  Every frame the runtime hands to the writer process is kept, byte for byte as
   the writer reads it (``ProcWriter._send_locked`` is wrapped here, in the bench only), with the writer's
   connection settings; the writer's own count of transactions (``live_commits``) is read before close.
2. **Replay**, offline, on a fresh store file, on one thread with no event loop: ``marshal.loads`` of the
   frames, :func:`prepare` of :mod:`subagents.store._fold` (loaded as the writer loads it, by
   ``runpy.run_path``) with the writer's ``tails``, then each statement executed and the batch committed —
   one ``BEGIN IMMEDIATE`` … ``COMMIT`` per batch frame (the live writer commits everything readable at once:
   ``live_commits`` <= ``batches``, so the commits here are an upper bound).  Not replayed: the lease
   renewal (one small statement every ``renew_s``) and the checkpoints (the writer's checkpointer thread).
3. **Floor**, in the same run, interleaved with the replays: the same number of run rows (the rows the replay
   left in ``runs``) inserted with one ``executemany`` into a bare table without indexes, in one transaction
   — what SQLite alone costs for the rows.

CPU time of the thread (``time.thread_time``: robust to a busy machine), median of ``--reps``.  Prints ONE
JSON line: µs of writer CPU per cycle (per child for ``fanout``), split into ``loads``, ``prepare``, each
statement kind (``insert runs``, ``update runs``, ``insert transcript``, ...), ``begin`` and ``commit``;
``total``, the floor and ``x_floor`` (total / floor).  ``tests/bench/test_store_writer_bench.py`` runs it
with tiny sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import marshal
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PARENT_TEXT
from ours import Script, make_runtime

from subagents.models import FunctionModel
from subagents.store import _proc
from subagents.store._wire import frame
from subagents.store._writer_main import BATCH, HEADER, LEASE, _load_fold
from subagents.store.sqlite import SQLiteStore

WORKLOADS = ("cycle", "fanout")


@dataclass
class Recording:
    """What the runtime handed to the writer process during one workload."""

    workload: str
    n: int  # delegation cycles, or children
    pragmas: list[str] = field(default_factory=list)  # the writer connection's settings
    frames: list[bytes] = field(default_factory=list)  # marshal payloads, in the order written
    live_commits: int = 0  # transactions the live writer committed for them (group commit)

    def count(self, code: int) -> int:
        return sum(1 for f in self.frames if marshal.loads(f)[0] == code)

    @property
    def batches(self) -> int:
        """The batch frames (the others: the lease, ``STATS``)."""
        return self.count(BATCH)


@contextmanager
def _recording(rec: Recording) -> Iterator[list[_proc.ProcWriter]]:
    """Keep every frame a :class:`ProcWriter` sends (what its writer process reads), while inside."""
    orig = _proc.ProcWriter._send_locked
    writers: list[_proc.ProcWriter] = []

    def send(self: _proc.ProcWriter, msg: tuple[Any, ...]) -> None:
        if self not in writers:
            writers.append(self)
            rec.pragmas = marshal.loads(bytes.fromhex(self._cfg))["pragmas"]
        data = frame(msg)
        (n,) = HEADER.unpack_from(data)
        assert len(data) == 4 + n
        rec.frames.append(data[4:])
        orig(self, msg)

    _proc.ProcWriter._send_locked = send  # type: ignore[method-assign]
    try:
        yield writers
    finally:
        _proc.ProcWriter._send_locked = orig  # type: ignore[method-assign]


async def record(workload: str, n: int, workdir: str) -> Recording:
    """Run ``workload`` of size ``n`` on a fresh SQLite store in ``workdir``, recording the writer's frames."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; use one of {', '.join(WORKLOADS)}")
    rec = Recording(workload, n)
    script = Script()
    with _recording(rec) as writers:
        async with make_runtime(FunctionModel(script, inline=True), workdir, f"sqlite:///{workdir}/record.db",
                                max_threads=n + 16) as rt:
            if workload == "cycle":
                for _ in range(n):
                    assert (await rt.run("do the thing")).text == PARENT_TEXT
            else:
                script.n = n
                r = await rt.run("fanout")
                assert r.text == PARENT_TEXT, (r.outcome, r.error, r.text)
            assert script.calls["child"] == n, script.calls
            rt.store.flush()  # every batch committed: the writer's count of transactions is final
            for w in writers:  # (a STATS frame: recorded, not replayed)
                rec.live_commits += int(w.stats()["commits"])
    return rec


_STMT = re.compile(r"\b(INSERT(?: OR \w+)? INTO|UPDATE|DELETE FROM)\s+(\w+)", re.IGNORECASE)


def kind(sql: str) -> str:
    """``"insert runs"``, ``"update announcements"``, ... : the first write of a statement and its table."""
    m = _STMT.search(sql)
    if m is None:
        return sql.split(None, 1)[0].lower()
    return f"{m.group(1).split()[0].lower()} {m.group(2)}"


def _connect(path: Path, pragmas: Sequence[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for p in pragmas:
        conn.execute(p)
    return conn


def replay(rec: Recording, path: Path) -> tuple[dict[str, float], list[tuple[Any, ...]]]:
    """Seconds of this thread's CPU by part, writing ``rec``'s batches to a fresh store at ``path``; and the
    run rows it left (for the floor)."""
    SQLiteStore(path).close()  # the schema
    conn = _connect(path, rec.pragmas)
    prepare = _load_fold()["prepare"]
    tails: dict[str, int] = {}
    spent: dict[str, float] = {}
    clock = time.thread_time

    def add(part: str, dt: float) -> None:
        spent[part] = spent.get(part, 0.0) + dt

    t0 = clock()
    msgs = [marshal.loads(f) for f in rec.frames]
    add("loads", clock() - t0)
    for msg in msgs:
        if msg[0] != BATCH:
            continue
        t0 = clock()
        calls = prepare(msg[1], tails)
        t1 = clock()
        add("prepare", t1 - t0)
        if not calls:
            continue
        conn.execute("BEGIN IMMEDIATE")
        t0 = clock()
        add("begin", t0 - t1)
        for sql, params, many in calls:
            if many:
                conn.executemany(sql, params)
            else:
                conn.execute(sql, params)
            t1 = clock()
            add(kind(sql), t1 - t0)
            t0 = t1
        conn.execute("COMMIT")
        add("commit", clock() - t0)
    rows = conn.execute("SELECT * FROM runs").fetchall()
    conn.close()
    return spent, rows


def floor(rows: list[tuple[Any, ...]], path: Path, pragmas: Sequence[str]) -> float:
    """Seconds of this thread's CPU to insert ``rows`` with one ``executemany`` into a table without indexes."""
    conn = _connect(path, pragmas)
    ncols = len(rows[0]) if rows else 1
    conn.execute(f"CREATE TABLE bare ({', '.join(f'c{i}' for i in range(ncols))})")
    sql = f"INSERT INTO bare VALUES ({', '.join('?' * ncols)})"
    t0 = time.thread_time()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(sql, rows)
    conn.execute("COMMIT")
    dt = time.thread_time() - t0
    assert conn.execute("SELECT count(*) FROM bare").fetchone()[0] == len(rows)
    conn.close()
    return dt


def measure(rec: Recording, workdir: Path, reps: int) -> dict[str, Any]:
    """Replay ``rec`` and measure the floor ``reps`` times, interleaved; the JSON summary (µs per unit)."""
    spent: list[dict[str, float]] = []
    floors: list[float] = []
    nrows = 0
    for r in range(reps):
        s, rows = replay(rec, workdir / f"replay-{r}.db")
        spent.append(s)
        nrows = len(rows)
        floors.append(floor(rows, workdir / f"floor-{r}.db", rec.pragmas))
    per = 1e6 / rec.n
    parts = sorted({k for s in spent for k in s}, key=lambda k: -statistics.median(s.get(k, 0.0) for s in spent))
    total = statistics.median(sum(s.values()) for s in spent)
    fl = statistics.median(floors)
    return {
        "bench": "store_writer", "workload": rec.workload, "n": rec.n,
        "per": "cycle" if rec.workload == "cycle" else "child", "reps": reps,
        "frames": len(rec.frames), "batches": rec.batches, "lease_frames": rec.count(LEASE),
        "live_commits": rec.live_commits, "run_rows": nrows,
        "us": {k: round(statistics.median(s.get(k, 0.0) for s in spent) * per, 2) for k in parts},
        "total_us": round(total * per, 1), "floor_us": round(fl * per, 2),
        "x_floor": round(total / fl, 1) if fl > 0 else None,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    ap.add_argument("--workload", choices=WORKLOADS, default="cycle")
    ap.add_argument("--n", type=int, default=2000, help="delegation cycles, or children of the fan-out")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        rec = asyncio.run(record(a.workload, a.n, d))
        out = measure(rec, Path(d), a.reps)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
