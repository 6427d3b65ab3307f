"""SQLiteStore specifics: clear errors, migrations, group commit, writer failures."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from subagents.exceptions import StoreError
from subagents.messages import Message
from subagents.store import RunRecord, open_store
from subagents.store._lease import Lease
from subagents.store._schema import _MIGRATIONS, SCHEMA_VERSION, V1_SCHEMA
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str, **kw: object) -> RunRecord:
    d: dict[str, object] = {"nickname": "n", "agent_type": "explore", "task": "t", **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, **d)  # type: ignore[arg-type]


def test_wal_mode_and_schema_version(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "a" / "state.db")
    s.close()
    conn = sqlite3.connect(tmp_path / "a" / "state.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_the_default_store_is_sqlite_under_the_workspace(tmp_path: Path) -> None:
    s = open_store(None, tmp_path)
    try:
        assert isinstance(s, SQLiteStore)
        assert s.path == tmp_path / ".subagents" / "state.db"
    finally:
        s.close()


def test_a_corrupt_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    p.write_bytes(b"this is not a database at all, just some text that fills a page" * 100)
    with pytest.raises(StoreError) as e:
        SQLiteStore(p)
    assert str(e.value) == (
        f"the run store {p} is corrupt or not a SQLite database (file is not a database); move it aside "
        f"(mv {p} {p}.bad) to start a new store, or restore it from a backup")


def test_a_locked_database_is_refused_with_what_to_do(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    SQLiteStore(p).close()
    holder = sqlite3.connect(p, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreError) as e:
            SQLiteStore(p, timeout=0.05)
        assert str(e.value) == (
            f"the run store {p} is locked by another process (database is locked) while opening it; stop the "
            "other subagents process that holds it, or point [store] url at another file")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_an_unwritable_place_is_refused_with_what_to_do(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = blocker / "state.db"
    with pytest.raises(StoreError) as e:
        SQLiteStore(p)
    assert str(e.value).startswith(f"cannot create the directory of the run store {p} (")
    assert str(e.value).endswith("); create it, or point [store] url at a writable path")


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    conn = sqlite3.connect(p)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError) as e:
        SQLiteStore(p)
    assert str(e.value) == (f"the run store {p} has schema version 99, newer than the {SCHEMA_VERSION} this "
                            "subagents understands; upgrade subagents, or point [store] url at another file")


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(StoreError) as e:
        SQLiteStore(p)
    assert str(e.value) == (f"the run store {p} is a SQLite database but not a subagents store; "
                            "point [store] url at another file")


def test_a_refused_file_is_left_as_it_is(tmp_path: Path) -> None:
    """A newer store and a foreign database in SQLite's rollback-journal mode: refused before the store would switch
    them to WAL mode (which rewrites the file's header and leaves -wal and -shm files)."""
    for name, sql in (("newer", "PRAGMA user_version = 99"), ("foreign", "CREATE TABLE t (x)")):
        p = tmp_path / name / "state.db"
        p.parent.mkdir()
        conn = sqlite3.connect(p)
        conn.execute(sql)
        conn.commit()
        conn.close()
        before = p.read_bytes()
        with pytest.raises(StoreError):
            SQLiteStore(p)
        assert p.read_bytes() == before, name
        assert sorted(x.name for x in p.parent.iterdir()) == ["state.db"], name


def test_migrates_a_version_1_store_forward_keeping_its_data(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    conn = sqlite3.connect(p, isolation_level=None)
    conn.executescript(V1_SCHEMA)
    conn.execute("INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, created_at, usage) "
                 "VALUES ('old', 'old', 'explore-ada', 'explore', 'scan', 'completed', 1.0, '{\"input_tokens\": 7}')")
    conn.execute("INSERT INTO transcript VALUES ('old', 0, ?)",
                 ('{"role":"user","content":[{"kind":"text","text":"hi"}]}',))
    conn.execute("INSERT INTO announcements VALUES ('old:1', 'p', 'old', 'done', 2.0, NULL)")
    conn.close()
    s = SQLiteStore(p)
    try:
        assert s.migrated_from == 1
        got = s.get_run("old")
        assert got == rec("old", nickname="explore-ada", task="scan", status="completed", created_at=1.0,
                          usage={"input_tokens": 7}, runs=0, owner="")
        assert s.transcript("old") == [Message.user("hi")]
        assert [a.id for a in s.pending_announcements()] == ["old:1"]
        s.renew_lease(s.owner, 3.0, 33.0)  # a v2 table with v4 columns
        s.add_audit("old", "approval", {"tool": "bash", "decision": "allowed once"}, 4.0)  # a v3 table
        s.flush()
        assert s.lease(s.owner) == Lease(s.owner, 3.0, 33.0, "")
        assert [(a.kind, a.data["tool"]) for a in s.audit_of("old")] == [("approval", "bash")]
        assert s.get_run("old").permission_mode == ""  # type: ignore[union-attr]
    finally:
        s.close()
    conn = sqlite3.connect(p)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_migrating_a_version_3_store_turns_heartbeats_into_leases(tmp_path: Path) -> None:
    """v3 -> v4: a heartbeat row becomes a lease that expires 60 s after it (what it was trusted for)."""
    p = tmp_path / "state.db"
    conn = sqlite3.connect(p, isolation_level=None)
    conn.executescript(V1_SCHEMA)
    for v in (1, 2):
        conn.executescript(_MIGRATIONS[v])
    conn.execute("INSERT INTO owners (owner, heartbeat) VALUES ('h:1:old', 100.0)")
    conn.close()
    s = SQLiteStore(p)
    try:
        assert s.migrated_from == 3
        assert s.lease("h:1:old") == Lease("h:1:old", 100.0, 160.0, "")
    finally:
        s.close()


def test_reads_see_writes_after_flush_and_survive_reopen(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    s = SQLiteStore(p)
    s.create_run(rec("r1"))
    for i in range(200):
        s.append_messages("r1", i, [Message.user(str(i))])
    s.update_run("r1", {"status": "running"})
    s.flush()
    assert len(s.transcript("r1")) == 200
    s.close()
    s2 = SQLiteStore(p)
    try:
        got = s2.get_run("r1")
        assert got is not None
        assert got.status == "running"
        assert [m.text for m in s2.transcript("r1")][-2:] == ["198", "199"]
    finally:
        s2.close()


def test_a_writer_failure_surfaces_on_the_next_call(tmp_path: Path) -> None:
    p = tmp_path / "state.db"
    s = SQLiteStore(p, timeout=0.05)
    s.create_run(rec("r1"))
    s.flush()
    holder = sqlite3.connect(p, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        s.update_run("r1", {"status": "running"})
        with pytest.raises(StoreError) as e:
            s.flush()
        assert str(e.value) == (
            f"the run store {p} is locked by another process (database is locked) while writing to it; stop the "
            "other subagents process that holds it, or point [store] url at another file")
        with pytest.raises(StoreError):
            s.update_run("r1", {"status": "completed"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        with pytest.raises(StoreError):
            s.close()


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError) as e:
        s.create_run(rec("r1"))
    assert str(e.value) == f"the run store {tmp_path / 'state.db'} is closed; open a new Runtime to use it"


def test_the_fast_message_encoder_matches_the_serializer() -> None:
    import json

    from subagents.messages import TextBlock, ToolResultBlock, ToolUseBlock, message_to_dict
    from subagents.store._batch import message_json

    msgs = [Message.user('hi ü "quoted"\n\ttab \u2028'),
            Message("assistant", [TextBlock("t"), ToolUseBlock("t1", "grep", {"pattern": "a\\b", "n": [1, None]})]),
            Message("user", [ToolResultBlock("t1", "ok"), ToolResultBlock("t2", "bad", is_error=True)]),
            Message("assistant", [])]
    assert [json.loads(message_json(m)) for m in msgs] == [message_to_dict(m) for m in msgs]


def test_text_that_is_not_utf8_is_a_store_error_saying_what_to_do(tmp_path: Path) -> None:
    # A store that came with a project (or was damaged) can hold bytes that are not UTF-8 in a text column; the
    # error said "run 'subagents runs list' to check it", and runs list failed the same way.
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    s.create_run(rec("r1"))
    s.close()
    with contextlib.closing(sqlite3.connect(db)) as c, c:  # (closed: 3.13 warns)
        c.execute("UPDATE runs SET nickname = CAST(x'ff' AS TEXT) WHERE run_id = 'r1'")
    c.close()
    s = SQLiteStore(db)
    try:
        with pytest.raises(StoreError, match=r"holds text that is not UTF-8 .*move it aside \(mv "):
            s.get_run("r1")
    finally:
        s.close()
