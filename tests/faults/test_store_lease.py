"""Item 1: owner leases, not PIDs, decide whether a run is orphaned.

A run owned by a process whose PID is alive — this test process, or PID 1 as in a container — but
whose lease expired is orphaned and recovered; a live runtime's runs are never taken while its lease
is renewed, over many lease periods.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest

from owner_ids import mine
from subagents import Runtime
from subagents.messages import Message
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.runtime.recovery import is_orphaned, restore
from subagents.store import RunRecord
from subagents.store._lease import process_identity
from subagents.store.sqlite import SQLiteStore

HOST = socket.gethostname()


def run(run_id: str, owner: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"nick-{run_id}", agent_type="general-purpose",
                     task="do it", status="running", owner=owner, root_id=run_id, runs=1, created_at=1.0)


def rt_for(db: Path, fn: object, store: SQLiteStore | None = None) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=db.parent,  # type: ignore[arg-type]
                   store=store if store is not None else f"sqlite:///{db}", builtin_tools=False)


@pytest.mark.timeout(20)
async def test_a_live_pid_with_an_expired_lease_is_orphaned_and_recovered(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    me = mine(f"{HOST}:{os.getpid()}:0123456789abcdef")   # this very process: its PID is alive
    init = mine(f"{HOST}:1:fedcba9876543210")              # PID 1, alive in every container
    s = SQLiteStore(db)
    try:
        for rid, owner in (("mine-before", me), ("pid1", init)):
            s.create_run(run(rid, owner))
            s.append_messages(rid, 0, [Message.user("finish it")])
            # a lease that expired a minute ago, from a process that is still alive (this one)
            s.renew_lease(owner, time.time() - 90, time.time() - 60, process_identity())
    finally:
        s.close()
    async with rt_for(db, lambda req: "recovered") as rt:
        done = await rt.wait(["mine-before", "pid1"], timeout=10)
        assert {k: r.text for k, r in done.items()} == {"mine-before": "recovered", "pid1": "recovered"}
        rt.store.flush()
        assert rt.store.get_run("pid1").owner == rt.store.owner  # type: ignore[union-attr]


async def test_a_reused_pid_is_seen_at_once_before_the_lease_expires(tmp_path: Path) -> None:
    """Same machine, same PID, another process (its start time differs): the owner is provably gone."""
    s = SQLiteStore(tmp_path / "state.db")
    try:
        ident = process_identity()
        machine_pid, _, start = ident.rpartition(":")
        owner = f"{HOST}:{os.getpid()}:aaaa"
        s.renew_lease(owner, time.time(), time.time() + 3600, f"{machine_pid}:{int(start) + 1}")
        s.renew_lease("live", time.time(), time.time() + 3600, ident)
        s.flush()
        assert is_orphaned(s, run("r", owner), time.time())
        assert not is_orphaned(s, run("r", "live"), time.time())
        assert is_orphaned(s, run("r", "live"), time.time() + 3601)  # once expired, liveness does not matter
    finally:
        s.close()


def test_a_clean_close_releases_the_lease(tmp_path: Path) -> None:
    a = SQLiteStore(tmp_path / "state.db")
    a.create_run(run("r", a.owner))
    a.flush()
    lease = a.lease(a.owner)
    assert lease is not None
    assert lease.expires_at > time.time() + 20
    a.close()
    b = SQLiteStore(tmp_path / "state.db")
    try:
        assert b.lease(a.owner) is None
        assert is_orphaned(b, run("r", a.owner), time.time())
    finally:
        b.close()


@pytest.mark.timeout(30)
async def test_a_live_runtimes_runs_are_never_taken_while_its_lease_is_renewed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    lease_s = 0.3
    release = asyncio.Event()
    calls: list[str] = []

    async def slow(req: ModelRequest) -> ModelResponse:
        calls.append(req.agent.id)
        await release.wait()  # a long model call: nothing is written while it lasts
        return ModelResponse(text="done by its owner")

    a_store = SQLiteStore(db, lease_s=lease_s, renew_s=0.05)
    async with rt_for(db, slow, a_store) as a:
        h = await a.spawn("work")
        async with rt_for(db, lambda req: "stolen") as b:
            t_end = time.monotonic() + 6 * lease_s
            checks = 0
            while time.monotonic() < t_end:
                await asyncio.sleep(lease_s / 3)
                report = restore(b.manager)
                assert report.resumed == []
                assert report.interrupted == []
                rec = b.store.get_run(h.id)
                assert rec is not None
                assert rec.owner == a_store.owner
                assert rec.status == "running"
                assert not is_orphaned(b.store, rec, time.time())
                checks += 1
            assert checks >= 12
            assert b.manager.find(h.id) is None
        release.set()
        done = await a.wait([h.id], timeout=10)
        assert done[h.id].text == "done by its owner"
    assert calls == [h.id]  # it ran once, in its owner


async def test_runs_of_the_temporal_engine_are_never_adopted(tmp_path: Path) -> None:
    """A run recorded by Temporal workers (owner ``temporal:<queue>``) has no lease: its workers own it, and a local
    Runtime opening the same store leaves it alone."""
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    try:
        s.create_run(run("remote", "temporal:subagents"))
        s.append_messages("remote", 0, [Message.user("keep going")])
        s.flush()
        assert not is_orphaned(s, run("remote", "temporal:subagents"), time.time() + 10_000)
    finally:
        s.close()
    async with rt_for(db, lambda req: "adopted") as rt:
        assert await rt.wait(["remote"], timeout=0.3) == {}
        rt.store.flush()
        rec = rt.store.get_run("remote")
        assert rec is not None
        assert (rec.owner, rec.status) == ("temporal:subagents", "running")
