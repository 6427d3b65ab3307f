"""A sandboxed MCP server sees its own program even where the sandbox masks the folder it lives in (a checkout and
its virtualenv under /tmp, which is private inside the sandbox): its venv and script are bound read-only, never
the workspace again nor a hidden path."""

from __future__ import annotations

from pathlib import Path

from subagents.mcp.config import McpServerConfig
from subagents.mcp.launch import _program_paths


def test_the_venv_and_the_script_are_bound_hidden_and_workspace_paths_never(tmp_path: Path) -> None:
    venv = tmp_path / "checkout" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.write_text("")
    script = tmp_path / "checkout" / "server.py"
    script.write_text("")
    root = tmp_path / "ws"
    root.mkdir()
    inside = root / "tool.py"
    inside.write_text("")
    secret = tmp_path / "keys"
    secret.mkdir()
    (secret / "s.py").write_text("")
    cfg = McpServerConfig("s", command=str(python), args=(str(script), str(inside), str(secret / "s.py"), "-v"))
    assert _program_paths(cfg, root, [secret]) == [str(venv), str(script)]
    plain = McpServerConfig("p", command=str(script))  # not in a venv: the program file itself
    assert _program_paths(plain, root, []) == [str(script)]
