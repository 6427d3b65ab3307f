"""``SQLiteTeamReader``: the teams of a SQLite run store opened only to read it (``subagents team list/show``).

The team tables live in the run store's file (schema 6, :mod:`subagents.teams.sqlite`), so this reads them through
the run store's :class:`~subagents.store._readonly.SQLiteReader` — its one read-only connection, with the same care:
``mode=ro`` (``immutable=1`` while no process has the store open), never a ``-wal`` or ``-shm`` created, no lock a
runtime waits for, every refusal worded as the run reader words it (what :func:`~subagents.teams.open_team_store`
gives for such a reader, through its ``team_store()``).  A store of an older schema is read as it is: before schema 6
it has no team tables, and empty views on the reader's connection stand in for them (it has no teams).

Each statement is one read of the run reader (read again on a new connection when an unlocked snapshot changed under
it), so the statements of one method may see two committed states of a store a runtime is writing: good enough to
show, not to decide a write on.  No index hints (an older store's team tables are views); the writing methods raise
:class:`~subagents.exceptions.StoreError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..exceptions import StoreError
from ._sql import SQLTeamStore
from .model import MailRecord, TaskRecord

__all__ = ["Rows", "SQLiteTeamReader"]


class Rows(Protocol):
    """Where the rows come from: the run store's reader (:class:`~subagents.store._readonly.SQLiteReader`)."""

    path: Path

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows ``sql`` selects; :class:`StoreError` saying what to do when the store cannot be read."""
        ...


class _Result:
    """What ``execute`` returns to the shared methods (:mod:`._sql`): rows already read."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class _Connection:
    """A connection as the shared methods use one, each ``execute`` a read of the run reader."""

    def __init__(self, source: Rows) -> None:
        self._source = source

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        return _Result(self._source.rows(sql, params))


class SQLiteTeamReader(SQLTeamStore):
    """The reads of :class:`~subagents.teams.sqlite.SQLiteTeamStore` on a store opened only to read it (see the
    module docstring).  It lives as long as the run reader: closing that one closes this one."""

    def __init__(self, source: Rows) -> None:
        self._source = source
        self.path = source.path

    @contextlib.contextmanager
    def _read(self, doing: str) -> Iterator[_Connection]:
        yield _Connection(self._source)

    def _tx(self, doing: str) -> contextlib.AbstractContextManager[Any]:
        raise self._refused_write(doing)

    def _refused_write(self, doing: str) -> StoreError:
        return StoreError(f"the run store {self.path} was opened only to read it, not for {doing}; a runtime opens "
                          "it for writing")

    def create_task(self, team: str, subject: str, description: str = "",
                    blocked_by: Sequence[int] = (), at: float = 0.0) -> TaskRecord:
        raise self._refused_write("creating a task")

    def send(self, team: str, sender: str, recipients: Sequence[str], text: str, at: float,
             kind: str = "message") -> list[MailRecord]:
        raise self._refused_write("sending team mail")

    def close(self) -> None:
        return None  # (the connection is the run reader's)
