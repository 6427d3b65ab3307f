from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from .readonly_harness import Shared, shared_dir

ENV_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "SUBAGENTS_MODEL", "SUBAGENTS_MAX_THREADS",
            "SUBAGENTS_MAX_DEPTH", "SUBAGENTS_STORE", "NO_COLOR")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment: no provider keys, no user config, the cwd a fresh project directory."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SUBAGENTS_STORE", "memory://")  # keep .subagents/state.db out of the listed project
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return project


@pytest.fixture
def shared() -> Iterator[Shared]:
    """A directory every user may read, holding the store a command runs on as another user (readonly_harness)."""
    with shared_dir() as sh:
        yield sh


def answer_with(monkeypatch: pytest.MonkeyPatch, engine: object) -> None:
    """``subagents runs approvals``/``approve`` against ``engine`` (a fake ``TemporalEngine``), on a store that
    holds one run, ``run-1`` (``ada``), at the engine URL ``temporal://x``."""
    from subagents.cli import runs_approve
    from subagents.engines.temporal import client

    class Rec:
        run_id, nickname = "run-1", "ada"

    async def connect(url: str) -> object:
        return engine

    @contextlib.contextmanager
    def store(ctx: object) -> Iterator[None]:
        yield None

    monkeypatch.setattr(runs_approve, "open_for_reading", store)
    monkeypatch.setattr(runs_approve, "resolve_run", lambda s, ref: Rec())
    monkeypatch.setattr(runs_approve, "_engine_url", lambda ctx: "temporal://x")
    monkeypatch.setattr(client.TemporalEngine, "connect", staticmethod(connect))
