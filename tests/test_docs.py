"""The examples of docs/permissions.md, docs/security.md and docs/teams.md run as written, and their TOML loads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.config import load_settings

DOCS = Path(__file__).resolve().parent.parent / "docs"


def blocks(doc: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (DOCS / doc).read_text(encoding="utf-8"), re.DOTALL)


def run(code: str, cwd: Path) -> str:
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "SUBAGENTS_STORE": "memory://"})
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_the_approver_example(tmp_path: Path) -> None:
    out = run(blocks("permissions.md", "python")[0], tmp_path)
    assert out.splitlines() == [
        "asked: general-purpose-ada [general-purpose] wants to run write_file(path=\"notes.md\", content=\"...\")",
        "asked: general-purpose-ada [general-purpose] wants to run write_file(path=\"setup.py\", content=\"...\")",
        "Created notes.md: wrote 3 bytes (1 lines).",
        "write_file was not run: the user denied it: only Markdown files, please. Do not retry the same call; "
        "adjust your approach.",
    ]


def test_the_hook_example(tmp_path: Path) -> None:
    out = run(blocks("permissions.md", "python")[1], tmp_path)
    assert out.strip() == ("bash was not run: a PreToolUse hook blocked it: force-pushing is not allowed; "
                           "push a new branch instead")


@pytest.mark.parametrize("i", range(2))
def test_the_toml_examples_load(tmp_path: Path, i: int) -> None:
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(blocks("permissions.md", "toml")[i])
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    if i == 0:
        assert s.allow[0] == "bash(git status*)"
        assert s.approval_timeout_s == 300
    else:
        assert s.hooks["PreToolUse"][0]["on_error"] == "block"


def test_the_security_toml_example_loads(tmp_path: Path) -> None:
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(blocks("security.md", "toml")[0])
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert (s.sandbox_mode, s.sandbox_network, s.protect) == ("auto", False, ["deploy", "secrets.env"])
    assert s.env_passthrough == ["CARGO_HOME", "MYAPP_*"]


def test_the_teams_example(tmp_path: Path) -> None:
    out = run(blocks("teams.md", "python")[0], tmp_path)
    assert out.splitlines() == [
        "#1 completed: read README.md",
        "#2 completed: read docs/teams.md",
        "#3 completed: write the summary",
        "['finished #1', 'finished #2', 'finished #3']",
    ]
