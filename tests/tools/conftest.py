"""Fixtures for the tool tests: a workspace in ``tmp_path`` and a context that reaches it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsmodes import MODES, set_mode
from subagents.models.base import AgentInfo
from subagents.tools.base import ToolContext
from subagents.tools.paths import Workspace


@pytest.fixture
def ws_root(tmp_path: Path) -> Path:
    """The workspace root: a directory inside ``tmp_path`` so tests can also place files outside it."""
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def ctx(ws_root: Path) -> ToolContext:
    return ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=Workspace(ws_root))


@pytest.fixture(params=MODES)
def fs_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once per path-resolution mode of :mod:`subagents.sandbox.fs`."""
    set_mode(monkeypatch, request.param)
    return str(request.param)
