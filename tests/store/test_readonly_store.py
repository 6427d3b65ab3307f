"""``SQLiteReader`` (``store/_readonly.py``): reads a SQLite store without writing anything — an older schema as the
migrated store would read, a store left by a killed process, a closed store that a runtime opens while it reads —
and refuses every write.  The CLI side (another user, read-only files): ``tests/cli/test_runs_readonly.py``."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from subagents.exceptions import StoreError
from subagents.messages import Message
from subagents.store import RunRecord
from subagents.store._readonly import NoStoreFile, SQLiteReader
from subagents.store._schema import _MIGRATIONS, SCHEMA_VERSION, _statements
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str, **kw: object) -> RunRecord:
    d: dict[str, object] = {"agent_type": "explore", "task": "t", "status": "completed", "created_at": 1.0, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"explore-{run_id}", **d)  # type: ignore[arg-type]


def state(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def test_every_write_is_refused_and_nothing_is_waited_for(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    s.create_run(rec("a"))
    s.close()
    before = state(tmp_path)
    r = SQLiteReader(db)
    try:
        assert [x.run_id for x in r.list_runs()] == ["a"]
        writes: list[Callable[[], object]] = [
            lambda: r.create_run(rec("b")), lambda: r.update_run("a", {"status": "errored"}),
            lambda: r.append_messages("a", 0, [Message.user("x")]), lambda: r.delete_run("a"),
            lambda: r.add_request("a", "cancel", "", 1.0), lambda: r.take_requests("o", 1.0),
            lambda: r.claim_runs({"a": ""}), lambda: r.renew_lease("o", 1.0, 2.0)]
        for write in writes:
            with pytest.raises(StoreError, match="was opened only to read it"):
                write()
        assert r.on_commit(lambda: None) is False
        r.flush()
        r.hurry()
        asyncio.run(r.room())
    finally:
        r.close()
    assert state(tmp_path) == before
    with pytest.raises(StoreError, match="is closed"):
        r.list_runs()


def _old(db: Path, version: int) -> None:
    """A store of schema ``version``: runs, a transcript, an announcement, a heartbeat/lease and audit entries where
    that schema has them."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for v in range(version):
        for stmt in _statements(_MIGRATIONS[v]):
            conn.execute(stmt)
    conn.execute("INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, created_at, usage, "
                 "system_prompt, parent_id, root_id) VALUES ('p', 'p', 'gp-ada', 'general-purpose', 'go', 'running', "
                 "1.0, '{\"input_tokens\": 7}', 'be brief', NULL, NULL)")
    conn.execute("INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, outcome, created_at, "
                 "ended_at, parent_id, root_id, result_text) VALUES ('c', 'c', 'explore-ada', 'explore', 'scan', "
                 "'completed', 'ok', 1.0, 2.0, 'p', 'p', 'found it')")
    conn.execute("INSERT INTO transcript VALUES ('c', 0, ?)",
                 ('{"role":"user","content":[{"kind":"text","text":"hi"}]}',))
    conn.execute("INSERT INTO announcements VALUES ('c:1', 'p', 'c', 'done', 2.0, NULL)")
    if version >= 2:
        conn.execute("UPDATE runs SET owner = 'h:1:old', runs = 1")
        conn.execute("INSERT INTO owners (owner, heartbeat) VALUES ('h:1:old', 100.0)")
    if version >= 3:
        conn.execute("INSERT INTO audit (run_id, at, kind, data) VALUES ('c', 3.0, 'denied', '{\"tool\": \"bash\"}')")
    if version >= 5:
        conn.execute("INSERT INTO prompts VALUES ('k', 'shared prompt', 1)")
        conn.execute("UPDATE runs SET prompt_key = 'k', system_prompt = '' WHERE run_id = 'c'")
    conn.close()


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_an_older_store_reads_as_the_migrated_store_would(version: int, tmp_path: Path) -> None:
    """The reader's views of an older schema give what the same store, migrated, gives — and the file stays old."""
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old, new = tmp_path / "old" / "state.db", tmp_path / "new" / "state.db"
    _old(old, version)
    shutil.copy(old, new)
    before = state(old.parent)
    r, s = SQLiteReader(old), SQLiteStore(new)
    try:
        assert (r.schema_version, s.migrated_from) == (version, version)
        for read in (lambda x: [v.to_dict() for v in x.list_runs(include_archived=True)],
                     lambda x: x.get_run("c"), lambda x: x.transcript("c"), lambda x: x.child_ids("p"),
                     lambda x: x.pending_announcements("p"), lambda x: x.announcements_of(child_id="c"),
                     lambda x: x.audit_of("c"), lambda x: x.lease("h:1:old"), lambda x: x.root_nicknames("explore"),
                     lambda x: [v.run_id for v in x.cleanup_candidates(10.0)],
                     lambda x: [v.run_id for v in x.cleanup_candidates(10.0, limit=5)]):
            assert read(r) == read(s)
    finally:
        r.close()
        s.close()
    assert state(old.parent) == before


def _killed_writer(db: Path) -> None:
    """A process that committed a run, then was SIGKILLed: its -wal and -shm stay next to the store."""
    code = ("import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('PRAGMA wal_autocheckpoint=0')\n"
            "c.execute(\"INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, created_at) "
            "VALUES ('late', 'late', 'explore-late', 'explore', 't', 'running', 5.0)\")\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline() == "ready\n"
    finally:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


def test_a_store_left_by_a_killed_process(tmp_path: Path) -> None:
    """Its -wal holds a committed run: read with it; without the -shm (only a writer may rebuild it) a clear refusal —
    and in neither case a file created or changed, though the directory is writable."""
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    s.create_run(rec("a"))
    s.close()
    _killed_writer(db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db", "state.db-shm", "state.db-wal"]
    db_and_wal = {k: v for k, v in state(tmp_path).items() if k != "state.db-shm"}
    r = SQLiteReader(db)
    try:
        assert [x.run_id for x in r.list_runs()] == ["a", "late"]
    finally:
        r.close()
    assert {k: v for k, v in state(tmp_path).items() if k != "state.db-shm"} == db_and_wal  # (-shm: SQLite's index)
    (tmp_path / "state.db-shm").unlink()
    with pytest.raises(StoreError, match=r"was left by a process that stopped without closing it: .*state\.db-wal "
                                         "holds committed writes"):
        SQLiteReader(db)
    assert state(tmp_path) == db_and_wal


def test_a_closed_store_is_read_again_once_a_runtime_opens_and_changes_it(tmp_path: Path) -> None:
    """Opened with nothing but the file (an unlocked snapshot), the reader sees a writer's commits: while the writer
    is open (its -wal appeared) and after it closed (the file changed)."""
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    s.create_run(rec("a"))
    s.close()
    r = SQLiteReader(db)
    try:
        assert [x.run_id for x in r.list_runs()] == ["a"]
        s = SQLiteStore(db)
        s.create_run(rec("b"))
        s.flush()
        assert [x.run_id for x in r.list_runs()] == ["a", "b"]
        s.create_run(rec("c"))
        s.flush()
        assert [x.run_id for x in r.list_runs()] == ["a", "b", "c"]
        s.close()
        s = SQLiteStore(db)
        s.update_run("c", {"status": "errored"})
        s.close()
        got = r.get_run("c")
        assert got is not None
        assert got.status == "errored"
    finally:
        r.close()


def test_no_store_and_what_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(NoStoreFile, match="there is no run store yet at"):
        SQLiteReader(tmp_path / "none.db")
    (tmp_path / "empty.db").write_bytes(b"")
    with pytest.raises(NoStoreFile, match=r"is an empty file \(0 bytes\)"):
        SQLiteReader(tmp_path / "empty.db")
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="is a directory, not a file"):
        SQLiteReader(tmp_path / "dir.db")
    (tmp_path / "short.db").write_bytes(b"SQLite")
    with pytest.raises(StoreError, match="is corrupt or not a SQLite database"):
        SQLiteReader(tmp_path / "short.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.db", "empty.db", "short.db"]
