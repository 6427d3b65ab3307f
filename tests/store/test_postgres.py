"""What the PostgreSQL store adds to the contract (tests/store/test_contract.py runs that on it too): opening by
URL, the schema and its version, errors that say what to do, owner leases and claims shared between store
objects (machines), and a Runtime end to end with ``subagents runs --store URL``."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pg
from subagents import Runtime
from subagents.cli.main import main
from subagents.config import user_config_dir
from subagents.exceptions import StoreError
from subagents.messages import Message
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.recovery import is_orphaned
from subagents.store import RunRecord, open_store
from subagents.store._pg_schema import SCHEMA_VERSION
from subagents.store._pg_support import describe
from subagents.store.postgres import PostgresStore
from subagents.teams import open_team_store
from subagents.teams.model import MemberRecord
from subagents.teams.postgres import PostgresTeamStore
from subagents.trust import add_trusted


def run(run_id: str, owner: str = "", **kw: object) -> RunRecord:
    d: dict[str, object] = {"task": "do it", "status": "running", "owner": owner, "root_id": run_id, "runs": 1,
                            "created_at": 1.0, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"nick-{run_id}", agent_type="general-purpose",
                     **d)  # type: ignore[arg-type]


def test_open_store_dispatches_postgres_urls_and_the_schema_is_created_once(pg_url: str, tmp_path: Path) -> None:
    s = open_store(pg_url, tmp_path)
    try:
        assert isinstance(s, PostgresStore)
        assert s.migrated_from == 0
        s.create_run(run("r1"))
        s.flush()
    finally:
        s.close()
    again = PostgresStore(pg_url.replace("postgresql://", "postgres://", 1))
    try:
        assert again.migrated_from == SCHEMA_VERSION  # found current: nothing to do
        assert again.get_run("r1") is not None
    finally:
        again.close()
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT version FROM subagents_schema").fetchall() == [(SCHEMA_VERSION,)]


def test_stores_opening_a_new_database_at_once_create_the_schema_once(pg_url: str) -> None:
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def opener() -> None:
        start.wait()
        try:
            stores.append(PostgresStore(pg_url))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert sorted(s.migrated_from for s in stores) == [0, SCHEMA_VERSION, SCHEMA_VERSION, SCHEMA_VERSION]
    finally:
        for s in stores:
            s.close()


def test_a_newer_schema_and_a_foreign_runs_table_are_refused(pg_url: str, pg_server: pg.PgServer) -> None:
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("UPDATE subagents_schema SET version = 99")
    with pytest.raises(StoreError) as e:
        PostgresStore(pg_url)
    assert f"has schema version 99, newer than the {SCHEMA_VERSION} this subagents understands; upgrade" in str(e.value)
    other = pg_server.new_database()
    try:
        with psycopg.connect(other, autocommit=True) as c:
            c.execute("CREATE TABLE runs (id int)")
        with pytest.raises(StoreError, match="holds a 'runs' table that is not a subagents store; point"):
            PostgresStore(other)
    finally:
        pg_server.drop_database(other)


def test_an_unreachable_server_is_an_error_that_says_what_to_do(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://alice:s3cret@/subagents?host={tmp_path}&port=1"  # no server on that socket
    with pytest.raises(StoreError) as e:
        PostgresStore(url, timeout=2)
    msg = str(e.value)
    assert msg.startswith(f"cannot reach the PostgreSQL run store postgresql://alice@/subagents (socket "
                          f"{tmp_path}/.s.PGSQL.1) (")
    assert "check that the server runs" in msg
    assert "s3cret" not in msg
    assert main(["runs", "--store", url, "list"]) != 0  # the CLI says it, without a traceback
    err = capsys.readouterr().err
    assert "cannot reach the PostgreSQL run store" in err
    assert "Traceback" not in err
    assert "s3cret" not in err


def test_describe_never_shows_the_password() -> None:
    assert describe("postgresql://bob:pw@db.example:5433/runs?sslmode=require") == "postgresql://bob@db.example:5433/runs"
    assert describe("postgresql:///runs") == "postgresql://localhost/runs"


def test_a_failed_write_is_kept_and_raised_by_every_later_call(pg_url: str) -> None:
    s = PostgresStore(pg_url)
    try:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute("DROP TABLE audit")
        s.add_audit("r1", "denied", {}, 1.0)
        with pytest.raises(StoreError, match=r'failed while writing to it .*relation "audit" does not exist'):
            s.flush()
        with pytest.raises(StoreError, match="failed while writing"):
            s.get_run("r1")
    finally:
        with pytest.raises(StoreError):
            s.close()


def test_back_pressure_keeps_the_backlog_bounded_and_loses_nothing(pg_url: str) -> None:
    s = PostgresStore(pg_url, max_backlog=8)
    try:
        for i in range(200):
            s.create_run(run(f"r{i:03}"))
            s.append_messages(f"r{i:03}", 0, [Message.user(f"task {i}")])
            assert s._w.backlog <= 8
        s.flush()
        assert len(s.list_runs()) == 200
        assert s.transcript("r199") == [Message.user("task 199")]
    finally:
        s.close()


# -- owner leases across machines: two store objects stand for two runtimes ----------------------------------
def test_a_lease_is_written_with_the_first_run_renewed_and_released_on_close(pg_url: str) -> None:
    a = PostgresStore(pg_url, lease_s=3.0, renew_s=0.1)
    b = PostgresStore(pg_url)
    try:
        a.create_run(run("r"))
        a.flush()
        first = b.lease(a.owner)
        assert first is not None
        assert first.expires_at - first.renewed_at == pytest.approx(3.0)
        deadline = time.monotonic() + 5
        while (now := b.lease(a.owner)) is not None and now.renewed_at == first.renewed_at:
            assert time.monotonic() < deadline, "the writer never renewed the lease"
            time.sleep(0.05)
        assert not is_orphaned(b, run("r", a.owner), time.time())
        a.close()
        assert b.lease(a.owner) is None
        assert is_orphaned(b, run("r", a.owner), time.time())
    finally:
        a.close()
        b.close()


def test_of_claimants_racing_for_orphans_exactly_one_gets_each(pg_url: str) -> None:
    dead = "gone-host:4242:0123456789abcdef"  # another machine: only its (expired) lease tells
    seed = PostgresStore(pg_url)
    try:
        for i in range(60):
            seed.create_run(run(f"o{i:02}", dead))
        seed.renew_lease(dead, time.time() - 90, time.time() - 60, "")
        seed.flush()
    finally:
        seed.close()
    stores = [PostgresStore(pg_url) for _ in range(3)]
    got: list[set[str]] = [set() for _ in stores]
    start = threading.Barrier(len(stores))
    ids = [f"o{i:02}" for i in range(60)]

    def claimer(k: int) -> None:
        order = ids[k::1] + ids[:k]  # different orders: the store locks in one order, so no deadlock
        start.wait()
        for i in range(0, 60, 7):
            got[k] |= stores[k].claim_runs({rid: dead for rid in order[i:i + 7]})

    threads = [threading.Thread(target=claimer, args=(k,)) for k in range(len(stores))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(set().union(*got)) == ids
        assert sum(map(len, got)) == 60  # nobody got one twice
        owners = {r.run_id: r.owner for r in stores[0].list_runs()}
        for s, mine in zip(stores, got, strict=True):
            assert {rid for rid, o in owners.items() if o == s.owner} == mine
            if mine:
                lease = stores[0].lease(s.owner)
                assert lease is not None
                assert lease.expires_at > time.time()  # claimed with its lease
        assert stores[1].claim_runs({"o00": dead}) == set()  # moved on: the expected owner is gone
    finally:
        for s in stores:
            s.close()


@pytest.mark.timeout(30)
async def test_a_dead_machines_runs_are_finished_by_another_runtime(pg_url: str, tmp_path: Path) -> None:
    dead = "gone-host:4242:fedcba9876543210"
    s = PostgresStore(pg_url)
    try:
        s.create_run(run("theirs", dead))
        s.append_messages("theirs", 0, [Message.user("finish it")])
        s.renew_lease(dead, time.time() - 90, time.time() - 60, "")
    finally:
        s.close()
    async with Runtime(model=FunctionModel(lambda req: "recovered"), workdir=tmp_path, store=pg_url,
                       builtin_tools=False) as rt:
        done = await rt.wait(["theirs"], timeout=10)
        assert done["theirs"].text == "recovered"
        rt.store.flush()
        assert rt.store.get_run("theirs").owner == rt.store.owner  # type: ignore[union-attr]


# -- the team store goes with the run store -----------------------------------------------------------------
def test_open_team_store_gives_the_postgres_team_store_closed_with_the_run_store(pg_url: str) -> None:
    s = PostgresStore(pg_url)
    ts = open_team_store(s)
    assert isinstance(ts, PostgresTeamStore)
    assert open_team_store(s) is ts
    ts.create_team("t", "lead", 1.0)
    s.close()
    with pytest.raises(StoreError, match="is closed; open the run store again"):
        ts.list_teams()
    other = PostgresTeamStore(pg_url)
    try:
        assert [t.name for t in other.list_teams()] == ["t"]
    finally:
        other.close()


# -- end to end: a Runtime on PostgreSQL, and the CLI reading the same database -----------------------------
def _parent_with_a_background_child() -> FunctionModel:
    async def fn(req: ModelRequest) -> ModelResponse:
        n = len(req.messages)
        if req.agent.depth == 1:
            await asyncio.sleep(0.05)
            return ModelResponse(text="the child counted 3 files")
        if n == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "explore", "prompt": "count the files", "description": "count",
                "background": True})], stop_reason="tool_use")
        if n == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {})], stop_reason="tool_use")
        return ModelResponse(text="the root is done")

    return FunctionModel(fn)


async def test_a_runtime_on_postgres_and_runs_list_from_another_process_view(
        pg_url: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with Runtime(model=_parent_with_a_background_child(), workdir=workdir, store=pg_url) as rt:
        assert isinstance(rt.store, PostgresStore)
        result = await rt.run("count the files with a helper")
        assert result.text == "the root is done"
        child = next(a for a in rt.agents() if a.depth == 1)
    s = PostgresStore(pg_url)
    try:
        recs = s.list_runs()
        assert [(r.depth, r.status, r.background) for r in recs] == [(0, "completed", False),
                                                                     (1, "completed", True)]
        root, kid = recs
        assert (root.run_id, kid.run_id, kid.parent_id) == (result.id, child.id, result.id)
        assert [a.id for a in s.announcements_of(parent_id=root.run_id)] == [f"{kid.run_id}:1"]
        assert s.pending_announcements() == []  # delivered to the parent
        assert s.transcript(kid.run_id)[-1] == Message.assistant("the child counted 3 files")
    finally:
        s.close()
    assert main(["runs", "--store", pg_url, "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["ID", "NICKNAME", "TYPE", "STATUS"]
    assert [(ln.split()[2], ln.split()[3]) for ln in out[1:]] == [("general-purpose", "completed"),
                                                                  ("explore", "completed")]
    assert main(["runs", "--store", pg_url, "tree", root.run_id]) == 0
    assert kid.nickname in capsys.readouterr().out


def test_a_server_restart_is_survived_by_the_writer_the_reads_and_the_team_store(
        pg_url: str, pg_server: pg.PgServer) -> None:
    s = PostgresStore(pg_url)
    try:
        ts = open_team_store(s)
        ts.create_team("t", "lead", 1.0)
        s.create_run(run("before"))
        s.flush()
        assert s.get_run("before") is not None
        pg_server.restart()  # every connection of the store is dropped
        s.create_run(run("after"))
        s.append_messages("after", 0, [Message.user("hi")])
        s.flush()
        assert s._w.reconnects == 1
        assert [r.run_id for r in s.list_runs()] == ["before", "after"]
        assert s.transcript("after") == [Message.user("hi")]
        assert [t.name for t in ts.list_teams()] == ["t"]
    finally:
        s.close()


def test_a_nul_in_text_is_stored_as_a_replacement_character_not_a_failed_batch(pg_url: str) -> None:
    s = PostgresStore(pg_url)
    try:
        s.create_run(run("r", task="read a\x00b"))
        s.append_messages("r", 0, [Message.user("binary \x00 output")])
        s.finish_run("r", {"status": "completed", "result_text": "got \x00"}, None)
        s.add_request("r", "cancel", "stop\x00", 1.0)
        s.flush()
        got = s.get_run("r")
        assert got is not None
        assert (got.task, got.result_text) == ("read a\ufffdb", "got \ufffd")
        assert s.transcript("r") == [Message.user("binary \x00 output")]  # the transcript keeps it (JSON-escaped)
        assert [q.message for q in s.take_requests(s.owner, 2.0)] == ["stop\ufffd"]
        ts = open_team_store(s)
        ts.create_team("t", "lead", 1.0)
        ts.add_member(MemberRecord("t", "a", "general"))
        assert ts.send("t", "lead", ["a"], "hi\x00", 1.0)[0].text == "hi\ufffd"
        assert ts.create_task("t", "do\x00it").subject == "do\ufffdit"
        assert [m.text for m in ts.unread("t", "a")] == ["hi\ufffd"]
    finally:
        s.close()


def test_store_url_in_the_project_config_selects_postgres(pg_url: str, workdir: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / ".subagents").mkdir()
    (workdir / ".subagents" / "config.toml").write_text(f'[store]\nurl = "{pg_url}"\n', encoding="utf-8")
    add_trusted(workdir, user_config_dir())  # a store address from a project needs trust
    s = PostgresStore(pg_url)
    try:
        s.create_run(run("019ab000-0000-7000-8000-0000aaaa1111", status="completed"))
    finally:
        s.close()
    assert main(["runs", "--cwd", str(workdir), "list", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["019ab000-0000-7000-8000-0000aaaa1111"]
    assert not (workdir / ".subagents" / "state.db").exists()  # no SQLite store was made on the side


async def test_group_commit_writes_made_while_the_writer_is_busy_go_in_one_transaction(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from subagents.store._pg_support import PgWriter

    commits: list[int] = []
    release = threading.Event()
    real = PgWriter._send

    def slow(self: PgWriter, calls: list[Any]) -> None:
        if not commits:
            release.wait(5)  # the first transaction takes long
        commits.append(len(calls))
        real(self, calls)

    monkeypatch.setattr(PgWriter, "_send", slow)
    s = PostgresStore(pg_url, linger_s=0.001)
    try:
        s.create_run(run("first"))
        await asyncio.sleep(0.02)  # handed over: the writer is busy with it
        for i in range(20):  # each after the batching delay: without group commit, 20 small batches
            s.update_run("first", {"turns": i})
            s.create_run(run(f"r{i:02}"))
            await asyncio.sleep(0.003)
        assert commits == []
        release.set()
        await asyncio.to_thread(s.flush)
        assert commits[0] <= 3  # the lease, the prompt, the run
        assert len(commits) == 2, commits
        assert commits[1] <= 3, commits  # one folded batch: one insert of 20 runs, one update (not 20 of each)
        got = s.get_run("first")
        assert got is not None
        assert (len(s.list_runs()), got.turns) == (21, 19)
    finally:
        release.set()
        s.close()


def test_the_tables_have_every_column_of_the_sqlite_schema(pg_url: str) -> None:
    """A column added to SQLite's schema (``_schema.RUN_COLUMNS``) needs a PostgreSQL migration too."""
    import sqlite3

    from subagents.store._schema import RUN_COLUMNS
    from subagents.store.sqlite import SQLiteStore

    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url) as c:
        pg_cols = {(t, col) for t, col in c.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'")}
    assert {("runs", col) for col in RUN_COLUMNS} <= pg_cols
    with tempfile.TemporaryDirectory() as d:
        SQLiteStore(Path(d) / "s.db").close()
        conn = sqlite3.connect(Path(d) / "s.db")
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                 "AND name NOT LIKE 'sqlite_%'")]
            sqlite_cols = {(t, r[1]) for t in tables for r in conn.execute(f'PRAGMA table_info("{t}")')}
        finally:
            conn.close()
    missing = sorted(sqlite_cols - pg_cols)
    assert missing == [], f"add these to a PostgreSQL migration (subagents/store/_pg_schema.py): {missing}"


def test_a_store_is_migrated_forward_keeping_its_data(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from subagents.store import _pg_schema

    s = PostgresStore(pg_url)
    try:
        s.create_run(run("kept"))
    finally:
        s.close()
    later = (*_pg_schema.MIGRATIONS, "ALTER TABLE runs ADD COLUMN extra TEXT NOT NULL DEFAULT 'v2'")
    monkeypatch.setattr(_pg_schema, "MIGRATIONS", later)
    monkeypatch.setattr(_pg_schema, "SCHEMA_VERSION", len(later))
    s = PostgresStore(pg_url)
    try:
        assert s.migrated_from == len(later) - 1
        assert s.get_run("kept") is not None
    finally:
        s.close()
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT version FROM subagents_schema").fetchall() == [(len(later),)]
        assert c.execute("SELECT extra FROM runs").fetchall() == [("v2",)]


def test_a_batch_the_server_rolls_back_is_sent_again(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadlock with another machine's transaction (or a serialization failure) rolls the whole batch back:
    the writer sends it again instead of failing; and it is reported as such, not as an unreachable server."""
    from subagents.store._pg_support import PgWriter, pg_error

    real = PgWriter._send
    failures = [psycopg.errors.DeadlockDetected("deadlock detected")]

    def flaky(self: PgWriter, calls: list[Any]) -> None:
        if failures:
            raise failures.pop()
        real(self, calls)

    monkeypatch.setattr(PgWriter, "_send", flaky)
    s = PostgresStore(pg_url)
    try:
        s.create_run(run("r"))
        s.flush()
        assert failures == []
        assert s.get_run("r") is not None
    finally:
        s.close()
    msg = str(pg_error(pg_url, psycopg.errors.DeadlockDetected("deadlock detected"), "writing to it"))
    assert msg.startswith("the PostgreSQL run store postgresql://postgres@/")
    assert "failed while writing to it (deadlock detected)" in msg
