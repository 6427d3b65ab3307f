"""A throwaway PostgreSQL 15 server for the tests (``initdb`` + ``pg_ctl``), one per test process.

:func:`server` starts it on first use — a data directory in a fresh temporary directory, trust
authentication, listening only on a unix socket in that directory (on a random port number, so
several test processes on one machine never meet) — and stops it when the process exits.  Each test
gets its own database (:meth:`PgServer.new_database`, ``CREATE DATABASE`` from ``template0``: a few
milliseconds), dropped afterwards.

PostgreSQL refuses to run as root: when the tests run as root (CI does), the server runs as the
unprivileged user ``nobody`` (``setpriv``), which owns the data directory.

A missing PostgreSQL is a failure, never a skip: CI installs it (``postgresql-15``).  The binaries are
looked up in ``$SUBAGENTS_PG_BIN``, then ``/usr/lib/postgresql/15/bin``, then on ``PATH``.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pwd
import random
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

PG_BIN_DIRS = (os.environ.get("SUBAGENTS_PG_BIN", ""), "/usr/lib/postgresql/15/bin")
SUPERUSER = "postgres"


def _bin(name: str) -> str:
    for d in PG_BIN_DIRS:
        if d and (Path(d) / name).is_file():
            return str(Path(d) / name)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"PostgreSQL's {name} was not found in {[d for d in PG_BIN_DIRS if d]} nor on PATH: install "
                    "PostgreSQL 15 (apt-get install postgresql-15) or set SUBAGENTS_PG_BIN to its bin directory",
                    pytrace=False)
    return found


class PgServer:
    """A running server: :attr:`socket_dir` and :attr:`port` locate it; :meth:`url` names a database on it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="subagents-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root  # short: a unix socket path must stay under 108 bytes
        self.port = random.randint(20_000, 60_000)
        self._prefix: list[str] = []
        if os.geteuid() == 0:  # postgres will not run as root: run it as nobody, who owns its files
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self._prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
        self._names = itertools.count(1)
        self._lock = threading.Lock()
        self._started = False
        self._run([_bin("initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                   "--no-locale", "--no-sync"])
        opts = (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' -c port={self.port} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                "-c shared_buffers=32MB")
        self._run([_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w",
                   "-t", "60", "start"])
        self._started = True

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run([*self._prefix, *cmd], cwd=self.root, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            pytest.fail(f"{' '.join(cmd[:1])} failed ({done.returncode}): {done.stderr or done.stdout}\n{tail}",
                        pytrace=False)

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URI for ``dbname`` on this server (unix socket, trust auth)."""
        return f"postgresql://{SUPERUSER}@/{dbname}?host={quote(str(self.socket_dir), safe='')}&port={self.port}"

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url(), autocommit=True)

    def new_database(self) -> str:
        """A new, empty database; its URL."""
        with self._lock:
            name = f"t{os.getpid()}_{next(self._names)}"
        with self.admin() as c:
            c.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.split("/", 3)[3].split("?", 1)[0]
        with self.admin() as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def restart(self) -> None:
        """Restart the server (fast shutdown: every open connection is dropped), on the same socket."""
        self._run([_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast", "-w", "-t", "60",
                   "restart"])

    def stop(self) -> None:
        if self._started:
            self._started = False
            subprocess.run([*self._prefix, _bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                           cwd=self.root, capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


_server: PgServer | None = None
_server_lock = threading.Lock()


def server() -> PgServer:
    """The process's server, started on first use and stopped when the process exits."""
    global _server
    with _server_lock:
        if _server is None:
            _server = PgServer()
            atexit.register(_server.stop)
        return _server


# Fixtures: a conftest imports them (``from pg import pg_server, pg_url``); the server is shared either way.
@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    """The test process's throwaway PostgreSQL server (started on first use)."""
    return server()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new, empty database for this test (dropped afterwards)."""
    url = pg_server.new_database()
    try:
        yield url
    finally:
        pg_server.drop_database(url)
