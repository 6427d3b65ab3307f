"""The examples of docs/permissions.md, security.md, teams.md and integrations.md run as written; their TOML loads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.config import load_settings
from subagents.exceptions import ConfigError

DOCS = Path(__file__).resolve().parent.parent / "docs"


def blocks(doc: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (DOCS / doc).read_text(encoding="utf-8"), re.DOTALL)


def run(code: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "SUBAGENTS_STORE": "memory://", **(env or {})})
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
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, trust=True)
    if i == 0:
        assert s.allow[0] == "bash(git status*)"
        assert s.approval_timeout_s == 300
    else:
        assert s.hooks["PreToolUse"][0]["on_error"] == "block"


def test_the_security_toml_example_loads(tmp_path: Path) -> None:
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(blocks("security.md", "toml")[0])
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, trust=True)
    assert (s.sandbox_mode, s.sandbox_network, s.protect) == ("auto", False, ["deploy", "secrets.env"])
    assert s.env_passthrough == ["CARGO_HOME", "MYAPP_*"]


def test_the_security_user_file_example_loads_from_the_user_file_only(tmp_path: Path) -> None:
    user = tmp_path / "xdg" / "subagents" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(blocks("security.md", "toml")[1])
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, trust=True)
    assert (s.private_home, s.home_read, s.unprotect) == (True, ["~/.m2"], [".claude"])
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(blocks("security.md", "toml")[1])
    with pytest.raises(ConfigError, match="private_home is read only from your user config file"):
        load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, trust=True)


def test_the_teams_example(tmp_path: Path) -> None:
    out = run(blocks("teams.md", "python")[0], tmp_path)
    assert out.splitlines() == [
        "#1 completed: read README.md",
        "#2 completed: read docs/teams.md",
        "#3 completed: write the summary",
        "['finished #1', 'finished #2', 'finished #3']",
    ]


# -- docs/integrations.md ------------------------------------------------------------------------------------
VENV_PATH = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def test_the_mcp_client_example(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    server, example = blocks("integrations.md", "python")[:2]
    (tmp_path / "calc_server.py").write_text(server)
    (tmp_path / ".mcp.json").write_text(blocks("integrations.md", "json")[0])
    out = run(example, tmp_path, env=VENV_PATH)  # "python" in .mcp.json: this venv's, which has the SDK
    assert out.splitlines() == ["tools: ['mcp__calc__add']", "20 + 22 = 42"]


def test_the_mcp_configuration_examples_load(tmp_path: Path) -> None:
    from subagents.definitions.loader import parse_definition_file
    from subagents.mcp import definition_servers, load_mcp_json

    toml = blocks("integrations.md", "toml")
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(toml[0] + toml[1])
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, trust=True)
    gh, docs = s.mcp_servers["github"], s.mcp_servers["docs"]
    assert (gh.command, gh.args, gh.network, gh.transport) == ("github-mcp-server", ("stdio",), True, "stdio")
    assert (docs.url, docs.timeout_s, docs.transport) == ("http://127.0.0.1:8000/mcp", 30.0, "http")
    assert s.deny == ["mcp__github__delete_*"]
    (tmp_path / ".mcp.json").write_text(blocks("integrations.md", "json")[1])
    assert sorted(load_mcp_json(tmp_path / ".mcp.json")) == ["docs", "github"]
    (tmp_path / "triager.md").write_text(blocks("integrations.md", "markdown")[0])
    d = parse_definition_file(tmp_path / "triager.md", level="project")
    assert d.tools == ["read_file", "mcp__github__create_issue", "mcp__github__search_issues"]
    assert definition_servers(d.extra, source=d.source) == ["github"]


def test_the_telemetry_and_client_configuration_examples_parse(tmp_path: Path) -> None:
    import json
    import tomllib

    toml = blocks("integrations.md", "toml")
    codex = tomllib.loads(toml[2])["mcp_servers"]["subagents"]
    assert codex["command"] == "subagents"
    assert codex["args"][0] == "serve"
    claude = json.loads(blocks("integrations.md", "json")[2])["mcpServers"]["subagents"]
    assert claude["args"][0] == "serve"
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(toml[3])
    s = load_settings(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, trust=True)
    assert (s.otlp_endpoint, s.capture_content, s.telemetry_service_name) == (
        "http://localhost:4318", False, "subagents")


SCRIPTED = """from subagents.models import FunctionModel

model = FunctionModel(lambda req: "found tests/test_app.py")
"""


def test_the_serve_client_example(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    code = blocks("integrations.md", "python")[2]
    # as written, but the server is this checkout's (no console script needed) with a scripted model
    launch = "from subagents.cli.main import main; raise SystemExit(main())"
    for old, new in [('command="subagents", args=["serve", ',
                      f'command={sys.executable!r}, args=["-c", {launch!r}, "serve", '),
                     ('"anthropic:claude-sonnet-4-5"', '"scripted_docs:model"')]:
        assert old in code
        code = code.replace(old, new)
    (tmp_path / "scripted_docs.py").write_text(SCRIPTED)
    lines = run(code, tmp_path).strip().splitlines()
    assert lines[0] == "[wait: 1 finished, 0 still running; timed_out=false]"
    assert "· explore · status completed · outcome ok" in lines[2]
    assert lines[-1] == "found tests/test_app.py"


def test_the_telemetry_example(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    out = run(blocks("integrations.md", "python")[3], tmp_path)
    assert out.splitlines() == [
        "invoke_agent general-purpose $0.0090",
        "  chat scripted $0.0045",
        "  execute_tool spawn_agent",
        "    invoke_agent explore $0.0045",
        "      chat scripted $0.0045",
        "  chat scripted $0.0045",
    ]
