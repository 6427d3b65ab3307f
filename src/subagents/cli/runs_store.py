"""How the ``runs`` and ``team`` commands open the project's store: read-only for the commands that only read
(``runs list/show/tree/timeline/tail/wait/approvals/approve``, ``team list/show``), for writing for ``runs cancel``,
``resume`` and ``sweep``.

A command that only reads a SQLite store opens it with :class:`~subagents.store._readonly.SQLiteReader` (its teams
too: :func:`subagents.teams.open_team_store` of that reader reads them on its connection): no write lock, no writer
process, no migration and no file created or changed, so it reads a store the user may not write (another user's, a
read-only mount) and waits for no runtime that is writing it.  With no store at the path (no file, an empty one) it
raises :class:`NoStore`, which ``list`` turns into "No runs" (``team list``: "No teams"); anything else it cannot read
as a store is a :class:`~subagents.exceptions.StoreError` that says what to do.

A command that writes first opens a SQLite file the same way, only to look at it, then closes it and opens the store
as a runtime does: so it makes no store where there is none (:class:`NoStore` again: ``sweep`` has nothing to sweep,
``cancel`` and ``resume`` no run to find), and a file it cannot use — one the user may not read or reach, no SQLite
database, no subagents store, a newer schema — is refused with the reading commands' sentence, left as it is.  A store
the user may read but not write then fails to open for writing, with the store's own sentence.  Other stores
(PostgreSQL, ``memory://``) open as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from ..exceptions import UserError
from ..store.base import Store
from .common import store_url, workdir

__all__ = ["NoStore", "open_for_reading", "open_for_writing"]

_ELSEWHERE = "pass --cwd DIR or --store URL to read another one"


class NoStore(UserError):
    """A command found no store to read (none is created)."""


def _where(ctx: click.Context) -> tuple[str, Path, Path | None]:
    """The store's URL, the project directory, and the store's file when it is SQLite; :class:`NoStore` when that
    file does not exist."""
    from ..config import load_settings
    from ..store import DEFAULT_STORE_URL

    cwd = workdir(ctx).resolve()
    url = store_url(ctx) or load_settings(cwd).store_url or DEFAULT_STORE_URL
    path = _sqlite_path(url, cwd)
    try:
        missing = path is not None and not path.exists()
    except OSError:  # (a directory the user may not enter: the open says so)
        missing = False
    if missing:
        raise NoStore(f"there is no run store yet at {path}: runs are recorded there by 'subagents run' "
                      f"(or a Runtime) in this project; {_ELSEWHERE}")
    return url, cwd, path


def _sqlite_path(url: str, cwd: Path) -> Path | None:
    if not url.startswith("sqlite://"):
        return None
    p = Path(url.removeprefix("sqlite:///").removeprefix("sqlite://"))
    return p if p.is_absolute() else cwd / p


@contextmanager
def open_for_writing(ctx: click.Context) -> Iterator[Store]:
    """The project's store as a runtime opens it (migrated, its writer started on the first write), once a look at
    it read-only found a store there that it can use (see the module docstring)."""
    from ..store import open_store

    url, cwd, path = _where(ctx)
    if path is not None:
        _check(path)
    store = open_store(url, cwd)
    try:
        yield store
    finally:
        store.close()


def _check(path: Path) -> None:
    """Refuse what a command that writes should not open for writing (see the module docstring)."""
    from ..store._readonly import NeedsWriter, NoStoreFile, SQLiteReader

    try:
        SQLiteReader(path).close()
    except NoStoreFile as e:
        raise NoStore(f"{e}; {_ELSEWHERE}") from None
    except NeedsWriter:
        pass  # (a -wal only a writer can recover: opening it for writing does)


@contextmanager
def open_for_reading(ctx: click.Context) -> Iterator[Store]:
    """The project's store, only to read it (see the module docstring)."""
    from ..store import open_store
    from ..store._readonly import NoStoreFile, SQLiteReader

    url, cwd, path = _where(ctx)
    store: Store
    if path is None:
        store = open_store(url, cwd)
    else:
        try:
            store = SQLiteReader(path)
        except NoStoreFile as e:
            raise NoStore(f"{e}; {_ELSEWHERE}") from None
    try:
        yield store
    finally:
        store.close()
