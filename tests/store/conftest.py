from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pg import pg_server, pg_url
from subagents.store import MemoryStore, Store
from subagents.store.postgres import PostgresStore
from subagents.store.sqlite import SQLiteStore

__all__ = ["pg_server", "pg_url"]  # fixtures (tests/pg.py): a throwaway PostgreSQL server, a database per test


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each contract test runs against every implementation (PostgreSQL: a fresh database per test)."""
    s: Store
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "state.db")
    else:
        s = PostgresStore(request.getfixturevalue("pg_url"))
    try:
        yield s
    finally:
        s.close()
