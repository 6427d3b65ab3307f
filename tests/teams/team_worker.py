"""The race and the crash scenarios of the team store, shared by the tests and their worker processes.

``python team_worker.py claim DB TEAM FIRST COUNT OUT READY_DIR PROCS`` runs claimants ``c<FIRST>`` ..
``c<FIRST+COUNT-1>`` (one thread each) on the board of ``DB`` until every task is completed, after every
worker process has said it is ready (a file in ``READY_DIR``), and writes its log to ``OUT`` (JSON).
``DB``: a SQLite file, or a store URL (``postgresql://...``).

``python team_worker.py mail DB TEAM`` (``DB``: likewise) sends mail and claims and completes tasks, printing
``SENT <seq>``, ``CLAIMED <id>``, ``DONE <id>`` once each has been committed, until it is killed.

Every claim is logged with ``time.monotonic_ns()`` taken after it returned, and every completion with
the time taken *before* it was asked for (so before its commit): a claim that came after its blockers'
completions has a later stamp than each of them.  ``CLOCK_MONOTONIC`` is one clock for the whole
machine, so the stamps of two processes compare.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from subagents.store import Store
from subagents.teams.model import MemberRecord, TaskStatus
from subagents.teams.store import TeamStore

TASKS = 200


def make_board(ts: TeamStore, team: str, claimants: int, seed: int, n: int = TASKS) -> dict[int, tuple[int, ...]]:
    """A team with members ``c0`` .. and ``n`` tasks on a random dependency DAG; ``{task id: blockers}``."""
    ts.create_team(team, "", 0.0)
    for i in range(claimants):
        ts.add_member(MemberRecord(team, f"c{i}", "general", joined_at=float(i)))
    rng = random.Random(seed)
    deps = {}
    for i in range(1, n + 1):
        k = min(rng.choice((0, 0, 1, 1, 2, 3)), i - 1)
        t = ts.create_task(team, f"task {i}", blocked_by=rng.sample(range(1, i), k), at=float(i))
        deps[t.id] = t.blocked_by
    return deps


def claimant(ts: TeamStore, team: str, me: str, n: int, log: list[tuple[Any, ...]], seed: int) -> None:
    """Claim the next claimable task, check its blockers are completed, hold it a little, complete it; until
    all ``n`` tasks are completed."""
    rng = random.Random(seed)
    while True:
        t = ts.claim_next(team, me, time.time())
        if t is None:
            if len(ts.tasks(team, TaskStatus.COMPLETED)) == n:
                return
            time.sleep(rng.uniform(0.001, 0.004))
            continue
        claimed = time.monotonic_ns()
        unfinished = [b for b in t.blocked_by if ts.task(team, b).status is not TaskStatus.COMPLETED]  # type: ignore[union-attr]
        log.append(("claim", t.id, me, claimed, unfinished))
        time.sleep(rng.uniform(0.005, 0.015))  # long enough that a process starting tens of ms late still claims
        log.append(("done", t.id, me, time.monotonic_ns(), []))
        ts.update_task(team, t.id, by=me, status=TaskStatus.COMPLETED, at=time.time())


def run_claimants(ts: TeamStore, team: str, names: list[str], n: int, seed: int) -> list[tuple[Any, ...]]:
    log: list[tuple[Any, ...]] = []
    errors: list[BaseException] = []

    def run(name: str, i: int) -> None:
        try:
            claimant(ts, team, name, n, log, seed * 1000 + i)
        except BaseException as e:  # reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=run, args=(name, i)) for i, name in enumerate(names)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return log


def violations(deps: dict[int, tuple[int, ...]], log: list[tuple[Any, ...]], ts: TeamStore, team: str) -> list[str]:
    """Every guarantee of the race that does not hold (empty when all do)."""
    out = []
    claims = Counter(e[1] for e in log if e[0] == "claim")
    if twice := sorted(i for i, k in claims.items() if k > 1):
        out.append(f"claimed more than once: {twice}")
    if missing := sorted(set(deps) - set(claims)):
        out.append(f"never claimed: {missing}")
    claimed_at = {e[1]: e[3] for e in log if e[0] == "claim"}
    done_at = {e[1]: e[3] for e in log if e[0] == "done"}
    owner = {e[1]: e[2] for e in log if e[0] == "claim"}
    for e in log:
        if e[0] == "claim" and e[4]:
            out.append(f"task {e[1]} claimed while its blockers {e[4]} were not completed")
    for tid, blockers in deps.items():
        early = [b for b in blockers if tid in claimed_at and not done_at.get(b, 1 << 62) < claimed_at[tid]]
        if early:
            out.append(f"task {tid} claimed before its blockers {early} were completed")
    board = ts.tasks(team)
    if bad := [(t.id, t.status.value, t.owner) for t in board
               if t.status is not TaskStatus.COMPLETED or t.owner != owner.get(t.id)]:
        out.append(f"not completed by their claimant: {bad[:10]}")
    return out


def open_db(db: str) -> Store:
    """The run store at ``db``: a SQLite file, or a store URL (``postgresql://...``)."""
    from subagents.store import open_store

    return open_store(db if "://" in db else f"sqlite:///{Path(db).resolve()}", Path.cwd())


def _claim_main(db: str, team: str, first: int, count: int, out: str, ready_dir: str, procs: int) -> None:
    from subagents.teams import open_team_store

    store = open_db(db)
    try:
        ts = open_team_store(store)
        n = len(ts.tasks(team))
        Path(ready_dir, f"ready-{first}").touch()
        while len(list(Path(ready_dir).iterdir())) < procs:  # start together
            time.sleep(0.002)
        log = run_claimants(ts, team, [f"c{i}" for i in range(first, first + count)], n, seed=first)
    finally:
        store.close()
    Path(out).write_text(json.dumps(log))


def _mail_main(db: str, team: str) -> None:
    from subagents.teams import open_team_store

    store = open_db(db)
    ts = open_team_store(store)
    print("READY", flush=True)
    i = 0
    while True:
        i += 1
        m = ts.send(team, "a", ["lead", "b"], f"message {i}", time.time())
        print(f"SENT {m[0].seq} {m[1].seq}", flush=True)
        if i % 3 == 0 and (t := ts.claim_next(team, "a", time.time())) is not None:
            print(f"CLAIMED {t.id}", flush=True)
            if t.id % 2 == 0:
                ts.update_task(team, t.id, by="a", status=TaskStatus.COMPLETED, note=f"did {t.id}")
                print(f"DONE {t.id}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "claim":
        db, team, first, count, out, ready, procs = sys.argv[2:9]
        _claim_main(db, team, int(first), int(count), out, ready, int(procs))
    else:
        _mail_main(sys.argv[2], sys.argv[3])
