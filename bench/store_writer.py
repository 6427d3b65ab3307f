"""What the SQLite store's writer thread spends per delegation cycle, measured alone (no event loop, no contention).

    python bench/store_writer.py [--cycles 2000] [--reps 3]

1. Runs ``--cycles`` delegation cycles (instant ``FunctionModel``, SQLite store) and records every batch the
   writer thread commits (its statement lists, exactly as executed).
2. Replays those batches on a fresh store file, on one thread, and times each statement kind and the
   ``COMMIT``s.  Variants, interleaved: ``as_is`` (the store's own connection settings);
   ``ckpt_on_writer`` (``wal_autocheckpoint=1000`` on the writer: SQLite's default, where the committing
   thread also copies the WAL back into the database every ~4 MB); ``v4_indexes`` (the schema 4
   indexes on ``runs.status`` and ``runs.owner`` instead of the schema 5 ones).

Prints one JSON line: µs of writer CPU time per cycle (``time.thread_time``: robust to a busy machine)
for each variant, split by statement kind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CHILD_TEXT, PARENT_TEXT

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store import _writer
from subagents.store._open import WRITER_PRAGMAS
from subagents.store.sqlite import SQLiteStore

Calls = list[tuple[str, Any, bool]]


def script(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse(CHILD_TEXT)
    if req.messages[-1].tool_results:
        return ModelResponse(PARENT_TEXT)
    return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "go"})])


async def capture(n: int, workdir: str) -> list[Calls]:
    batches: list[Calls] = []
    orig = _writer.Writer._commit

    def rec(self: _writer.Writer, calls: Calls) -> None:
        batches.append(list(calls))
        orig(self, calls)

    _writer.Writer._commit = rec  # type: ignore[method-assign]
    try:
        async with Runtime(FunctionModel(script, inline=True), workdir=workdir,
                           store=f"sqlite:///{workdir}/capture.db", builtin_tools=False) as rt:
            for _ in range(n):
                assert (await rt.run("hi")).text == PARENT_TEXT
    finally:
        _writer.Writer._commit = orig  # type: ignore[method-assign]
    return batches


def kind(sql: str) -> str:
    words = sql.split()
    table = next((w for w in words if w in ("runs", "transcript", "announcements", "owners", "prompts",
                                            "requests", "audit")), "?")
    return f"{words[0].lower()} {table}"


V4_INDEXES = ("DROP INDEX runs_open", "DROP INDEX runs_sweep", "CREATE INDEX runs_status ON runs(status)",
              "CREATE INDEX runs_owner ON runs(owner)")


def replay(batches: list[Calls], path: Path, autockpt: int | None, setup: tuple[str, ...] = ()) -> dict[str, float]:
    store = SQLiteStore(path)
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    for sql in setup:
        conn.execute(sql)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if autockpt is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint={autockpt}")
    else:  # the store's own writer settings
        for pragma in WRITER_PRAGMAS:
            conn.execute(pragma)
    spent: dict[str, float] = {}
    pc = time.thread_time  # CPU time of this thread: what the writer takes from the machine, not the noise
    for calls in batches:
        if not calls:
            continue
        conn.execute("BEGIN IMMEDIATE")
        for sql, params, many in calls:
            t0 = pc()
            if many:
                conn.executemany(sql, params)
            else:
                conn.execute(sql, params)
            k = kind(sql)
            spent[k] = spent.get(k, 0.0) + pc() - t0
        t0 = pc()
        conn.execute("COMMIT")
        spent["COMMIT"] = spent.get("COMMIT", 0.0) + pc() - t0
    conn.close()
    return spent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        batches = asyncio.run(capture(a.cycles, d))
        out: dict[str, Any] = {"bench": "store_writer", "cycles": a.cycles, "batches": len(batches)}
        variants: dict[str, tuple[list[Calls], int | None, tuple[str, ...]]] = {
            "as_is": (batches, None, ()), "ckpt_on_writer": (batches, 1000, ()),
            "v4_indexes": (batches, None, V4_INDEXES)}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        for r in range(a.reps):  # interleaved: the variants share the machine's noise
            for name, (b, ck, setup) in variants.items():
                runs[name].append(replay(b, Path(d) / f"{name}-{r}.db", ck, setup))
        for name, reps in runs.items():
            totals = [sum(s.values()) for s in reps]
            best = reps[totals.index(statistics.median(totals))] if len(totals) % 2 else reps[0]
            out[name] = {"us_per_cycle": round(statistics.median(totals) * 1e6 / a.cycles, 1),
                         "by_kind": {k: round(v * 1e6 / a.cycles, 1)
                                     for k, v in sorted(best.items(), key=lambda kv: -kv[1])}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
