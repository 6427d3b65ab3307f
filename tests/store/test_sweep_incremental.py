"""The incremental sweep: bounded, indexed steps that archive and delete exactly what a whole scan would."""

from __future__ import annotations

import random
import re
import sqlite3
from pathlib import Path

from subagents.runtime.sweeper import Sweeper
from subagents.store import AnnouncementRecord, RunRecord, Store
from subagents.store.base import sweep_key
from subagents.store.sqlite import SQLiteStore


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def rec(run_id: str, **kw: object) -> RunRecord:
    d: dict[str, object] = {"nickname": run_id, "agent_type": "explore", "task": "t", "status": "completed",
                            "ended_at": 1000.0, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, **d)  # type: ignore[arg-type]


def fill(store: Store, n: int, seed: int = 7) -> dict[str, str]:
    """``n`` runs of every kind the sweeper meets; returns run id -> what a sweep at t=5000 must do."""
    rnd = random.Random(seed)
    want: dict[str, str] = {}
    for i in range(n):
        rid = f"r{i:05d}"
        kind = rnd.choice(["due", "later", "unstamped", "delete", "undelivered", "running", "archived"])
        ended = 1000.0 + rnd.randrange(0, 3000)
        if kind == "due":
            store.create_run(rec(rid, ended_at=ended, archive_at=ended + 600))
        elif kind == "later":
            store.create_run(rec(rid, ended_at=ended, archive_at=9000.0 + i))
        elif kind == "unstamped":  # stamped by the sweep: ended + 600 <= 5000 for all of these
            store.create_run(rec(rid, ended_at=ended))
        elif kind == "delete":
            store.create_run(rec(rid, ended_at=ended, cleanup="delete", archive_at=9999.0))
        elif kind == "undelivered":
            store.create_run(rec(rid, ended_at=ended, cleanup="delete", background=True, parent_id="p"))
            store.finish_run(rid, {}, AnnouncementRecord(f"{rid}:1", "p", rid, "done", ended))
        elif kind == "running":
            store.create_run(rec(rid, status="running", ended_at=None))
        else:
            store.create_run(rec(rid, ended_at=ended, archive_at=ended, archived=True))
        want[rid] = {"due": "archived", "unstamped": "archived", "delete": "deleted"}.get(kind, "kept")
    store.flush()
    return want


def test_a_sweep_in_small_steps_does_exactly_what_the_policies_say(store: Store) -> None:
    want = fill(store, 600)
    sw = Sweeper(store, archive_after_minutes=10, clock=Clock(5000.0), step_rows=7)
    report = sw.sweep()
    store.flush()
    assert sorted(report.archived) == sorted(r for r, w in want.items() if w == "archived")
    assert sorted(report.deleted) == sorted(r for r, w in want.items() if w == "deleted")
    assert len(set(report.archived)) == len(report.archived)  # each run once
    left = {r.run_id: r for r in store.list_runs(include_archived=True)}
    assert set(left) == {r for r, w in want.items() if w != "deleted"}
    assert {r for r, x in left.items() if x.archived and want[r] == "archived"} == set(report.archived)
    # a second sweep finds nothing more to do
    again = sw.sweep()
    assert (again.archived, again.deleted) == ([], [])


def test_candidates_page_through_every_due_run_once_in_sweep_order(store: Store) -> None:
    fill(store, 300, seed=3)
    everything = store.cleanup_candidates(5000.0)
    due = sorted((r for r in everything if sweep_key(r)[0] <= 5000.0), key=sweep_key)
    seen: list[RunRecord] = []
    after = None
    while True:
        page = store.cleanup_candidates(5000.0, 11, after)
        assert len(page) <= 11
        seen += page
        if len(page) < 11:
            break
        after = sweep_key(page[-1])
    assert [r.run_id for r in seen] == [r.run_id for r in due]
    assert {r.run_id for r in everything} - {r.run_id for r in seen} == {
        r.run_id for r in everything if sweep_key(r)[0] > 5000.0}  # only those not due yet wait


def test_the_sweeper_gives_the_store_its_delay_and_finish_run_stamps_archive_at(store: Store) -> None:
    Sweeper(store, archive_after_minutes=10)
    assert store.archive_after_s == 600.0
    store.create_run(rec("a", status="running", ended_at=None))
    store.create_run(rec("b", status="running", ended_at=None))
    store.finish_run("a", {"status": "completed", "ended_at": 2000.0}, None)
    store.finish_run("b", {"status": "completed", "ended_at": 2000.0, "archive_at": 2100.0}, None)  # its own
    store.flush()
    a, b = store.get_run("a"), store.get_run("b")
    assert a is not None
    assert b is not None
    assert (a.archive_at, b.archive_at) == (2600.0, 2100.0)


def test_a_step_reads_no_more_than_its_rows(store: Store) -> None:
    fill(store, 200, seed=5)
    asked: list[int | None] = []
    real = store.cleanup_candidates

    def spy(now: float, limit: int | None = None, after: tuple[float, str] | None = None) -> list[RunRecord]:
        asked.append(limit)
        got = real(now, limit, after)
        assert limit is not None
        assert len(got) <= limit
        return got

    store.cleanup_candidates = spy  # type: ignore[method-assign]
    Sweeper(store, archive_after_minutes=10, clock=Clock(5000.0), step_rows=16).sweep()
    assert len(asked) > 3
    assert set(asked) == {16}


def test_the_sweep_step_query_uses_the_sweep_index(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    s.close()
    from subagents.store._batch import sweep_values
    from subagents.store.sqlite import _SWEEP_STEP

    conn = sqlite3.connect(tmp_path / "state.db")
    try:
        values = sweep_values(0.0, "", 1.0, 10)
        plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + _SWEEP_STEP, values))
        assert "USING INDEX runs_sweep" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
    finally:
        conn.close()



def test_the_sweep_step_binds_plain_placeholders() -> None:
    """Numbered placeholders (``?1``) bound from a sequence: a DeprecationWarning in Python 3.12's sqlite3 (the
    sweeper failed there: this suite makes warnings errors), refused from 3.14.  No SQL of the package uses them."""
    from subagents.store._batch import sweep_values
    from subagents.store.sqlite import _SWEEP_STEP

    assert _SWEEP_STEP.count("?") == len(sweep_values(0.0, "", 1.0, 10))
    src = Path(__file__).resolve().parents[2] / "src" / "subagents"
    numbered = [f"{p.relative_to(src)}: {m.group(0)}" for p in sorted(src.rglob("*.py"))
                for m in re.finditer(r"\?\d+", p.read_text(encoding="utf-8"))]
    assert not numbered, numbered
