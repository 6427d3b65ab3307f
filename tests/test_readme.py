"""The README's examples work as written: the Python block is examples/quickstart.py and runs, the TOML loads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from subagents.config import load_settings

ROOT = Path(__file__).resolve().parent.parent


def block(lang: str) -> str:
    found = re.search(rf"```{lang}\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert found is not None, f"README.md has no ```{lang} block"
    return found.group(1)


def test_readme_python_example_is_the_quickstart() -> None:
    assert block("python") == (ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8")


def test_quickstart_runs(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("x")
    env = {**os.environ, "SUBAGENTS_STORE": "memory://"}  # the default store would add .subagents/ to the count
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "This directory has 3 entries."
    assert lines[1].startswith("ok | runtime ")


def test_readme_config_example_loads(tmp_path: Path) -> None:
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(block("toml"), encoding="utf-8")
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, trust=True)
    assert s.model_default == "anthropic:claude-sonnet-4-5"
    assert s.providers["openai"]["base_url"] == "http://localhost:11434/v1"
    assert s.pricing == {"my-local-model": {"input": 0.0, "output": 0.0}}


def test_readme_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/subagents demo" in text
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/pytest" in text
