"""Opening the SQLite store's file: the writer connection, its settings, the schema migration at open.

A file the store cannot use is refused before anything is written to it: a newer store or a database that is not one
is left exactly as it was (switching it to WAL mode first would rewrite its header and leave ``-wal``/``-shm`` files),
and a path the user may not reach is a :class:`StoreError` saying so, as every other refusal is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..exceptions import StoreError
from ._checkpoint import JOURNAL_SIZE_LIMIT
from ._schema import SCHEMA_VERSION, migrate, schema_version
from ._support import store_error, write_gitignore

__all__ = ["WRITER_PRAGMAS", "open_writer"]

#: Settings of the writer connection (after ``journal_mode=WAL`` and ``synchronous``): no checkpoint inside
#: its ``COMMIT``\\ s — the :class:`~subagents.store._checkpoint.Checkpointer` thread runs them — and a WAL
#: file truncated back to :data:`~subagents.store._checkpoint.JOURNAL_SIZE_LIMIT` when it starts over; statement
#: journals and temporary tables in memory (a big batched statement spilled its journal to a new temporary file
#: under /var/tmp: an open, writes and an unlink, every few commits).
WRITER_PRAGMAS: tuple[str, ...] = ("PRAGMA wal_autocheckpoint=0", f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}",
                                   "PRAGMA temp_store=MEMORY")


def open_writer(path: Path, timeout: float, durable: bool) -> tuple[sqlite3.Connection, int]:
    """The writer connection to the store at ``path`` (created, or migrated forward, as needed) and the
    schema version the file had.

    Raises :class:`StoreError` saying what to do when it cannot be used."""
    try:
        creating = not path.exists()
    except OSError as e:  # (a directory on the way the user may not enter)
        raise StoreError(f"the run store {path} cannot be opened ({e.strerror}); check that you may enter its "
                         "directory and read and write the file, or point [store] url at another path") from None
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
        schema_version(conn)  # (refuses a newer store or a foreign database while it is as it was)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        for pragma in WRITER_PRAGMAS:
            conn.execute(pragma)
        conn.execute("BEGIN IMMEDIATE")
        try:
            found, _ = migrate(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
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
