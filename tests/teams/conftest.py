from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.teams.memory import MemoryTeamStore
from subagents.teams.model import MemberRecord
from subagents.teams.sqlite import SQLiteTeamStore
from subagents.teams.store import TeamStore


@pytest.fixture(params=["memory", "sqlite"])
def ts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamStore]:
    """Each contract test runs against both team stores."""
    s: TeamStore = MemoryTeamStore() if request.param == "memory" else SQLiteTeamStore(tmp_path / "state.db")
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
