"""A CLI command run as a user who may read a store but not write it, and stores that are no store.

"Cannot write" is real here: as root (the CI) the command runs in a forked child that drops to the user ``nobody``
(root ignores file modes); as anyone else the store file is mode 0444 in a 0555 directory.  The child is forked rather
than started from an executable because the interpreter may live where ``nobody`` may not go (``/root/.pyenv``): what
a command imports lazily must be imported first (run it once as the test's own user, or import it).

Used by ``test_runs_readonly.py`` (the ``runs`` commands that only read), ``test_team_readonly.py`` (``team``) and
``test_runs_write_errors.py`` (the ``runs`` commands that write, on a store they cannot use).  The ``shared``
fixture (a :class:`Shared` directory) is in ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import shutil
import sqlite3
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

import subagents.cli.runs
import subagents.cli.team_cmd
import subagents.cli.timeline
import subagents.runtime.recovery
from subagents.cli.main import main
from subagents.store._schema import _MIGRATIONS, SCHEMA_VERSION, _statements

from .test_runs import seed

LAZY = (subagents.cli.runs, subagents.cli.team_cmd, subagents.cli.timeline,
        subagents.runtime.recovery)  # imported before a child drops rights


@dataclass
class Ran:
    code: int
    out: str
    err: str


@dataclass
class Shared:
    """A temporary directory every user may read: the store (``store/state.db``), a project, a config home and a
    directory every user may write (``out``, for ``timeline --html``)."""

    root: Path

    @property
    def db(self) -> Path:
        return self.root / "store" / "state.db"

    @property
    def url(self) -> str:
        return f"sqlite:///{self.db}"

    def lock(self) -> None:
        """The store as a reader finds it: a file it may read but not write, in a directory it may not write."""
        for p in self.db.parent.iterdir():
            p.chmod(0o444)
        self.db.parent.chmod(0o555)

    def unlock(self) -> None:
        """Writable again by the test's own user (who is then not the reader: root's reader is 'nobody')."""
        self.db.parent.chmod(0o755)
        for p in self.db.parent.iterdir():
            p.chmod(0o644)


@contextlib.contextmanager
def shared_dir() -> Iterator[Shared]:
    """A :class:`Shared` directory, removed at the end (what the ``shared`` fixture yields)."""
    d = Path(tempfile.mkdtemp(prefix="subagents-ro-"))
    d.chmod(0o755)
    for sub in ("store", "project", "xdg"):
        (d / sub).mkdir(mode=0o755)
    (d / "out").mkdir()
    (d / "out").chmod(0o777)
    try:
        yield Shared(d)
    finally:
        for p in [d, *d.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(d)


def unprivileged() -> tuple[int, int] | None:
    """The (uid, gid) a reader drops to when the tests run as root; ``None`` otherwise (file modes suffice)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        pytest.fail("the tests run as root but there is no user 'nobody' to read the store as; create one")
    assert pw.pw_uid != 0
    return pw.pw_uid, pw.pw_gid


class Reader:
    """``subagents GROUP --store URL ...`` (GROUP ``runs`` unless told) in a forked child, as a user who may read the
    store but not write it; or ``call()`` (its exit code) instead of the command."""

    def __init__(self, sh: Shared, *args: str, group: str = "runs", call: Callable[[], int] | None = None) -> None:
        self.sh = sh
        self.files: list[IO[bytes]] = [tempfile.TemporaryFile() for _ in "oe"]  # noqa: SIM115 (kept until result())
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            self._child(group, args, call)

    def _child(self, group: str, args: tuple[str, ...], call: Callable[[], int] | None) -> None:
        code = 99
        try:
            os.dup2(self.files[0].fileno(), 1)
            os.dup2(self.files[1].fileno(), 2)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            ids = unprivileged()
            if ids is not None:
                os.setgroups([])
                os.setgid(ids[1])
                os.setuid(ids[0])
            os.chdir(self.sh.root / "project")
            os.environ.update(XDG_CONFIG_HOME=str(self.sh.root / "xdg"), HOME=str(self.sh.root / "project"))
            if os.access(self.sh.db.parent, os.W_OK) or os.access(self.sh.db, os.W_OK):
                print("TEST SETUP: the reader may write the store", file=sys.stderr)
                code = 98
            else:
                code = call() if call is not None else main([group, "--store", self.sh.url, *args])
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def result(self, timeout: float = 30.0) -> Ran:
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
                pytest.fail(f"the reader did not finish within {timeout} s")
            time.sleep(0.02)
        texts = []
        for f in self.files:
            f.seek(0)
            texts.append(f.read().decode())
            f.close()
        return Ran(os.waitstatus_to_exitcode(status), *texts)


def as_reader(sh: Shared, *args: str, group: str = "runs") -> Ran:
    return Reader(sh, *args, group=group).result()


def here(sh: Shared, capsys: pytest.CaptureFixture[str], *args: str, group: str = "runs") -> Ran:
    """The same command in this process, as the test's own user."""
    capsys.readouterr()
    code = main([group, "--store", sh.url, *args])
    got = capsys.readouterr()
    return Ran(code, got.out, got.err)


def files(d: Path) -> dict[str, tuple[str, int, int, int]]:
    """Every file under ``d``: (sha256, size, mtime in ns, owner)."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else "dir"
        out[str(p.relative_to(d))] = (digest, st.st_size, st.st_mtime_ns, st.st_uid)
    return out


def not_own(d: Path) -> set[str]:
    """Files under ``d`` that are not the test's own (a reader that created one)."""
    return {str(p) for p in d.rglob("*") if p.lstat().st_uid != os.geteuid()}


# -- files that are no store to read ----------------------------------------------------------------------------
def newer(db: Path) -> None:
    seed(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()


def foreign(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.close()


def empty_sqlite(db: Path) -> None:  # a SQLite database with nothing in it (no schema version, no table)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()


def nothing(db: Path) -> None:
    pass


def garbage(db: Path) -> None:
    db.write_bytes(b"hello, not a database\n" * 300)


#: What makes each bad file, and how the reading commands' message about it starts.
BAD: dict[str, tuple[Callable[[Path], object], str]] = {
    "missing": (nothing, "there is no run store yet at {db}"),
    "empty file": (lambda db: db.write_bytes(b""), "the run store {db} is an empty file (0 bytes)"),
    "empty database": (empty_sqlite, "the run store {db} is an empty SQLite database"),
    "garbage": (garbage, "the run store {db} is corrupt or not a SQLite database"),
    "newer schema": (newer, f"the run store {{db}} has schema version {SCHEMA_VERSION + 1}, newer than the "
                            f"{SCHEMA_VERSION} this subagents understands"),
    "foreign": (foreign, "the run store {db} is a SQLite database but not a subagents store"),
}


def old_store(db: Path, version: int) -> None:
    """A store as subagents with schema ``version`` wrote it: a finished run with a transcript."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for v in range(version):
        for stmt in _statements(_MIGRATIONS[v]):
            conn.execute(stmt)
    conn.execute("INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, outcome, created_at, "
                 "system_prompt, result_text) VALUES ('019ab000-0000-7000-8000-0000eeee6666', 'x', 'explore-old', "
                 "'explore', 't', 'completed', 'ok', 1.0, 'the old prompt', 'old says hi')")
    conn.execute("INSERT INTO transcript VALUES ('019ab000-0000-7000-8000-0000eeee6666', 0, ?)",
                 ('{"role":"user","content":[{"kind":"text","text":"hi"}]}',))
    conn.close()


def bad_stores(root: Path, table: dict[str, tuple[Callable[[Path], object], str]]
               ) -> Iterator[tuple[str, Path, str, bool]]:
    """Each bad file of ``table`` made in a directory of its own under ``root``: its name, its path, what a command
    says about it, and whether there is no store at all there (no file, an empty one, an empty database)."""
    for name, (make, said) in table.items():
        where = root / name.replace(" ", "-").replace(",", "")
        where.mkdir()
        db = where / "state.db"
        make(db)
        yield name, db, said.format(db=db), name in ("missing", "empty file", "empty database")


def refused(code: int, out: str, err: str, message: str, *, json_out: bool, label: object) -> None:
    """Exit 2 with ``message`` as the one error: a JSON error object on stdout with ``--json``, else one stderr line;
    no traceback."""
    assert "Traceback" not in out + err, label
    assert code == 2, (label, out, err)
    if json_out:
        e = json.loads(out)
        assert (e["kind"], e["exit_code"]) == ("error", 2)
        assert e["message"].startswith(message), (label, e)
    else:
        assert err.startswith(f"error: {message}"), (label, err)
        assert err.count("\n") == 1, (label, err)


def found_none(code: int, out: str, err: str, message: str, *, what: str, json_out: bool, label: object) -> None:
    """``list`` where there is no store: exit 0 and "No <what>: <message>" (``--json``: ``[]``, the sentence on
    stderr); no traceback."""
    assert "Traceback" not in out + err, label
    assert code == 0, (label, out, err)
    if json_out:
        assert (out, err.startswith(f"No {what}: {message}")) == ("[]\n", True), (label, out, err)
    else:
        assert out.startswith(f"No {what}: {message}"), (label, out, err)
