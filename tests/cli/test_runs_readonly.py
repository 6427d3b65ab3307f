"""The ``runs`` commands that only read open the store read-only: they read a store the user may not write (another
user's, a read-only mount), never create, migrate or change one, and refuse a file that is no store with a sentence.

"Cannot write" is real here: as root (the CI) the reader is a forked child that drops to the user ``nobody`` (root
ignores file modes); as anyone else the store file is mode 0444 in a 0555 directory (``readonly_harness.py``).  What the
commands import lazily is imported first, by running them once as the test's own user.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.messages import Message
from subagents.store._schema import SCHEMA_VERSION
from subagents.store.sqlite import SQLiteStore

from .readonly_harness import (
    BAD,
    Reader,
    Shared,
    as_reader,
    bad_stores,
    files,
    found_none,
    here,
    not_own,
    old_store,
    refused,
    unprivileged,
)
from .test_runs import KID2, ROOT, rec, seed

READS: list[tuple[list[str], int, str]] = [
    (["list"], 0, "general-purpose-ada"),
    (["list", "--all", "--json"], 0, f'"run_id": "{KID2}"'),
    (["show", "explore-ada"], 0, "explore-ada says hi"),
    (["show", "aaaa1111", "--json"], 0, f'"run_id": "{ROOT}"'),
    (["tree", "1111"], 0, "total: 3 agents"),
    (["tail", "explore-ada"], 0, "assistant: explore-ada says hi\n-- status: completed / ok\n"),
    (["tail", "explore-grace", "--no-follow"], 0, "-- status: running\n"),
    (["wait", "explore-ada"], 0, "explore-ada completed/ok\n"),
    (["wait", "explore-grace"], 1, "the process that ran it is gone"),  # read its (absent) lease
    (["show", "zzzz"], 2, "error: no run matches 'zzzz'"),
    (["approvals", "explore-ada"], 2, "approvals are answered through the Temporal engine"),  # the run was read
]


def test_every_reading_command_reads_a_store_the_user_may_not_write(shared: Shared,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Another user's store, closed (no -wal or -shm next to it), in a directory the reader may not write: each
    reading command says what the owner sees, and the directory is exactly as it was."""
    seed(shared.db)
    assert sorted(p.name for p in shared.db.parent.iterdir()) == ["state.db"]
    shared.lock()
    before = files(shared.root / "store")
    for args, code, expected in READS:
        mine = here(shared, capsys, *args)  # (also imports what the command needs before the child drops rights)
        theirs = as_reader(shared, *args)
        assert (theirs.code, theirs.out, theirs.err) == (mine.code, mine.out, mine.err), args
        assert theirs.code == code, (args, theirs)
        assert expected in theirs.out + theirs.err, (args, theirs)
        assert "Traceback" not in theirs.err
        assert files(shared.root / "store") == before, args
    page = shared.root / "out" / "tree.html"
    ran = as_reader(shared, "timeline", "general-purpose-ada", "--html", str(page))
    assert (ran.code, ran.err) == (0, ""), ran
    assert "explore-grace" in page.read_text(encoding="utf-8")
    assert files(shared.root / "store") == before


def test_a_store_the_user_may_not_read_is_a_clear_error(shared: Shared) -> None:
    seed(shared.db)
    before = files(shared.root / "store")
    shared.db.chmod(0)
    shared.db.parent.chmod(0o555)
    ran = as_reader(shared, "list")
    shared.unlock()
    assert (ran.code, ran.out) == (2, ""), ran
    assert ran.err == (f"error: the run store {shared.db} cannot be read (Permission denied); ask its owner for read "
                       "access to the file and its directory, or point --store at another file\n")
    shared.db.parent.chmod(0)  # a directory the user may not enter
    ran = as_reader(shared, "show", "explore-ada")
    shared.db.parent.chmod(0o755)
    assert (ran.code, ran.out) == (2, ""), ran
    assert ran.err.startswith(f"error: the run store {shared.db} cannot be read (Permission denied)"), ran
    assert files(shared.root / "store") == before


def test_the_help_says_reading_commands_work_on_a_read_only_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "only read" in text
    assert "read-only" in text
    assert "never create, migrate or change" in text
    assert main(["runs", "list", "--help"]) == 0
    assert "Only reads the store" in " ".join(capsys.readouterr().out.split())


def test_reading_a_store_another_process_is_writing(shared: Shared, capsys: pytest.CaptureFixture[str]) -> None:
    """A live runtime's store (its -wal and -shm are there, the reader may write none of them): a reader sees what is
    committed, is not blocked by a write transaction in progress and does not see it — whether or not it may write
    the store: a reading command takes no write lock — and `wait` sees the run end."""
    seed(shared.db)
    live = SQLiteStore(shared.db)
    try:
        mine = rec("019ab000-0002-7000-8000-0000cccc4444", "explore-live", status="running", outcome=None,
                   ended_at=None, result_text=None, owner=live.owner, created_at=4.0)
        live.create_run(mine)
        live.flush()
        assert {p.name for p in shared.db.parent.iterdir()} == {"state.db", "state.db-wal", "state.db-shm"}
        other = sqlite3.connect(shared.db, isolation_level=None, timeout=10)
        here(shared, capsys, "list", "--all", "--json")
        other.execute("BEGIN IMMEDIATE")  # a write transaction in progress: holds the write lock
        other.execute("INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, created_at) "
                      "VALUES ('u1', 'u1', 'explore-uncommitted', 'explore', 't', 'running', 5.0)")
        for who in ("a user who may write the store", "one who may not"):
            if who == "one who may not":
                shared.lock()  # (the writers opened their files before)
            t0 = time.monotonic()
            ran = (here(shared, capsys, "list", "--all", "--json") if who.startswith("a user")
                   else as_reader(shared, "list", "--all", "--json"))
            assert time.monotonic() - t0 < 3, f"{who} waited for the write lock"
            assert ran.code == 0, (who, ran)
            assert [r["nickname"] for r in json.loads(ran.out)] == ["general-purpose-ada", "explore-ada",
                                                                    "explore-grace", "explore-live"], who
        other.execute("COMMIT")
        other.close()
        ran = as_reader(shared, "show", "explore-uncommitted", "--json")
        assert (ran.code, json.loads(ran.out)["run_id"]) == (0, "u1"), ran

        here(shared, capsys, "wait", "explore-ada")
        waiting = Reader(shared, "wait", "explore-live", "--timeout", "20")
        time.sleep(0.6)  # it polls the running run (owned by this live store: not orphaned)
        live.append_messages(mine.run_id, 0, [Message.user("go"), Message.assistant("done")])
        live.finish_run(mine.run_id, {"status": "completed", "outcome": "ok", "ended_at": time.time(),
                                      "result_text": "done"}, None)
        live.flush()
        ran = waiting.result()
        assert (ran.code, ran.out, ran.err) == (0, "explore-live completed/ok\n", ""), ran
        ran = as_reader(shared, "tail", "explore-live")
        assert ran.out == "user: go\nassistant: done\n-- status: completed / ok\n", ran
    finally:
        live.close()
    assert not_own(shared.root / "store") == set()


def test_a_reader_of_a_closed_store_sees_a_writer_that_opens_it_later(shared: Shared,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`wait` started on a closed store (nothing but the file: it reads it as it is, without locks) notices a runtime
    opening it and finishing the run, and reads the change instead of its stale snapshot."""
    seed(shared.db)
    s = SQLiteStore(shared.db)
    s.create_run(rec("019ab000-0002-7000-8000-0000dddd5555", "explore-engine", status="running", outcome=None,
                     ended_at=None, result_text=None, owner="temporal:wf-1", created_at=4.0))  # never orphaned
    s.close()
    shared.lock()
    here(shared, capsys, "wait", "explore-ada")
    waiting = Reader(shared, "wait", "explore-engine", "--timeout", "20")
    time.sleep(0.6)
    assert os.waitpid(waiting.pid, os.WNOHANG) == (0, 0), "wait ended before the run did"
    if unprivileged() is None:
        shared.unlock()  # (the reader is this same user: its check that it may not write the store is behind it)
    s = SQLiteStore(shared.db)
    try:
        s.finish_run("019ab000-0002-7000-8000-0000dddd5555", {"status": "completed", "outcome": "ok",
                                                              "ended_at": time.time()}, None)
        s.flush()
        ran = waiting.result()
    finally:
        s.close()
    assert (ran.code, ran.out, ran.err) == (0, "explore-engine completed/ok\n", ""), ran
    assert not_own(shared.root / "store") == set()


def test_a_file_that_is_no_store_is_refused_clearly_and_left_as_it_is(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A reading command on a path where there is no store to read — even one it could write — says what it found
    and what to do, creates nothing and changes nothing: list says "No runs" for no store at all, the rest fail."""
    for name, db, message, nothing in bad_stores(tmp_path, BAD):
        before = files(db.parent)
        for args in (["list"], ["list", "--json"], ["show", "explore-ada"], ["tree", "1111"],
                     ["tail", "explore-ada", "--no-follow"], ["wait", "explore-ada"],
                     ["timeline", "1111", "--html", str(tmp_path / "t.html")]):
            code = main(["runs", "--store", f"sqlite:///{db}", *args])
            got = capsys.readouterr()
            label, as_json = (name, args), "--json" in args
            if args[0] == "list" and nothing:
                found_none(code, got.out, got.err, message, what="runs", json_out=as_json, label=label)
            else:
                refused(code, got.out, got.err, message, json_out=as_json, label=label)
            assert files(db.parent) == before, label
            assert not (tmp_path / "t.html").exists()


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_an_older_store_is_read_as_it_is_not_migrated(version: int, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "state.db"
    old_store(db, version)
    before = files(tmp_path)
    url = f"sqlite:///{db}"
    assert main(["runs", "--store", url, "list", "--json"]) == 0
    (got,) = json.loads(capsys.readouterr().out)
    assert (got["nickname"], got["status"], got["system_prompt"], got["owner"]) == (
        "explore-old", "completed", "the old prompt", "")
    assert main(["runs", "--store", url, "show", "eeee6666"]) == 0
    assert "old says hi" in capsys.readouterr().out
    assert main(["runs", "--store", url, "tail", "explore-old"]) == 0
    assert capsys.readouterr().out == "user: hi\n-- status: completed / ok\n"
    assert main(["runs", "--store", url, "tree", "explore-old"]) == 0
    assert "total: 1 agent" in capsys.readouterr().out
    assert files(tmp_path) == before
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == version
    conn.close()
