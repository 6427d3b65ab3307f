"""Run stores: the protocol, the in-memory store and (by URL) the SQLite and PostgreSQL stores."""

from pathlib import Path

from ..exceptions import ConfigError
from .base import AnnouncementRecord, Request, RunRecord, Store
from .memory import MemoryStore

__all__ = ["DEFAULT_STORE_URL", "AnnouncementRecord", "MemoryStore", "Request", "RunRecord", "Store", "open_store"]


DEFAULT_STORE_URL = "sqlite:///.subagents/state.db"


def open_store(url: str | None, workdir: Path) -> Store:
    """A store for a URL: ``memory://``, ``sqlite:///path`` (relative paths under ``workdir``) or
    ``postgresql://user@host/db`` (a libpq URI; needs the ``postgres`` extra).

    No URL means the durable default, :data:`DEFAULT_STORE_URL` under ``workdir``.
    """
    if url is None:
        url = DEFAULT_STORE_URL
    if url in ("memory://", "memory", ":memory:"):
        return MemoryStore()
    if url.startswith("sqlite://"):
        from .sqlite import SQLiteStore

        path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
        p = Path(path)
        return SQLiteStore(p if p.is_absolute() else workdir / p)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url)
    raise ConfigError(f"unknown store URL {url!r}; use 'sqlite:///.subagents/state.db', "
                      "'postgresql://user@host/dbname' or 'memory://'")
