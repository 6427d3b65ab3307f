from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagents.cli.main import main


def test_agents_list_shows_source_and_shadowing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / ".subagents" / "agents"
    d.mkdir(parents=True)
    (d / "explore.md").write_text("---\nname: explore\ndescription: My explorer\ntools: [grep]\n---\nFind.\n")
    (d / "broken.md").write_text("no front matter\n")
    assert main(["agents", "list", "--cwd", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert f"warning: skipped agent definition {d / 'broken.md'}: no YAML front matter" in err
    lines = out.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("explore "))
    assert lines[i].endswith("My explorer")
    assert lines[i + 1].strip() == f"source: project:{d / 'explore.md'}; model: inherit; tools: grep"
    assert lines[i + 2].strip() == "shadows: builtin"
    assert any(ln.startswith("general-purpose ") for ln in lines)


def test_agents_list_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "list", "--json", "--cwd", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in data] == ["coordinator", "explore", "general-purpose", "plan", "verify"]
    assert all(a["source"] == "builtin" and a["shadows"] == [] for a in data)


def test_agents_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "show", "verify", "--cwd", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tools: ['read_file', 'list_dir', 'glob', 'grep', 'bash']" in out
    assert "You are a verification agent." in out


def test_agents_show_unknown_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "show", "nope", "--cwd", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: unknown agent type 'nope'; known types: coordinator, explore, general-purpose, plan, verify")
