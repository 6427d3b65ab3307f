"""The PostgreSQL store where production breaks it: a URL whose password libpq cannot parse, a user who may only
read, another session holding the schema lock or a row lock, and a server down longer than the writer retries."""

from __future__ import annotations

import shlex
import time

import psycopg
import pytest

import pg
from subagents.cli.main import main
from subagents.exceptions import StoreError
from subagents.store import RunRecord
from subagents.store._pg_schema import SCHEMA_VERSION
from subagents.store.postgres import PostgresStore

SCHEMA_LOCK = 0x5A6E_7453_7562_4147  # (_pg_schema._LOCK_KEY)


def _start(server: pg.PgServer) -> None:
    """Start the stopped test server again, with the options it last ran with."""
    args = shlex.split((server.data / "postmaster.opts").read_text())[1:]
    server._run([pg._bin("pg_ctl"), "-D", str(server.data), "-o", " ".join(shlex.quote(a) for a in args),
                 "-l", str(server.root / "log"), "-w", "-t", "60", "start"])


def run(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"nick-{run_id}", agent_type="general-purpose",
                     task="do it", status="running", root_id=run_id, runs=1, created_at=1.0)


@pytest.mark.parametrize(("url", "secret"), [
    ("postgresql://u:pa ss@localhost:99999/db", "pa ss"),          # libpq quotes the part it cannot parse
    ("postgresql://u:topsecret@[::1/db", "topsecret"),             # ... or the whole URI
    ("postgresql://u:p@sswd@nohost.invalid/db", "sswd"),            # an unencoded '@': the rest became the host
])
def test_an_invalid_url_never_shows_its_password(url: str, secret: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(StoreError) as e:
        PostgresStore(url, timeout=1)
    assert secret not in str(e.value)
    assert main(["runs", "--store", url, "list"]) != 0
    assert secret not in capsys.readouterr().err


def test_a_user_who_may_only_read_lists_the_runs(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = PostgresStore(pg_url)
    s.create_run(run("r1"))
    s.close()
    db = pg_url.split("/", 3)[3].split("?", 1)[0]
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("DROP ROLE IF EXISTS reader")  # (roles are the server's: a test before may have left it)
        c.execute("CREATE ROLE reader LOGIN")
        c.execute(f'GRANT CONNECT ON DATABASE "{db}" TO reader')
        c.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        c.execute("GRANT USAGE ON SCHEMA public TO reader")
        c.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
    url = pg_url.replace("postgres@", "reader@", 1)
    try:
        ro = PostgresStore(url)
        try:
            assert ro.migrated_from == SCHEMA_VERSION
            assert [r.run_id for r in ro.list_runs()] == ["r1"]
        finally:
            ro.close()
        assert main(["runs", "--store", url, "list"]) == 0
        assert "nick-r1" in capsys.readouterr().out
        ro = PostgresStore(url)
        ro.create_run(run("r2"))
        with pytest.raises(StoreError, match=r"refused access .* grant the user"):
            ro.flush()
        with pytest.raises(StoreError):
            ro.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'REVOKE ALL ON DATABASE "{db}" FROM reader')
            c.execute("DROP OWNED BY reader")
            c.execute("DROP ROLE reader")


@pytest.mark.timeout(20)
def test_a_schema_lock_held_elsewhere_bounds_the_open(pg_url: str) -> None:
    with psycopg.connect(pg_url) as other:  # another process, stuck in the middle of creating the schema
        other.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        t = time.monotonic()
        with pytest.raises(StoreError, match="another process has been creating or migrating the tables"):
            PostgresStore(pg_url, timeout=1)
        assert time.monotonic() - t < 5
        other.rollback()
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url) as other:  # once the tables are there, opening takes no lock at all
        other.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        PostgresStore(pg_url, timeout=1).close()


@pytest.mark.timeout(20)
def test_a_row_locked_by_another_session_fails_the_writer_after_the_lease_not_never(pg_url: str) -> None:
    s = PostgresStore(pg_url, lease_s=1.5)
    try:
        s.create_run(run("r1"))
        s.flush()
        with psycopg.connect(pg_url) as other:  # 'idle in transaction' on the run's row
            other.execute("SELECT * FROM runs WHERE run_id = 'r1' FOR UPDATE")
            t = time.monotonic()
            s.update_run("r1", {"status": "completed"})
            with pytest.raises(StoreError, match=r"stayed locked by another session .* end it"):
                s.flush()
            assert time.monotonic() - t < 6
    finally:
        with pytest.raises(StoreError):
            s.close()


@pytest.mark.timeout(30)
def test_a_server_down_longer_than_the_retries_is_reported_with_the_reason(pg_url: str,
                                                                            pg_server: pg.PgServer) -> None:
    s = PostgresStore(pg_url, lease_s=1.5)
    try:
        s.create_run(run("r1"))
        s.flush()
        pg_server._run([pg._bin("pg_ctl"), "-D", str(pg_server.data), "-m", "fast", "-w", "stop"])
        try:
            s.update_run("r1", {"status": "completed"})
            with pytest.raises(StoreError) as e:
                s.flush()
        finally:
            _start(pg_server)
        msg = str(e.value)
        assert msg.startswith("cannot reach the PostgreSQL run store")
        assert "the connection is closed" not in msg  # why it could not connect again: the socket is gone
        assert "No such file or directory" in msg
    finally:
        with pytest.raises(StoreError):
            s.close()
