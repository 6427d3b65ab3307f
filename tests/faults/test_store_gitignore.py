"""Item 4: the SQLite store writes ``.subagents/.gitignore`` when it creates the state there.

State (``state.db``, its WAL files) must never be committed; config and agent definitions may be.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from subagents.store import open_store
from subagents.store.sqlite import SQLiteStore


def test_the_default_store_creates_a_gitignore_that_keeps_state_out(tmp_path: Path) -> None:
    open_store(None, tmp_path).close()
    gi = tmp_path / ".subagents" / ".gitignore"
    assert gi.is_file()
    lines = [ln for ln in gi.read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines == ["*", "!.gitignore", "!config.toml", "!agents/", "!agents/**"]


def test_git_ignores_the_state_but_not_config_or_agents(tmp_path: Path) -> None:
    git = subprocess.run(["git", "--version"], capture_output=True, check=False)
    assert git.returncode == 0, "git is needed by this test"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    open_store(None, tmp_path).close()
    sub = tmp_path / ".subagents"
    (sub / "config.toml").write_text("[store]\n")
    (sub / "agents").mkdir()
    (sub / "agents" / "reviewer.md").write_text("---\nname: reviewer\n---\nreview\n")
    out = subprocess.run(["git", "-C", str(tmp_path), "status", "--porcelain", "--untracked-files=all"],
                         capture_output=True, text=True, check=True).stdout
    listed = sorted(ln[3:] for ln in out.splitlines())
    assert listed == [".subagents/.gitignore", ".subagents/agents/reviewer.md", ".subagents/config.toml"]


def test_an_existing_gitignore_is_never_overwritten(tmp_path: Path) -> None:
    sub = tmp_path / ".subagents"
    sub.mkdir()
    (sub / ".gitignore").write_text("mine\n")
    SQLiteStore(sub / "state.db").close()
    assert (sub / ".gitignore").read_text() == "mine\n"


def test_no_gitignore_for_a_store_elsewhere(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "data" / "state.db").close()
    assert not (tmp_path / "data" / ".gitignore").exists()
    assert not (tmp_path / ".gitignore").exists()


def test_not_recreated_for_an_existing_store(tmp_path: Path) -> None:
    """A user who deleted it on purpose keeps it deleted: only creating the state writes it."""
    sub = tmp_path / ".subagents"
    SQLiteStore(sub / "state.db").close()
    (sub / ".gitignore").unlink()
    SQLiteStore(sub / "state.db").close()
    assert not (sub / ".gitignore").exists()


def test_an_unwritable_directory_does_not_fail_the_store(tmp_path: Path) -> None:
    """The .gitignore is a courtesy: failing to write it never stops the store from opening."""
    sub = tmp_path / ".subagents"
    sub.mkdir()
    (sub / ".gitignore").mkdir()  # a directory in the way: the write fails
    SQLiteStore(sub / "state.db").close()
    assert (sub / ".gitignore").is_dir()
