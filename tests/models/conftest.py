"""Fixtures for the provider adapter tests: no real provider is ever reachable, a loopback server is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .loopback import Loopback

UNROUTABLE = "http://127.0.0.1:9/"  # the discard port: nothing listens, a call fails at once


@pytest.fixture(autouse=True)
def no_real_provider_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove provider keys and point the SDKs' default base URLs at a dead loopback port.

    A test reaches a model server only by passing the loopback server's URL explicitly.
    """
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "SUBAGENTS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", UNROUTABLE)
    monkeypatch.setenv("OPENAI_BASE_URL", UNROUTABLE)


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    server = Loopback()
    try:
        yield server
    finally:
        server.close()
