from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pg import pg_server, pg_url
from subagents.teams.memory import MemoryTeamStore
from subagents.teams.model import MemberRecord
from subagents.teams.postgres import PostgresTeamStore
from subagents.teams.sqlite import SQLiteTeamStore
from subagents.teams.store import TeamStore

__all__ = ["pg_server", "pg_url"]  # fixtures (tests/pg.py): a throwaway PostgreSQL server, a database per test


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def ts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamStore]:
    """Each contract test runs against every team store (PostgreSQL: a fresh database per test)."""
    s: TeamStore
    if request.param == "memory":
        s = MemoryTeamStore()
    elif request.param == "sqlite":
        s = SQLiteTeamStore(tmp_path / "state.db")
    else:
        s = PostgresTeamStore(request.getfixturevalue("pg_url"))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def team(ts: TeamStore) -> TeamStore:
    """``ts`` with team ``t`` (members ``a`` and ``b``, both working)."""
    ts.create_team("t", "lead-run", 1.0, "a test team")
    for i, name in enumerate(("a", "b")):
        ts.add_member(MemberRecord("t", name, "general", agent_id=f"run-{name}", joined_at=2.0 + i))
    return ts
