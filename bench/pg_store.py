"""The PostgreSQL run store against the SQLite one: the delegation cycle and a fan-out, same workloads as ``ours.py``.

    python bench/pg_store.py [--reps 3] fanout 1000       # one parent turn, 1,000 background children
    python bench/pg_store.py [--reps 3] seq [--iters 500] # delegation cycle + bare run, µs
    python bench/pg_store.py --url postgresql://user@host/db ...   # an existing database (runs accumulate)

Without ``--url`` it starts a throwaway PostgreSQL 15 server the way the tests do (``tests/pg.py``:
``initdb`` + ``pg_ctl``, unix socket, ``fsync=off`` — so the figures show the store's own cost, not the
disk's; the SQLite store runs with its default ``synchronous=NORMAL``).  Each repetition gets a fresh
database and a fresh file.  Prints one JSON line per store and repetition, then the medians.  ``cpu_ms``
is this process's CPU; the server's is not in it (on a machine with few cores the server competes with
the runtime for them, which shows in ``wall_ms``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import ours  # noqa: E402  (the workloads; they assert their own results)


def _one(cmd: str, store: str, url_for: Any, a: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as d:
        url = f"sqlite:///{d}/state.db" if store == "sqlite" else url_for()
        if cmd == "fanout":
            r = asyncio.run(ours.fanout(d, url, a.n))
            return {"store": store, "n": a.n, "wall_ms": round(r["wall_ms"], 1),
                    "per_child_us": round(r["per_child_us"]), "cpu_ms": round(r["cpu_ms"], 1)}
        r = asyncio.run(ours.seq(d, url, a.iters, a.iters // 10))
        return {"store": store, "cycle_median_us": round(r["cycle"]["median_us"]),
                "bare_median_us": round(r["bare"]["median_us"])}


def _new_url(server: Any, url: str | None, made: list[str]) -> str:
    made.append(server.new_database() if server is not None else url)
    return made[-1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=None, help="an existing PostgreSQL database (default: a throwaway server)")
    ap.add_argument("--reps", type=int, default=3)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fanout")
    f.add_argument("n", type=int)
    s = sub.add_parser("seq")
    s.add_argument("--iters", type=int, default=500)
    a = ap.parse_args()

    server = None
    if a.url is None:
        import pg

        server = pg.server()
    try:
        rows: list[dict[str, Any]] = []
        for _ in range(a.reps):
            for store in ("sqlite", "postgres"):
                made: list[str] = []
                try:
                    rows.append(_one(a.cmd, store, functools.partial(_new_url, server, a.url, made), a))
                finally:
                    if server is not None:
                        for u in made:
                            server.drop_database(u)
                print(json.dumps(rows[-1]), flush=True)
        keys = [k for k in rows[0] if k not in ("store", "n")]
        for store in ("sqlite", "postgres"):
            mine = [r for r in rows if r["store"] == store]
            print(json.dumps({"store": store, "median_of": len(mine),
                              **{k: statistics.median(r[k] for r in mine) for k in keys}}))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
