"""The atomic claim under a race: 50 claimants, 200 tasks on a random dependency DAG — in one process
(every store), in two OS processes on one SQLite file or PostgreSQL database, and on two connections of one
process."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from subagents.teams.model import ClaimRefused, MemberRecord, TaskStatus
from subagents.teams.postgres import PostgresTeamStore
from subagents.teams.sqlite import SQLiteTeamStore
from subagents.teams.store import TeamStore

sys.path.insert(0, str(Path(__file__).parent))
import team_worker

WORKER = Path(__file__).parent / "team_worker.py"


@pytest.mark.parametrize("seed", [1, 2])
def test_fifty_claimants_take_every_task_once_and_never_before_its_blockers(ts: TeamStore, seed: int) -> None:
    deps = team_worker.make_board(ts, "race", 50, seed)
    assert sum(map(len, deps.values())) > 150  # a real graph: most tasks wait for others
    names = [f"c{i}" for i in range(50)]
    random.Random(seed).shuffle(names)  # the threads start in a random order
    log = team_worker.run_claimants(ts, "race", names, len(deps), seed)
    assert team_worker.violations(deps, log, ts, "race") == []
    assert len({e[2] for e in log if e[0] == "claim"}) > 10  # many claimants got work


def _team_store(kind: str, where: str) -> TeamStore:
    return SQLiteTeamStore(where) if kind == "sqlite" else PostgresTeamStore(where)


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, where): a SQLite file or a PostgreSQL database that several store objects or processes share."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "state.db")
    return "postgres", request.getfixturevalue("pg_url")


def test_two_processes_on_one_store_take_every_task_once(tmp_path: Path, shared: tuple[str, str]) -> None:
    kind, db = shared
    ts = _team_store(kind, db)
    try:
        deps = team_worker.make_board(ts, "race", 50, seed=3)
    finally:
        ts.close()
    ready = tmp_path / "ready"
    ready.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, str(WORKER), "claim", str(db), "race", str(first), "25",
                               str(tmp_path / f"log{first}.json"), str(ready), "2"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for first in (0, 25)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    logs = [json.loads((tmp_path / f"log{first}.json").read_text()) for first in (0, 25)]
    assert all(any(e[0] == "claim" for e in log) for log in logs)  # both processes claimed tasks
    ts = _team_store(kind, db)
    try:
        assert team_worker.violations(deps, [tuple(e) for log in logs for e in log], ts, "race") == []
    finally:
        ts.close()


def test_the_claim_is_atomic_across_two_connections(shared: tuple[str, str]) -> None:
    """Two store objects (two connections, or pools) on one store; 40 threads each claim every task by id, in
    random orders: each task has exactly one winner, every other claimant, on either connection, is told who owns
    it."""
    kind, db = shared
    one, two = _team_store(kind, db), _team_store(kind, db)
    try:
        one.create_team("t", "", 0.0)
        for i in range(40):
            one.add_member(MemberRecord("t", f"m{i}", "general"))
        ids = [one.create_task("t", f"task {i}").id for i in range(30)]
        won: list[tuple[int, str]] = []
        refused: list[tuple[int, str, str | None]] = []
        across: list[bool] = []  # a refusal naming an owner that claimed on the other connection
        start = threading.Barrier(40)

        def racer(store: TeamStore, me: str, seed: int) -> None:
            order = ids[:]
            random.Random(seed).shuffle(order)
            start.wait()
            for tid in order:
                try:
                    won.append((store.claim("t", tid, me, 1.0).id, me))
                except ClaimRefused as e:
                    refused.append((tid, e.reason, e.owner))
                    across.append(e.owner is not None and int(e.owner[1:]) % 2 != int(me[1:]) % 2)

        threads = [threading.Thread(target=racer, args=(one if i % 2 else two, f"m{i}", i)) for i in range(40)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(tid for tid, _ in won) == ids
        owner = dict(won)
        assert len(refused) == 39 * len(ids)
        assert all(reason == "owned" and who == owner[tid] for tid, reason, who in refused)
        assert {t.id: t.owner for t in two.tasks("t", TaskStatus.IN_PROGRESS)} == owner
        # each connection saw the other's claims (which connection wins how many is the scheduler's: on a fast box
        # one connection's threads may claim all 30 while the other's wait out SQLite's busy handler)
        assert any(across)
    finally:
        one.close()
        two.close()
