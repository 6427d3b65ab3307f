"""Suite-wide fixtures: no real provider call can leave this machine, no user config leaks in."""

from __future__ import annotations

from pathlib import Path

import pytest

from owner_ids import TEST_OWNER_KEY
from subagents import owner_key

_BLOCKED = "http://127.0.0.1:9/"  # discard port: any accidental provider call fails at once


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "SUBAGENTS_MODEL", "SUBAGENTS_MAX_THREADS",
                "SUBAGENTS_MAX_DEPTH", "SUBAGENTS_STORE", "ANTHROPIC_AUTH_TOKEN", "SUBAGENTS_WHEN_FULL",
                "SUBAGENTS_ENGINE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_SDK_DISABLED", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "OTEL_SERVICE_NAME",
                "SUBAGENTS_SERVE_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _BLOCKED)
    monkeypatch.setenv("OPENAI_BASE_URL", _BLOCKED)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("HOME", str(home))
    # the owner key a test's runtimes make is one the suite knows: the owner ids tests write by hand, tagged with
    # it (tests/owner_ids.py), are this user's (tests/security/test_shipped_store.py makes random ones)
    monkeypatch.setattr(owner_key, "_new_secret", lambda: TEST_OWNER_KEY)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    return d
