"""Run stores: the protocol, the in-memory store and (by URL) the SQLite store."""

from pathlib import Path

from ..exceptions import ConfigError
from .base import AnnouncementRecord, RunRecord, Store
from .memory import MemoryStore

__all__ = ["AnnouncementRecord", "MemoryStore", "RunRecord", "Store", "open_store"]


def open_store(url: str | None, workdir: Path) -> Store:
    """A store for a URL: ``memory://``, or ``sqlite:///path`` (relative paths under ``workdir``)."""
    if url is None or url in ("memory://", "memory", ":memory:"):
        return MemoryStore()
    if url.startswith("sqlite://"):
        from .sqlite import SQLiteStore  # type: ignore[import-not-found,unused-ignore]

        path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
        p = Path(path)
        return SQLiteStore(p if p.is_absolute() else workdir / p)  # type: ignore[no-any-return,unused-ignore]
    raise ConfigError(f"unknown store URL {url!r}; use 'sqlite:///.subagents/state.db' or 'memory://'")
