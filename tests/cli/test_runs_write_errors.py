"""The ``runs`` commands that write (``cancel``, ``resume``, ``sweep``) on a store they cannot use: another user's (a
file they may read but not write, one they may not read, a directory they may not enter), a file that is no store or
one a newer subagents wrote.  Each ends with one sentence saying what went wrong and what to do, and the usual exit
code (2; ``sweep`` with no store at all: 0, "Nothing to sweep") — never a traceback, never a file created or changed.

As root (the CI) the command runs in a forked child as the user ``nobody`` (``readonly_harness.py``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.exceptions import StoreError
from subagents.store._schema import SCHEMA_VERSION
from subagents.store.sqlite import SQLiteStore

from .readonly_harness import BAD, Ran, Reader, Shared, as_reader, bad_stores, files
from .test_runs import seed

WRITES: list[list[str]] = [["cancel", "explore-grace"], ["resume", "explore-ada", "go on"], ["sweep"]]


@pytest.fixture(autouse=True)
def warm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each writing command once as the test's own user, on a store of its own: what they import lazily is imported
    before a child drops its rights (the interpreter may live where ``nobody`` may not read)."""
    db = tmp_path / "warm" / "state.db"
    db.parent.mkdir()
    seed(db)
    for args in (["cancel", "zzzz"], ["resume", "zzzz", "go on"], ["sweep"]):
        main(["runs", "--store", f"sqlite:///{db}", *args])
    capsys.readouterr()


def one_error(ran: Ran, start: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr that starts with ``start``, no traceback."""
    assert "Traceback" not in ran.out + ran.err, ran
    assert (ran.code, ran.out) == (2, ""), ran
    assert ran.err.startswith(f"error: {start}"), ran
    assert ran.err.count("\n") == 1, ran


def test_a_store_the_user_may_read_but_not_write(shared: Shared) -> None:
    seed(shared.db)
    shared.lock()
    before = files(shared.root / "store")
    for args in WRITES:
        ran = as_reader(shared, *args)
        one_error(ran, f"the run store {shared.db} cannot be written (")
        assert ran.err.endswith("or point [store] url at a writable path\n"), ran
        assert files(shared.root / "store") == before, args


def test_a_store_the_user_may_not_read(shared: Shared) -> None:
    seed(shared.db)
    before = files(shared.root / "store")
    shared.db.chmod(0)
    shared.db.parent.chmod(0o555)
    try:
        for args in WRITES:
            one_error(as_reader(shared, *args), f"the run store {shared.db} cannot be read (Permission denied); ask "
                                                "its owner for read access to the file and its directory")
    finally:
        shared.unlock()
    assert files(shared.root / "store") == before


def test_a_store_in_a_directory_the_user_may_not_enter(shared: Shared) -> None:
    seed(shared.db)
    before = files(shared.root / "store")
    shared.db.parent.chmod(0)
    try:
        for args in WRITES:
            one_error(as_reader(shared, *args), f"the run store {shared.db} cannot be read (Permission denied)")
    finally:
        shared.db.parent.chmod(0o755)
    assert files(shared.root / "store") == before


def test_a_runtime_store_in_a_directory_the_user_may_not_enter(shared: Shared) -> None:
    """Below the command line: opening the store to write it (as a Runtime does) says what is wrong too."""
    seed(shared.db)
    shared.db.parent.chmod(0)

    def open_it() -> int:
        try:
            SQLiteStore(shared.db).close()
        except StoreError as e:
            print(e)
            return 2
        return 0

    try:
        ran = Reader(shared, call=open_it).result()
    finally:
        shared.db.parent.chmod(0o755)
    assert (ran.code, ran.err) == (2, ""), ran
    assert ran.out.startswith(f"the run store {shared.db} cannot be opened (Permission denied)"), ran


def _newer_rollback_journal(db: Path) -> None:
    """A store a newer subagents wrote, in SQLite's rollback-journal mode (opening it in WAL mode would change it)."""
    seed(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()


FILES = {**BAD, "newer schema, rollback journal": (_newer_rollback_journal, BAD["newer schema"][1])}


def test_a_file_that_is_no_store_is_refused_and_left_as_it_is(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Where the command could write: no store (no file, an empty one, an empty database) is not made one — cancel and
    resume have no run to find, sweep nothing to sweep —, a file that is no store or a newer one is refused."""
    for name, db, message, nothing in bad_stores(tmp_path, FILES):
        before = files(db.parent)
        for args in WRITES:
            code = main(["runs", "--store", f"sqlite:///{db}", *args])
            got = capsys.readouterr()
            label = (name, args)
            if args == ["sweep"] and nothing:
                assert "Traceback" not in got.out + got.err, label
                assert (code, got.err) == (0, ""), (label, got)
                assert got.out.startswith(f"Nothing to sweep: {message}"), (label, got)
            else:
                one_error(Ran(code, got.out, got.err), message)
            assert files(db.parent) == before, label
