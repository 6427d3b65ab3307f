"""bench/store_writer.py with tiny sizes: the recorded frames are the writer's whole input, and the figures are real."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import store_writer  # noqa: E402


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize(("workload", "n", "runs"), [("cycle", 3, 6), ("fanout", 5, 6)])
def test_replay_writes_what_the_live_writer_wrote(tmp_path: Path, workload: str, n: int, runs: int) -> None:
    rec = asyncio.run(store_writer.record(workload, n, str(tmp_path)))
    assert rec.batches > 0
    assert 0 < rec.live_commits <= rec.batches
    assert "PRAGMA journal_mode=WAL" in rec.pragmas
    spent, rows = store_writer.replay(rec, tmp_path / "replay.db")
    assert len(rows) == runs
    for sql in ("SELECT * FROM runs ORDER BY run_id", "SELECT * FROM transcript ORDER BY run_id, seq",
                "SELECT * FROM announcements ORDER BY id", "SELECT * FROM prompts ORDER BY key"):
        assert _rows(tmp_path / "replay.db", sql) == _rows(tmp_path / "record.db", sql), sql
    assert {"loads", "prepare", "begin", "commit", "insert runs", "insert transcript"} <= set(spent)
    if workload == "fanout":
        assert "insert announcements" in spent
    assert all(v > 0 for v in spent.values()), spent
    assert store_writer.floor(rows, tmp_path / "floor.db", rec.pragmas) > 0


@pytest.mark.parametrize("workload", ["cycle", "fanout"])
def test_prints_one_json_line_with_the_floor(workload: str, capsys: pytest.CaptureFixture[str]) -> None:
    store_writer.main(["--workload", workload, "--n", "4", "--reps", "2"])
    (line,) = capsys.readouterr().out.strip().splitlines()
    r = json.loads(line)
    assert r["workload"] == workload
    assert r["per"] == ("cycle" if workload == "cycle" else "child")
    assert r["batches"] > 0
    assert r["run_rows"] == (8 if workload == "cycle" else 5)
    assert all(v > 0 for v in r["us"].values()), r["us"]
    assert r["total_us"] == pytest.approx(sum(r["us"].values()), rel=0.2)
    assert r["floor_us"] > 0
    assert r["x_floor"] > 1
