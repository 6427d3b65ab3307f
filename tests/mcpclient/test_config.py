"""Server configurations: [mcp.servers], .mcp.json, definitions' mcp_servers; errors name the file and server."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.definitions.loader import parse_definition
from subagents.exceptions import ConfigError, DefinitionError
from subagents.mcp import McpServerConfig, definition_servers, open_mcp, parse_server, project_servers
from subagents.sandbox.workspace import Workspace


def test_mcp_json_and_config_toml(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"gh": {"command": "gh-mcp", "args": ["stdio"], '
                                        '"env": {"T": "1"}}, "docs": {"type": "http", "url": "http://h/mcp"}}}')
    toml = tmp_path / "config.toml"
    toml.write_text('[mcp.servers.gh]\ncommand = "other"\nsandbox = false\ntimeout_s = 5\n')
    servers = project_servers(tmp_path, [toml])
    assert servers["docs"] == McpServerConfig(name="docs", url="http://h/mcp", source=str(tmp_path / ".mcp.json"))
    assert servers["gh"] == McpServerConfig(name="gh", command="other", sandbox=False, timeout_s=5.0,
                                            source=str(toml))


@pytest.mark.parametrize(("raw", "message"), [
    ({}, "needs exactly one of command"),
    ({"command": "x", "url": "http://h"}, "needs exactly one of command"),
    ({"command": "x", "bogus": 1}, "unknown key 'bogus'"),
    ({"url": "ftp://h"}, "url must start with http:// or https://"),
    ({"command": "x", "args": "a b"}, "args must be a list of strings"),
    ({"command": "x", "timeout_s": 0}, "timeout_s must be a positive number of seconds"),
    ({"type": "sse", "url": "http://h"}, "SSE servers are not supported"),
])
def test_bad_server_configs_name_the_file_and_server(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_server("gh", raw, source="/p/.mcp.json")
    assert str(e.value).startswith("/p/.mcp.json: MCP server 'gh'")
    assert message in str(e.value)


def test_a_bad_mcp_json_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{nope")
    with pytest.raises(ConfigError, match=r"\.mcp\.json: cannot be read as JSON"):
        project_servers(tmp_path)


def test_definition_mcp_servers_front_matter() -> None:
    d = parse_definition({"name": "gh-helper", "tools": ["Read", "mcp__gh__create_issue"],
                          "mcpServers": ["gh", {"local": {"command": "srv"}}]}, "body", source="a.md")
    assert d.tools == ["read_file", "mcp__gh__create_issue"]  # Claude Code's mcp__ names pass unchanged
    assert definition_servers(d.extra, source=d.source) == [
        "gh", McpServerConfig(name="local", command="srv", source="a.md")]
    with pytest.raises(DefinitionError, match=r"^b\.md: MCP server 'x': url must start"):
        definition_servers({"mcp_servers": {"x": {"url": "nope"}}}, source="b.md")


def test_open_mcp_is_none_without_servers(tmp_path: Path) -> None:
    assert open_mcp(tmp_path, Workspace(tmp_path)) is None
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"gh": {"command": "gh-mcp"}}}')
    hub = open_mcp(tmp_path, Workspace(tmp_path))
    assert hub is not None
    assert list(hub.servers) == ["gh"]


def test_mcp_json_shared_with_other_clients_honours_disabled_and_skips_their_keys(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``.mcp.json`` is shared with other MCP clients: their ``"disabled": true`` leaves a server out, their own keys
    (``autoApprove``...) are ignored with a warning, not a refusal to start; a config file stays strict."""
    (tmp_path / ".mcp.json").write_text(
        '{"mcpServers": {"gh": {"command": "gh-mcp", "autoApprove": ["x"], "transportType": "stdio"},'
        ' "old": {"command": "old-mcp", "disabled": true}, "on": {"command": "on-mcp", "disabled": false}}}')
    with caplog.at_level("INFO", logger="subagents.mcp"):
        servers = project_servers(tmp_path)
    assert sorted(servers) == ["gh", "on"]
    assert servers["gh"] == McpServerConfig(name="gh", command="gh-mcp", source=str(tmp_path / ".mcp.json"))
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1, warned
    assert "MCP server 'gh': ignoring 'autoApprove', 'transportType'" in warned[0]
    assert any("MCP server 'old' is disabled" in r.getMessage() for r in caplog.records)
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"gh": {"command": "x", "disabled": "yes"}}}')
    with pytest.raises(ConfigError, match=r"MCP server 'gh': disabled must be true or false, got 'yes'"):
        project_servers(tmp_path)
    toml = tmp_path / "config.toml"
    toml.write_text('[mcp.servers.gh]\ncommand = "other"\nautoApprove = ["x"]\n')
    (tmp_path / ".mcp.json").unlink()
    with pytest.raises(ConfigError, match=r"unknown key 'autoApprove'"):
        project_servers(tmp_path, [toml])
