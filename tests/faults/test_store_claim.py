"""Two runtimes restoring at the same moment never both take over one orphaned run.

Before: each runtime listed the orphans and re-created them; the change of owner was an ordinary
batched write, so a second runtime that looked before it was committed adopted the same run and it
ran twice (found while fixing the exactly-once delivery of issue #12).  Now ownership moves with an
atomic claim (``UPDATE ... WHERE owner = <the dead owner>``): one runtime wins, the other skips it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from owner_ids import mine
from subagents import Runtime
from subagents.messages import Message
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.store import RunRecord
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

DEAD = mine("elsewhere:424242:0123456789abcdef")  # no lease: orphaned


def orphan(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"nick-{run_id}", agent_type="general-purpose",
                     task="do it", status="running", owner=DEAD, root_id=run_id, runs=1, created_at=1.0)


def seed(db: Path, ids: list[str]) -> None:
    s = SQLiteStore(db)
    try:
        for rid in ids:
            s.create_run(orphan(rid))
            s.append_messages(rid, 0, [Message.user("finish it")])
    finally:
        s.close()


@pytest.mark.timeout(30)
async def test_two_runtimes_restoring_at_once_resume_each_orphan_once(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    ids = [f"orphan-{i}" for i in range(6)]
    seed(db, ids)
    calls: dict[str, list[str]] = {}

    def fn(name: str) -> object:
        def script(req: ModelRequest) -> ModelResponse:
            calls.setdefault(req.agent.id, []).append(name)
            return ModelResponse(f"done by {name}")
        return script

    a = Runtime(model=FunctionModel(fn("a"), inline=True), workdir=tmp_path, store=f"sqlite:///{db}",
                builtin_tools=False)
    b = Runtime(model=FunctionModel(fn("b"), inline=True), workdir=tmp_path, store=f"sqlite:///{db}",
                builtin_tools=False)
    try:
        ra = await a.restore()   # a's change of owner is still in its unflushed batch here
        rb = await b.restore()
        assert ra is not None
        assert rb is not None
        assert sorted(ra.resumed + rb.resumed) == ids  # each orphan taken by exactly one of them
        await a.wait([i for i in ids if i in ra.resumed], timeout=10)
        await b.wait([i for i in ids if i in rb.resumed], timeout=10)
    finally:
        await a.aclose()
        await b.aclose()
    assert sorted(calls) == ids
    assert all(len(v) == 1 for v in calls.values()), calls


def test_a_claim_is_atomic_between_stores(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    ids = [f"r{i}" for i in range(50)]
    seed(db, ids)
    stores = [SQLiteStore(db) for _ in range(4)]
    got: list[set[str]] = [set() for _ in stores]
    start = threading.Barrier(len(stores))

    def claim(i: int) -> None:
        start.wait()
        got[i] = stores[i].claim_runs({rid: DEAD for rid in ids})

    try:
        threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert sum(len(g) for g in got) == len(ids)
        assert set().union(*got) == set(ids)
        winner = next(i for i, g in enumerate(got) if "r0" in g)
        rec = stores[0].get_run("r0")
        assert rec is not None
        assert rec.owner == stores[winner].owner
        lease = stores[0].lease(stores[winner].owner)  # the winner holds a lease with its claim
        assert lease is not None
        assert lease.expires_at > time.time()
        assert stores[1].claim_runs({"r0": DEAD}) == set()  # no longer the dead owner's
    finally:
        for s in stores:
            s.close()


def test_the_memory_store_claims_too() -> None:
    s = MemoryStore()
    s.create_run(orphan("x"))
    assert s.claim_runs({"x": DEAD}) == {"x"}
    assert s.claim_runs({"x": DEAD}) == set()
    assert s.get_run("x").owner == s.owner  # type: ignore[union-attr]
