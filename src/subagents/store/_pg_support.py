"""Helpers of the PostgreSQL store: connecting, the wording of its errors, its writer thread.

The writer is the SQLite store's (:class:`~subagents.store._writer.Writer`: group commit, the backlog
bound, ``on_commit`` callbacks, lease renewal from the writer thread) with a PostgreSQL transaction in
place of SQLite's: a batch's statements go out in one pipeline (one round trip for the whole batch in
the common case) inside ``BEGIN ... COMMIT``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..exceptions import StoreError
from ._writer import Call, Writer
from ._writer_main import scrub  # (the SQLite writer's: a lone surrogate becomes U+FFFD)

__all__ = ["KEEPALIVE", "RENEW_SQL", "PgReader", "PgWriter", "clean", "connect", "describe", "pg_error", "redact",
           "scrub"]

#: libpq settings on every connection of the store, so a server gone without a reset (a network cut, a host
#: that died) is noticed in well under a minute, not after the OS's ~2 h of TCP keepalive: a probe after 15 s
#: of silence, every 5 s, 3 unanswered ones end the connection (~30 s); data sent and not acknowledged for
#: 30 s ends it too (``tcp_user_timeout``, ms).  Settings in the store's URL win (``?keepalives_idle=60``);
#: a unix socket ignores them.
KEEPALIVE: dict[str, int] = {"keepalives": 1, "keepalives_idle": 15, "keepalives_interval": 5,
                             "keepalives_count": 3, "tcp_user_timeout": 30_000}

#: Write (or renew) an owner lease: ``(owner, heartbeat, expires, process)``.
RENEW_SQL = ("INSERT INTO owners (owner, heartbeat, expires, process) VALUES (%s, %s, %s, %s) ON CONFLICT (owner) "
             "DO UPDATE SET heartbeat = excluded.heartbeat, expires = excluded.expires, process = excluded.process")


def clean(text: str) -> str:
    """``text`` as PostgreSQL can store it: a NUL (which ``TEXT`` cannot hold) becomes U+FFFD."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def describe(url: str) -> str:
    """``url`` as messages show it: ``postgresql://user@host:port/db``, never the password."""
    try:
        d = conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(an invalid URL)"
    host, port = str(d.get("host") or "localhost"), d.get("port")
    host = host.rsplit("@", 1)[-1]  # (an unencoded '@' in the password: libpq took the rest of it for the host)
    user = f"{d['user']}@" if d.get("user") else ""
    if host.startswith("/"):  # a unix socket directory
        return f"postgresql://{user}/{d.get('dbname') or ''} (socket {host}/.s.PGSQL.{port or 5432})"
    return f"postgresql://{user}{host}{f':{port}' if port else ''}/{d.get('dbname') or ''}"


def _secrets(url: str) -> list[str]:
    """What of ``url`` no message may show, longest first: the URL itself and its password — as libpq reads it
    and as written (up to the URL's last ``@``: an unencoded ``@`` in it makes libpq take the rest for the host,
    and a URL libpq cannot parse is quoted, in part or whole, by its error)."""
    found = {url}
    with contextlib.suppress(psycopg.Error):
        found.add(str(conninfo_to_dict(url).get("password") or ""))
    rest = url.partition("://")[2]
    if "@" in rest:
        written = rest[:rest.rindex("@")].partition(":")[2]
        found.update((written, unquote(written), *written.split("@")))
    return sorted((s for s in found if len(s) > 1), key=len, reverse=True)


def redact(url: str, text: str) -> str:
    """``text`` (a libpq or psycopg message) with ``url`` and its password left out."""
    for secret in _secrets(url):
        text = text.replace(secret, describe(url) if secret == url else "***")
    return text


def pg_error(url: str, e: BaseException, doing: str) -> StoreError:
    """A :class:`StoreError` naming the database, what went wrong and what to do."""
    where = describe(url)
    msg = " ".join(redact(url, str(e)).split()) or type(e).__name__
    if isinstance(e, psycopg.OperationalError) and (e.sqlstate is None or e.sqlstate.startswith(("08", "57P"))):
        return StoreError(f"cannot reach the PostgreSQL run store {where} ({msg}) while {doing}; check that the "
                          "server runs and that the URL's host, port, user, password and database are right, "
                          "or point [store] url at another store")
    if isinstance(e, psycopg.errors.LockNotAvailable):
        return StoreError(f"the PostgreSQL run store {where} stayed locked by another session ({msg}) while {doing}; "
                          "find the session that holds the lock (pg_locks, pg_stat_activity: 'idle in transaction', "
                          "say), end it, and open the store again")
    if isinstance(e, psycopg.errors.InsufficientPrivilege):
        return StoreError(f"the PostgreSQL run store {where} refused access ({msg}) while {doing}; grant the user "
                          "CREATE and read/write rights on the database's public schema, or use another user")
    return StoreError(f"the PostgreSQL run store {where} failed while {doing} ({msg}); run 'subagents runs list "
                      "--store URL' to check it, or point [store] url at another store")


def open_conn(url: str, timeout: float) -> psycopg.Connection[Any]:
    """A new autocommit connection to ``url``, with :data:`KEEPALIVE` (those the URL does not set)."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.Error:
        given = {}  # (psycopg.connect says what is wrong with it)
    keep: dict[str, Any] = {k: v for k, v in KEEPALIVE.items() if k not in given}
    return psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)), application_name="subagents",
                           **keep)


def connect(url: str, timeout: float, doing: str) -> psycopg.Connection[Any]:
    """A new autocommit connection to ``url`` (StoreError saying what to do when it cannot be made)."""
    try:
        return open_conn(url, timeout)
    except psycopg.Error as e:
        raise pg_error(url, e, doing) from None


class PgReader:
    """The store's read connection (autocommit), shared by threads under a lock.  A row or table another
    session keeps locked is waited for at most ``timeout`` (``lock_timeout``: a claim meeting a transaction
    left open elsewhere fails saying so instead of waiting for ever)."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url, self.timeout = url, timeout
        self.conn = self._connect("opening it for reading")
        self.lock = threading.Lock()

    def _connect(self, doing: str) -> psycopg.Connection[Any]:
        conn = connect(self.url, self.timeout, doing)
        try:
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{max(1, int(self.timeout * 1000))}ms",))
        except psycopg.Error as e:
            conn.close()
            raise pg_error(self.url, e, doing) from None
        return conn

    def run(self, work: Callable[[psycopg.Connection[Any]], list[Any]], doing: str) -> list[Any]:
        """``work(connection)`` under the lock; after a connection the server dropped (made again) or a
        transaction it rolled back, ``work`` runs again, once (it is a read, or one transaction)."""
        with self.lock:
            for attempt in (1, 2):
                try:
                    return work(self.conn)
                except (psycopg.errors.TransactionRollback, psycopg.errors.DeadlockDetected) as e:
                    if attempt == 2:  # rolled back whole (a deadlock with another machine, say): once more
                        raise pg_error(self.url, e, doing) from None
                except psycopg.OperationalError as e:
                    if attempt == 2 or not self.conn.broken:
                        raise pg_error(self.url, e, doing) from None
                    with contextlib.suppress(psycopg.Error):
                        self.conn.close()
                    self.conn = self._connect(doing)
                except psycopg.Error as e:
                    raise pg_error(self.url, e, doing) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self.conn.close()


class PgWriter(Writer):
    """The store's writer thread on the PostgreSQL connection ``conn`` (the thread's own: nobody else uses it).

    A connection the server dropped (a restart, a failover, a network cut) is made again and the batch
    sent again, for up to ``retry_s`` seconds, and so is a batch the server rolled back (a deadlock with
    another machine's transaction on the same runs, say); only then does the writer fail.  A lock another
    session holds on the rows a batch writes is waited for up to ``retry_s`` too (``lock_timeout``), then the
    writer fails saying so: the lease renewal waits in the same transaction, so by then the lease has expired
    and another machine may have taken the runs over — writing on would undo its work.  A batch is written at
    least once: if the connection broke while the server committed it, it is applied twice — harmless
    for everything a batch holds (upserts, conditional updates, deletes) except an audit entry or a
    request, which may then appear twice.  A batch with a lone surrogate in its text (which UTF-8 cannot hold)
    is sent again with U+FFFD in its place (:func:`scrub`; SQLite's writer does the same), so the store goes on."""

    def __init__(self, conn: psycopg.Connection[Any], url: str, timeout: float, retry_s: float) -> None:
        self.pg = conn
        self.url = url
        self.timeout = timeout
        self.retry_s = retry_s
        self.reconnects = 0
        # (Writer's connection is typed as SQLite's: the thread writer began as the SQLite store's)
        super().__init__(cast(Any, conn), Path("postgres"))

    def _renewal(self) -> Call | None:
        call = super()._renewal()
        return None if call is None else (RENEW_SQL, call[1], False)

    def _commit(self, calls: list[Call]) -> None:
        if not calls:
            return
        deadline = time.monotonic() + self.retry_s
        pause = 0.05
        cause: psycopg.Error | None = None  # why the connection could not be made again (the error to report)
        while True:
            try:
                self._send(calls)
                return
            except (psycopg.errors.TransactionRollback, psycopg.errors.DeadlockDetected) as e:  # rolled back:
                if time.monotonic() + pause > deadline:  # (a deadlock, say): whole, so it is sent again
                    self.error = pg_error(self.url, e, "writing to it")
                    return
                reconnect = False
            except psycopg.OperationalError as e:
                if (not self.pg.broken and not self.pg.closed) or time.monotonic() + pause > deadline:
                    self.error = pg_error(self.url, cause or e, "writing to it")
                    return
                reconnect = True
            except (psycopg.Error, ValueError, TypeError, OverflowError) as e:
                self.error = pg_error(self.url, e, "writing to it")
                return
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
            if reconnect:
                with contextlib.suppress(psycopg.Error):
                    self.pg.close()
                try:
                    self.pg = open_conn(self.url, self.timeout)
                except psycopg.Error as e:
                    cause = e
                else:
                    cause = None
                    self.reconnects += 1

    def _send(self, calls: list[Call]) -> None:
        try:
            self._send_once(calls)
        except UnicodeEncodeError:  # a lone surrogate (the transaction rolled back): once more, scrubbed
            self._send_once([(sql, scrub(params), many) for sql, params, many in calls])

    def _send_once(self, calls: list[Call]) -> None:
        c = self.pg
        with c.pipeline(), c.transaction(), c.cursor() as cur:
            # a row another session keeps locked is waited for as long as a lost connection, then fails the
            # writer: past that, the lease (renewed in this very transaction) has expired (see the class docstring)
            cur.execute(f"SET LOCAL lock_timeout = {max(1, int(self.retry_s * 1000))}")
            for sql, params, many in calls:
                if many:
                    cur.executemany(sql, params)
                else:
                    cur.execute(sql, params)
