"""Opening the SQLite store's file: the writer connection, its settings, the schema migration at open.

A file the store cannot use is refused before anything is written to it: a newer store or a database that is not one
is left exactly as it was (switching it to WAL mode first would rewrite its header and leave ``-wal``/``-shm`` files),
and a path the user may not reach is a :class:`StoreError` saying so, as every other refusal is.

A store may come with a cloned project (``.subagents/state.db`` force-added to git), so what the file holds is not
trusted to be what subagents wrote: a file that is no regular file (a FIFO would hang the open), a ``-wal``, ``-shm``
or ``-journal`` next to it that is no regular file (a symbolic link leads SQLite elsewhere), a link to a file that
does not exist or a new store's directory that is a link (the store would be made wherever it points), and a schema
with objects the store never makes (triggers: SQL run by the store's own writes) are refused before the file is
written (:func:`file_problem`, :func:`~subagents.store._schema.schema_problem`)."""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import time
from pathlib import Path

from ..exceptions import StoreError
from ._checkpoint import JOURNAL_SIZE_LIMIT
from ._schema import SCHEMA_VERSION, migrate, schema_problem, schema_version
from ._support import store_error, write_gitignore

__all__ = ["WRITER_PRAGMAS", "file_problem", "open_writer", "refused_schema"]

#: Settings of the writer connection (after ``journal_mode=WAL`` and ``synchronous``): no checkpoint inside
#: its ``COMMIT``\\ s — the :class:`~subagents.store._checkpoint.Checkpointer` thread runs them — and a WAL
#: file truncated back to :data:`~subagents.store._checkpoint.JOURNAL_SIZE_LIMIT` when it starts over; statement
#: journals and temporary tables in memory (a big batched statement spilled its journal to a new temporary file
#: under /var/tmp: an open, writes and an unlink, every few commits).
WRITER_PRAGMAS: tuple[str, ...] = ("PRAGMA wal_autocheckpoint=0", f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}",
                                   "PRAGMA temp_store=MEMORY", "PRAGMA trusted_schema=OFF")

_COMPANIONS = ("-wal", "-shm", "-journal")  # the files SQLite keeps next to a database


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def file_problem(path: Path, *, creating: bool = False) -> str | None:
    """What keeps the file at ``path``, and the ``-wal``, ``-shm`` and ``-journal`` files SQLite keeps next to it, from
    being opened as a store (a sentence naming the file and what to do), or ``None``.

    ``path`` that is no regular file (a directory, a FIFO: opening one would wait for a writer forever); one of those
    files that is no regular file (SQLite only ever makes plain files there: a symbolic link would have it read and
    write whatever it leads to); and, ``creating`` (the store would be made), a symbolic link to nothing — the store
    would be made wherever it points (a link that came with a cloned project can point anywhere).  A path that cannot
    be looked at is left to the open, which says why."""
    try:
        mode: int | None = os.stat(path).st_mode  # (through a link: what SQLite opens)
    except FileNotFoundError:
        mode = None
    except OSError as e:
        if e.errno != errno.ELOOP:
            return None
        return f"the run store {path} is a symbolic link that leads round in a loop; remove it, or point [store] url " \
               "at the store's file"
    if mode is not None and not stat.S_ISREG(mode):
        return (f"the run store {path} is {_kind(mode)}, not a file; point [store] url (or --store) at the store's "
                "file, e.g. .subagents/state.db")
    if mode is None and creating and os.path.islink(path):
        target = os.path.realpath(path)
        return (f"the run store {path} is a symbolic link to {target}, where there is no file: subagents does not make "
                "a store through a link (one that came with a project could point anywhere); remove the link, or "
                f"create the file it points to (touch {target}) if the store belongs there")
    if mode is None and creating and os.path.islink(path.parent):
        target = os.path.realpath(path.parent)
        return (f"the run store's directory {path.parent} is a symbolic link to {target}: subagents does not make a "
                "new store through a link (one that came with a project could point anywhere, and the store and its "
                f"side files would be made there); remove the link, or point [store] url at {target}/{path.name} "
                "if the store belongs there")
    real = os.path.realpath(path)  # (SQLite keeps its files next to the file a link points to)
    for suffix in _COMPANIONS:
        try:
            mode = os.lstat(real + suffix).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            return (f"the run store {path} has {real}{suffix} next to it that is {_kind(mode)}: SQLite only ever "
                    "makes a plain file there (it would read or write whatever this one leads to), so no subagents "
                    "process made it; remove it and open the store again, or point [store] url at another file")
    return None


def refused_schema(path: Path, problem: str) -> StoreError:
    """The refusal of a store whose schema is not one subagents makes (see :func:`schema_problem`)."""
    return StoreError(f"the run store {path} is not a store subagents wrote as it is: {problem}; it may have come with "
                      f"the project. Move it aside (mv {path} {path}.bad) to start a new store, or point [store] url "
                      "at another file (it was left as it is)")


def _wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put a store in WAL mode, waiting up to ``timeout`` for another process that holds it meanwhile.

    SQLite answers this pragma "database is locked" at once, without its busy handler, while another connection
    holds a lock: two processes opening a new store together (two ``subagents worker`` s) made one of them fail."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # (a file system without WAL keeps its mode, as before)
            return
        except sqlite3.OperationalError as e:
            if ("locked" not in str(e) and "busy" not in str(e)) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Migrate the store on ``conn`` forward in one transaction; the version it had."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found, _ = migrate(conn)
    except sqlite3.OperationalError as e:
        conn.execute("ROLLBACK")
        if not any(m in str(e) for m in ("duplicate column", "already exists", "no such")):
            raise
        raise refused_schema(path, f"its tables are not those of the schema version it names ({e})") from None
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return found


def open_writer(path: Path, timeout: float, durable: bool) -> tuple[sqlite3.Connection, int]:
    """The writer connection to the store at ``path`` (created, or migrated forward, as needed) and the
    schema version the file had.

    Raises :class:`StoreError` saying what to do when it cannot be used."""
    try:
        creating = not path.exists()
    except OSError as e:  # (a directory on the way the user may not enter)
        raise StoreError(f"the run store {path} cannot be opened ({e.strerror}); check that you may enter its "
                         "directory and read and write the file, or point [store] url at another path") from None
    problem = file_problem(path, creating=creating)
    if problem is not None:
        raise StoreError(problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create the directory of the run store {path} ({e}); create it, "
                         "or point [store] url at a writable path") from None
    try:
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise store_error(path, e, "opening it") from None
    try:
        conn.execute("BEGIN")  # (one snapshot: another process may be creating the store meanwhile)
        try:
            problem = schema_problem(conn, schema_version(conn))  # (refuses a newer store, a foreign database or
        finally:                                                  # someone else's triggers while it is as it was)
            conn.execute("ROLLBACK")
        if problem is not None:
            conn.close()
            raise refused_schema(path, problem)
        _wal(conn, timeout)
        conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        for pragma in WRITER_PRAGMAS:
            conn.execute(pragma)
        try:
            found = _migrate(conn, path)
        except StoreError:
            conn.close()
            raise
        if creating:
            write_gitignore(path.parent)
    except ValueError as e:
        conn.close()
        raise StoreError(f"the run store {path} has schema version {e.args[0]}, newer than the "
                         f"{SCHEMA_VERSION} this subagents understands; upgrade subagents, "
                         "or point [store] url at another file") from None
    except LookupError:
        conn.close()
        raise StoreError(f"the run store {path} is a SQLite database but not a subagents store; "
                         "point [store] url at another file") from None
    except sqlite3.Error as e:
        conn.close()
        raise store_error(path, e, "opening it") from None
    return conn, found
