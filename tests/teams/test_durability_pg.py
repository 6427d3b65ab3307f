"""The PostgreSQL team store is durable: it lives in the run store's database and closes with it, its teams
survive a reopen, and a SIGKILL of a process in the middle of its work loses nothing it committed (as
``test_durability.py`` checks for SQLite)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.exceptions import StoreError
from subagents.store import RunRecord
from subagents.store.postgres import PostgresStore
from subagents.teams import open_team_store
from subagents.teams.model import LEAD, MemberRecord, MemberStatus, TaskStatus
from subagents.teams.postgres import PostgresTeamStore

WORKER = Path(__file__).parent / "team_worker.py"


def test_the_team_store_closes_with_its_run_store_and_its_teams_survive_a_reopen(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    ts = open_team_store(store)
    ts.create_team("t", "lead-run", 1.0, "durable")
    ts.add_member(MemberRecord("t", "a", "general", agent_id="run-a", status=MemberStatus.IDLE))
    ts.create_task("t", "one")
    ts.create_task("t", "two", blocked_by=[1])
    ts.claim("t", 1, "a", 2.0)
    ts.send("t", "a", [LEAD], "hello", 3.0)
    store.create_run(RunRecord(run_id="r1", agent_id="r1", nickname="n", agent_type="general", task="x",
                               status="running"))
    store.close()
    with pytest.raises(StoreError, match=r"the team store on postgresql://.* is closed"):
        ts.tasks("t")

    store = PostgresStore(pg_url)
    try:
        ts = open_team_store(store)
        assert isinstance(ts, PostgresTeamStore)
        assert ts.member("t", "a").status is MemberStatus.IDLE  # type: ignore[union-attr]
        assert [(t.id, t.status.value, t.owner, t.blocked_by) for t in ts.tasks("t")] == [
            (1, "in_progress", "a", ()), (2, "pending", None, (1,))]
        assert [(m.sender, m.text) for m in ts.unread("t", LEAD)] == [("a", "hello")]
        assert ts.create_task("t", "three").id == 3
        assert store.get_run("r1") is not None
    finally:
        store.close()


def test_a_sigkill_mid_way_loses_nothing_committed(pg_url: str) -> None:
    ts = PostgresTeamStore(pg_url)
    try:
        ts.create_team("t", "", 0.0)
        for name in ("a", "b"):
            ts.add_member(MemberRecord("t", name, "general"))
        for i in range(40):
            ts.create_task("t", f"task {i}")
    finally:
        ts.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(WORKER), "mail", pg_url, "t"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        assert proc.stdout.readline() == "READY\n", proc.stderr.read() if proc.stderr else ""
        while sum(ln.startswith("DONE") for ln in lines) < 5:  # killed in the middle of its work
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            lines.append(line)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    sent = {LEAD: [int(ln.split()[1]) for ln in lines if ln.startswith("SENT")],
            "b": [int(ln.split()[2]) for ln in lines if ln.startswith("SENT")]}
    claimed = {int(ln.split()[1]) for ln in lines if ln.startswith("CLAIMED")}
    done = {int(ln.split()[1]) for ln in lines if ln.startswith("DONE")}

    store = PostgresStore(pg_url)  # what a restart does: open the run store, then its teams
    try:
        ts = open_team_store(store)
        for name in (LEAD, "b"):
            got = ts.unread("t", name)
            assert {m.seq for m in got} >= set(sent[name])  # every message reported sent is there, unread
            texts = [m.text for m in got]
            assert texts == [f"message {i}" for i in range(1, len(texts) + 1)]  # no gap, no torn message
        tasks = {t.id: t for t in ts.tasks("t")}
        assert all(tasks[i].owner == "a" and tasks[i].status is not TaskStatus.PENDING for i in claimed)
        assert all(tasks[i].status is TaskStatus.COMPLETED and tasks[i].note == f"did {i}" for i in done)
        open_ids = sorted(i for i, t in tasks.items() if t.status is TaskStatus.IN_PROGRESS)
        assert set(open_ids) >= claimed - done
        assert ts.release_tasks("t", "a", 9.0) == open_ids  # a dead teammate's tasks go back
        assert ts.claim_next("t", "b", 10.0).id == min(open_ids)  # type: ignore[union-attr]
    finally:
        store.close()
