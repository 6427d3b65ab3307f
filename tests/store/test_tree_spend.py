"""``Store.tree_spend``: what a tree spent, read as a few columns — what a restored root's budget is charged with.

A restored root with a token or cost limit is charged with what its tree spent since its last run started
(``charge_tree``: a restart does not give a tree its limits anew).  That read every run of the tree as a whole record
(100,000 runs: ~1.3 s at every restart); ``tree_spend`` reads four columns.  Every store gives the same sums, and a
store's values are not trusted to give a tree budget back: a count that is not a non-negative integer counts 0, and so
does a cost that is not a finite non-negative number; a usage the record reads refuse is refused the same way.
"""

from __future__ import annotations

import asyncio
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from subagents import Limits, Runtime, StoreError, Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store import MemoryStore, RunRecord, Store
from subagents.store._readonly import SQLiteReader
from subagents.store.sqlite import SQLiteStore

ROOT, OTHER = "root-0001", "root-0002"


def rec(run_id: str, root_id: str = ROOT, started_at: float | None = 100.0, **kw: Any) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"nick-{run_id}", agent_type="explore", task="t",
                     parent_id=None if run_id == root_id else root_id, root_id=root_id, started_at=started_at,
                     status="running", **kw)


def add(store: Store, r: RunRecord, usage: dict[str, Any], cost: float | None, final: bool = True,
        archived: bool = False) -> None:
    """``r`` with its spending, finished (the memory store packs it) or still running (kept as a record)."""
    store.create_run(r)
    fields: dict[str, Any] = {"usage": usage, "cost_usd": cost}
    if final:
        store.finish_run(r.run_id, {**fields, "status": "completed", "ended_at": 300.0}, None)
    else:
        store.update_run(r.run_id, fields)
    if archived:
        store.update_run(r.run_id, {"archived": True})


def tree(store: Store) -> None:
    """A root (started at 100) with runs before and after it, archived, unfinished, never started; another tree."""
    add(store, rec(ROOT, started_at=100.0), {"input_tokens": 10, "output_tokens": 5}, 0.25, final=False)
    add(store, rec("kid-after", started_at=150.0), {"input_tokens": 20, "output_tokens": 10, "cache_read": 99}, 0.5)
    add(store, rec("kid-at", started_at=100.0), {"output_tokens": 7}, None)
    add(store, rec("grandkid-archived", started_at=200.0), {"input_tokens": 40, "output_tokens": 2}, 1.0,
        archived=True)
    add(store, rec("kid-live", started_at=250.0), {"input_tokens": 3, "output_tokens": 3}, 0.125, final=False)
    add(store, rec("kid-before", started_at=50.0), {"input_tokens": 1000, "output_tokens": 1000}, 8.0)
    add(store, rec("kid-never-started", started_at=None), {"input_tokens": 400}, 4.0)
    add(store, rec(OTHER, root_id=OTHER, started_at=300.0), {"input_tokens": 5000}, 16.0)
    add(store, rec("other-kid", root_id=OTHER, started_at=300.0), {"input_tokens": 7000}, 32.0)
    store.flush()


def by_records(store: Store, root_id: str, since: float) -> tuple[int, float]:
    """What ``charge_tree`` summed before ``tree_spend``: the tree's whole records."""
    runs = [r for r in store.list_runs(include_archived=True, root_id=root_id)
            if r.run_id == root_id or (r.started_at or 0.0) >= since]
    return (sum(r.usage.get("input_tokens", 0) + r.usage.get("output_tokens", 0) for r in runs),
            sum(r.cost_usd or 0.0 for r in runs))


def test_every_store_sums_the_root_and_its_trees_runs_started_since(store: Store) -> None:
    tree(store)
    after_root = (15 + 30 + 7 + 42 + 6, 0.25 + 0.5 + 1.0 + 0.125)  # archived and unfinished runs count
    assert store.tree_spend(ROOT, 100.0) == after_root == by_records(store, ROOT, 100.0)
    assert store.tree_spend(ROOT, 0.0) == (after_root[0] + 2000 + 400, after_root[1] + 8.0 + 4.0)  # (never started:
    assert store.tree_spend(ROOT, 0.0) == by_records(store, ROOT, 0.0)                            # at 0)
    assert store.tree_spend(ROOT, 1000.0) == (15, 0.25)  # the root itself counts whenever it started
    assert store.tree_spend(OTHER, 0.0) == (12000, 48.0)
    assert store.tree_spend("no-such-root", 0.0) == (0, 0.0)


BAD_VALUES: dict[str, tuple[dict[str, Any], float | None]] = {
    "a negative count (it would hand budget back)": ({"input_tokens": -100_000, "output_tokens": 5}, None),
    "a count that is a fraction": ({"input_tokens": 2.5, "output_tokens": 1}, None),
    "a count that is true": ({"input_tokens": True}, None),
    "a negative cost": ({}, -50.0),
}


@pytest.mark.parametrize(("usage", "cost"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_a_count_or_cost_that_is_no_spending_counts_nothing_in_every_store(store: Store, usage: dict[str, Any],
                                                                          cost: float | None) -> None:
    add(store, rec(ROOT), {"input_tokens": 10, "output_tokens": 5}, 0.25)
    add(store, rec("odd"), usage, cost)
    store.flush()
    assert store.tree_spend(ROOT, 0.0) == (15, 0.25)


def test_a_memory_store_cost_that_is_not_finite_counts_nothing() -> None:
    store = MemoryStore()  # (the PostgreSQL store's writer refuses such a cost; its rows: the test below)
    add(store, rec(ROOT), {"input_tokens": 10, "output_tokens": 5}, 0.25)
    add(store, rec("nan"), {"input_tokens": 1}, math.nan)
    add(store, rec("inf"), {"input_tokens": 2}, math.inf, final=False)
    assert store.tree_spend(ROOT, 0.0) == (18, 0.25)


# -- a SQLite store someone else wrote (raw rows) -----------------------------------------------------------------
@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    s = SQLiteStore(path)
    try:
        add(s, rec(ROOT), {"input_tokens": 10, "output_tokens": 5}, 0.25)
        add(s, rec("odd"), {}, None)
    finally:
        s.close()
    return path


def craft(db: Path, sql: str, *params: Any) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def each_store(db: Path) -> Iterator[SQLiteStore | SQLiteReader]:
    for open_ in (SQLiteStore, SQLiteReader):
        s = open_(db)
        try:
            yield s
        finally:
            s.close()


UNTRUSTED = {
    "a negative count": ('{"input_tokens": -1000000, "output_tokens": 5}', None),
    "a fractional count": ('{"input_tokens": 0.5, "output_tokens": 3}', None),
    "a count that is false": ('{"input_tokens": false}', None),
    "an empty usage": ("", None),
    "a negative cost": ("{}", -1e9),
    "an infinite cost": ("{}", math.inf),
    "a cost that is NaN (SQLite keeps NULL)": ("{}", math.nan),
}


@pytest.mark.parametrize(("usage", "cost"), UNTRUSTED.values(), ids=UNTRUSTED.keys())
def test_a_crafted_sqlite_count_or_cost_counts_nothing(db: Path, usage: str, cost: float | None) -> None:
    craft(db, "UPDATE runs SET usage = ?, cost_usd = ? WHERE run_id = 'odd'", usage, cost)
    for s in each_store(db):
        assert s.tree_spend(ROOT, 0.0) == (15, 0.25)


REFUSED = {  # what the record reads refuse: the same StoreError, naming the store and the run
    "usage that does not parse": ("usage = '{oops'", "its usage does not parse"),
    "usage that is a list": ("usage = '[1, 2]'", "its usage is not a JSON object"),
    "a count that is text": ("""usage = '{"input_tokens": "many"}'""", "holds a count that is not a number"),
    "a count too large for a float": ("""usage = '{"input_tokens": 1e999}'""", "holds a count that is not a number"),
    "a count of 400 digits (was: OverflowError)": ("""usage = '{"output_tokens": -""" + "9" * 400 + "}'",
                                                   "holds a count that is not a number"),
    "usage nested past the recursion limit": ("usage = '" + "[" * 100_000 + "'", "its usage does not parse"),
    "a usage that is a blob": ("usage = x'7b7d'", "whose usage is a blob"),
    "a start time that is text": ("started_at = 'yesterday'", "whose started_at is text"),
    "a cost that is text": ("cost_usd = 'lots'", "whose cost_usd is text"),
    "a run id that is a blob": ("run_id = x'6f6464'", "whose run_id is a blob"),
}


@pytest.mark.parametrize(("change", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_a_crafted_sqlite_row_the_record_reads_refuse_is_the_same_store_error(db: Path, change: str, says: str
                                                                             ) -> None:
    craft(db, f"UPDATE runs SET {change} WHERE run_id = 'odd'")
    who = re.escape(f"{db} holds a run ({b'odd' if 'run_id' in change else 'odd'!r})")
    for s in each_store(db):
        with pytest.raises(StoreError, match=f"{who}.*move the store aside"):
            s.list_runs(include_archived=True, root_id=ROOT)
        with pytest.raises(StoreError, match=f"{who}.*{says}.*move the store aside"):
            s.tree_spend(ROOT, 0.0)


def test_a_postgres_cost_that_is_nan_or_negative_counts_nothing(pg_url: str) -> None:
    from subagents.store.postgres import PostgresStore

    s = PostgresStore(pg_url)
    try:
        add(s, rec(ROOT), {"input_tokens": 10, "output_tokens": 5}, 0.25)
        for i in range(3):
            add(s, rec(f"odd-{i}"), {"input_tokens": 1}, None)
        s.flush()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for i, cost in enumerate((math.nan, -3.0, math.inf)):
                conn.execute("UPDATE runs SET cost_usd = %s, usage = '{\"input_tokens\": -7}' WHERE run_id = %s",
                             (cost, f"odd-{i}"))
        assert s.tree_spend(ROOT, 0.0) == (15, 0.25)
    finally:
        s.close()


# -- a restart: the restored root's budget ------------------------------------------------------------------------
def w(coro: Any) -> Any:
    return asyncio.wait_for(coro, 20)


def _model(req: ModelRequest) -> ModelResponse:
    if req.agent.depth == 1:
        return ModelResponse(text="child done", usage=Usage(80, 20))
    if not any(m.role == "assistant" for m in req.messages):
        return ModelResponse(usage=Usage(80, 20), tool_calls=[ToolCall(
            "spawn_agent", {"agent_type": "general-purpose", "prompt": "k", "description": "k"})])
    return ModelResponse(text="root done", usage=Usage(80, 20))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store | str]:
    """What a new Runtime opens: the same store again (a memory store: the same object, in a new runtime)."""
    if request.param == "memory":
        mem = MemoryStore()
        return lambda: mem
    url = f"sqlite:///{tmp_path / 'state.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    return lambda: url


async def _first_run(workdir: Path, store: Store | str) -> tuple[str, str]:
    async with Runtime(model=FunctionModel(_model), workdir=workdir, store=store, builtin_tools=False) as rt:
        res = await w(rt.run("go", limits=Limits(max_tokens=1000)))  # three calls of 100 tokens: 300 spent
        assert res.text == "root done"
        kid = next(a.id for a in rt.agents() if a.depth == 1)
        return res.id, kid


async def _resumed_kid_limit(workdir: Path, store: Store | str, kid: str) -> int | None:
    async with Runtime(model=FunctionModel(_model), workdir=workdir, store=store, builtin_tools=False) as rt:
        await rt.resume(kid, "once more")
        assert (await w(rt.wait([kid])))[kid].text == "child done"
        return rt.manager.nodes[kid].limits.max_tokens


async def test_a_restored_root_is_charged_with_what_its_tree_spent(workdir: Path,
                                                                   reopen: Callable[[], Store | str]) -> None:
    _, kid = await _first_run(workdir, reopen())
    assert await _resumed_kid_limit(workdir, reopen(), kid) == 700  # the root's 1,000 less the 300 spent


async def test_a_crafted_negative_count_gives_a_restored_tree_no_budget_back(workdir: Path, tmp_path: Path) -> None:
    """A run of the tree whose stored usage is negative: the restored root's budget was charged with it, so the tree
    got 100,000 tokens back (was: the resumed child could spend 100,700)."""
    db = tmp_path / "state.db"
    _, kid = await _first_run(workdir, f"sqlite:///{db}")
    craft(db, "UPDATE runs SET usage = '{\"input_tokens\": -100000, \"output_tokens\": 0}' WHERE run_id = ?", kid)
    assert await _resumed_kid_limit(workdir, f"sqlite:///{db}", kid) == 800  # its 100: not counted, not negative
