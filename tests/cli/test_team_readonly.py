"""``subagents team list`` and ``team show`` only read: they open the run store and the team tables in it read-only,
as the reading ``runs`` commands do (``test_runs_readonly.py``, whose harness this uses): they read a store the user
may not write, wait for no runtime writing it, never create, migrate or change a file, and refuse a file that is no
store with the same sentences.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.store._schema import SCHEMA_VERSION
from subagents.store.sqlite import SQLiteStore
from subagents.teams import open_team_store
from subagents.teams.model import MemberRecord, MemberStatus

from .readonly_harness import BAD, Shared, as_reader, bad_stores, files, found_none, here, not_own, old_store, refused
from .test_runs import KID, KID2, ROOT, seed


def seed_team(db: Path) -> None:
    """The runs of ``seed`` and team ``crew``: its lead the root run, two teammates, two tasks (one claimed), a
    message."""
    seed(db)
    s = SQLiteStore(db)
    try:
        ts = open_team_store(s)
        ts.create_team("crew", ROOT, 1.0, "count things")
        ts.add_member(MemberRecord("crew", "ann", "explore", KID, status=MemberStatus.SHUT_DOWN, joined_at=1.5))
        ts.add_member(MemberRecord("crew", "bob", "explore", KID2, status=MemberStatus.IDLE, joined_at=1.6))
        ts.create_task("crew", "count the .py lines", at=2.0)
        ts.create_task("crew", "sum the counts", blocked_by=[1], at=2.1)
        ts.claim("crew", 1, "ann", 2.2)
        ts.send("crew", "ann", ["lead"], "task 1: 10 lines", 2.3)
    finally:
        s.close()


def team(db: Path, *args: str) -> int:
    return main(["team", "--store", f"sqlite:///{db}", *args])


READS: list[tuple[list[str], int, str]] = [
    (["list"], 0, "crew"),
    (["list", "--json"], 0, '"name": "crew"'),
    (["show", "crew"], 0, "#2 sum the counts"),
    (["show", "crew", "--json", "--messages", "1"], 0, '"text": "task 1: 10 lines"'),
    (["show", "nope"], 2, "error: no team named 'nope' in this store (teams: crew)"),
]


def test_the_team_commands_read_a_store_the_user_may_not_write(shared: Shared,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Another user's store, closed, in a directory the reader may not write: `team list` and `team show` say what the
    owner sees, and the directory is exactly as it was (no -wal, -shm or migration)."""
    seed_team(shared.db)
    shared.lock()
    before = files(shared.root / "store")
    for args, code, expected in READS:
        mine = here(shared, capsys, *args, group="team")
        assert files(shared.root / "store") == before, ("the owner's read changed the store", args)
        theirs = as_reader(shared, *args, group="team")
        assert (theirs.code, theirs.out, theirs.err) == (mine.code, mine.out, mine.err), (args, theirs)
        assert theirs.code == code, (args, theirs)
        assert expected in theirs.out + theirs.err, (args, theirs)
        assert "Traceback" not in theirs.err
        assert files(shared.root / "store") == before, args


def test_the_team_commands_read_a_store_a_runtime_is_writing(shared: Shared,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A live store (its -wal and -shm are there) with a write transaction in progress: neither the owner nor another
    user waits for its write lock; both see what is committed and not what is in progress."""
    seed_team(shared.db)
    live = SQLiteStore(shared.db)
    try:
        open_team_store(live).create_team("live", ROOT, 3.0)
        assert {p.name for p in shared.db.parent.iterdir()} == {"state.db", "state.db-wal", "state.db-shm"}
        other = sqlite3.connect(shared.db, isolation_level=None, timeout=10)
        here(shared, capsys, "list", group="team")
        other.execute("BEGIN IMMEDIATE")  # holds the write lock
        other.execute("INSERT INTO teams (name, lead_id, created_at) VALUES ('uncommitted', '', 4.0)")
        for who in ("the owner", "another user"):
            if who == "another user":
                shared.lock()
            t0 = time.monotonic()
            ran = (here(shared, capsys, "list", "--json", group="team") if who == "the owner"
                   else as_reader(shared, "list", "--json", group="team"))
            assert time.monotonic() - t0 < 3, f"{who} waited for the write lock"
            assert ran.code == 0, (who, ran)
            assert [t["name"] for t in json.loads(ran.out)] == ["crew", "live"], (who, ran)
            ran = (here(shared, capsys, "show", "crew", group="team") if who == "the owner"
                   else as_reader(shared, "show", "crew", group="team"))
            assert ran.code == 0, (who, ran)
            assert "task 1: 10 lines" in ran.out, (who, ran)
        other.execute("ROLLBACK")
        other.close()
    finally:
        live.close()
    assert not_own(shared.root / "store") == set()


def test_a_store_the_user_may_not_read_is_a_clear_error(shared: Shared) -> None:
    seed_team(shared.db)
    before = files(shared.root / "store")
    shared.db.chmod(0)
    shared.db.parent.chmod(0o555)
    ran = as_reader(shared, "list", group="team")
    assert (ran.code, ran.out) == (2, ""), ran
    assert ran.err == (f"error: the run store {shared.db} cannot be read (Permission denied); ask its owner for read "
                       "access to the file and its directory, or point --store at another file\n")
    shared.db.chmod(0o644)
    shared.db.parent.chmod(0)  # a directory the user may not enter
    ran = as_reader(shared, "show", "crew", group="team")
    shared.db.parent.chmod(0o755)
    assert (ran.code, ran.out) == (2, ""), ran
    assert ran.err.startswith(f"error: the run store {shared.db} cannot be read (Permission denied)"), ran
    assert ran.err.count("\n") == 1, ran
    assert files(shared.root / "store") == before


def test_a_file_that_is_no_store_is_refused_clearly_and_left_as_it_is(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """What the reading `runs` commands say, `team` says: `list` says "No teams" when there is no store (no file, an
    empty one), `show` fails; nothing is created or changed — even where the command could write."""
    for name, db, message, nothing in bad_stores(tmp_path, BAD):
        before = files(db.parent)
        for args in (["list"], ["list", "--json"], ["show", "crew"], ["show", "crew", "--json"]):
            code = team(db, *args)
            got = capsys.readouterr()
            label, as_json = (name, args), "--json" in args
            if args[0] == "list" and nothing:
                found_none(code, got.out, got.err, message, what="teams", json_out=as_json, label=label)
            else:
                refused(code, got.out, got.err, message, json_out=as_json, label=label)
            assert files(db.parent) == before, label


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_an_older_store_is_read_as_it_is_not_migrated(version: int, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A store of an older schema: before 6 it has no team tables (no teams), from 6 on its teams are read."""
    db = tmp_path / "state.db"
    old_store(db, version)
    if version >= 6:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("INSERT INTO teams (name, lead_id, created_at, description) VALUES ('old', '', 1.0, 'kept')")
        conn.execute("INSERT INTO team_members (team, name, agent_type, status, joined_at) "
                     "VALUES ('old', 'ann', 'explore', 'idle', 1.0)")
        conn.execute("INSERT INTO tasks (team, id, subject, created_at, updated_at) VALUES ('old', 1, 'a task', 1, 1)")
        conn.close()
    before = files(tmp_path)
    assert team(db, "list", "--json") == 0
    got = json.loads(capsys.readouterr().out)
    if version < 6:
        assert got == []
        assert team(db, "list") == 0
        assert capsys.readouterr().out == "No teams.\n"
        assert team(db, "show", "old") == 2
        assert "no team named 'old' in this store (teams: none yet)" in capsys.readouterr().err
    else:
        assert [(t["name"], t["description"], t["members"], t["tasks_total"]) for t in got] == [("old", "kept", 1, 1)]
        assert team(db, "show", "old") == 0
        out = capsys.readouterr().out
        assert "#1 a task" in out
        assert "ann" in out
    assert files(tmp_path) == before
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == version
    conn.close()


def test_the_help_says_the_team_commands_only_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["team", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "read-only" in text
    assert "never create, migrate or change" in text
    for cmd in ("list", "show"):
        assert main(["team", cmd, "--help"]) == 0
        assert "Only reads the store" in " ".join(capsys.readouterr().out.split()), cmd


def test_the_team_store_of_a_reader_reads_and_refuses_writes(tmp_path: Path) -> None:
    """What `open_team_store` gives for a read-only run store: the teams on the reader's connection; every write
    refused with a StoreError; closed with the reader."""
    from subagents.exceptions import StoreError
    from subagents.store._readonly import SQLiteReader
    from subagents.teams.sqlite_reader import SQLiteTeamReader

    db = tmp_path / "state.db"
    seed_team(db)
    before = files(tmp_path)
    reader = SQLiteReader(db)
    ts = open_team_store(reader)
    assert isinstance(ts, SQLiteTeamReader)
    assert open_team_store(reader) is ts
    assert [t.name for t in ts.list_teams()] == ["crew"]
    assert [(m.name, m.status) for m in ts.members("crew")] == [("ann", MemberStatus.SHUT_DOWN),
                                                                ("bob", MemberStatus.IDLE)]
    assert [(t.id, t.owner, t.blocked_by) for t in ts.tasks("crew")] == [(1, "ann", ()), (2, None, (1,))]
    assert [m.text for m in ts.unread("crew", "lead")] == ["task 1: 10 lines"]
    for write in (lambda: ts.create_team("more", "", 1.0), lambda: ts.create_task("crew", "x"),
                  lambda: ts.send("crew", "lead", ["ann"], "hi", 1.0), lambda: ts.mark_read("crew", "lead", 1)):
        with pytest.raises(StoreError, match="was opened only to read it"):
            write()
    reader.close()
    with pytest.raises(StoreError, match="is closed"):
        ts.list_teams()
    assert files(tmp_path) == before
