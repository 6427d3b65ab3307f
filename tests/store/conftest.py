from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.store import MemoryStore, Store
from subagents.store.sqlite import SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each contract test runs against both implementations."""
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "state.db")
    try:
        yield s
    finally:
        s.close()
