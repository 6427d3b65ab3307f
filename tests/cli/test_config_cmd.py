from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.config import user_config_dir
from subagents.trust import add_trusted


def test_config_show_values_sources_and_masked_keys(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated / ".subagents").mkdir()
    project_file = isolated / ".subagents" / "config.toml"
    project_file.write_text('[agents]\nmax_depth = 3\n[providers.openai]\napi_key = "sk-proj-filekey-0000-ABCD"\n')
    add_trusted(isolated, user_config_dir())  # (an api_key from a project applies in a trusted one only)
    monkeypatch.setenv("SUBAGENTS_MODEL", "anthropic:claude-sonnet-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-verysecret-WXYZ")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split(maxsplit=1)[1] for line in out.splitlines() if line.strip()}
    assert rows["model.default"].split() == ['"anthropic:claude-sonnet-4-5"', "(env", "SUBAGENTS_MODEL)"]
    assert rows["agents.max_depth"].split() == ["3", f"({project_file.resolve()})"]
    assert rows["agents.max_threads"].split() == ["4", "(default)"]
    assert rows["providers.anthropic.api_key"].split() == ['"****WXYZ"', "(env", "ANTHROPIC_API_KEY)"]
    assert rows["providers.openai.api_key"].split() == ['"****ABCD"', f"({project_file.resolve()})"]
    assert "verysecret" not in out
    assert "filekey" not in out
    assert f"project file: {project_file.resolve()} (found)" in out


def test_config_show_json(isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-0123456789-LAST")
    assert main(["config", "show", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["providers.openai.api_key"] == {"value": "****LAST", "source": "env OPENAI_API_KEY"}
    assert data["settings"]["agents.max_threads"] == {"value": 4, "source": "default"}
    assert data["files"]["project"] == {"path": str(isolated.resolve() / ".subagents" / "config.toml"),
                                        "exists": False}


def test_config_show_reports_bad_files(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (isolated / ".subagents").mkdir()
    (isolated / ".subagents" / "config.toml").write_text("[agents]\nthreads = 2\n")
    assert main(["config", "show"]) == 2
    assert capsys.readouterr().err == (
        f"error: {isolated.resolve()}/.subagents/config.toml: unknown key [agents] threads "
        "(did you mean max_threads?); known keys of [agents]: max_threads, when_full, max_depth, briefing, "
        "result_max_chars\n"
    )


def test_bad_environment_variable_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SUBAGENTS_MAX_DEPTH", "deep")
    assert main(["config", "show"]) == 2
    assert capsys.readouterr().err == (
        'error: environment variable SUBAGENTS_MAX_DEPTH must be a non-negative integer, got "deep"\n'
    )


def test_config_keys_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from subagents.config_keys import KEYS, markdown_table

    assert main(["config", "keys", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown_table() + "\n"
    assert main(["config", "keys", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [k["key"] for k in listed] == [k.dotted for k in KEYS]
    assert listed[1] == {"key": "agents.max_threads", "type": "positive integer", "default": 4,
                         "env": ["SUBAGENTS_MAX_THREADS"], "required": False, "user_only": False,
                         "doc": "sub-agents running at once (root agents hold no slot; on the Temporal engine: per "
                                "tree, the root's worker's value)"}
    assert main(["config", "keys"]) == 0
    out = capsys.readouterr().out
    assert "providers.*.api_key" in out
    assert "$ANTHROPIC_API_KEY  $OPENAI_API_KEY" in out
