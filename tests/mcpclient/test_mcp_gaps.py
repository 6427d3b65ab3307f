"""Gaps of the MCP client closed: one bad tool costs that tool (not the server), a huge tool list is capped
per server (``tools:`` narrows it), a chatty server's stderr is bounded, duplicate keys of ``.mcp.json`` are
reported, and ``notifications/tools/list_changed`` refreshes the tools of the agents that start after it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from subagents.mcp import load_mcp_json
from subagents.tools.base import ToolRegistry

from .test_mcp_edges import TOOL, call, hostile, hub_for, pids

pytestmark = pytest.mark.timeout(60)

MAX_TOOLS, MAX_TOOL_CHARS = 200, 16 * 1024  # the documented limits (McpTools.MAX_TOOLS, McpTools.MAX_TOOL_CHARS)


def tool(name: str, description: str = "") -> dict[str, object]:
    return {"name": name, "description": description or name, "inputSchema": {"type": "object", "properties": {}}}


def mcp_names(reg: ToolRegistry) -> list[str]:
    return [n for n in reg.grantable if n.startswith("mcp__")]


def warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


async def test_one_malformed_tool_costs_that_tool_not_the_server(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    good = [tool(f"g{i}") for i in range(20)]
    bad = {"name": "broken", "inputSchema": "not a schema"}
    cfg = hostile(tmp_path, spec={"tools": [*good[:10], bad, *good[10:]]})
    hub = hub_for(tmp_path, cfg)
    try:
        with caplog.at_level(logging.WARNING, logger="subagents.mcp"):
            names = [t.name for t in await hub.tools_of(cfg)]
        assert names == [f"mcp__h__g{i}" for i in range(20)]
        assert "'broken'" in warnings(caplog)
        assert await call(hub, cfg, "mcp__h__g3", tmp_path) == ("ok", False)
    finally:
        await hub.aclose()


async def test_a_tool_without_a_usable_name_is_left_out_and_the_rest_kept(tmp_path: Path) -> None:
    cfg = hostile(tmp_path, spec={"tools": [{"inputSchema": {"type": "object"}}, {"name": 7}, TOOL]})
    hub = hub_for(tmp_path, cfg)
    try:
        assert [t.name for t in await hub.tools_of(cfg)] == ["mcp__h__t"]
    finally:
        await hub.aclose()


async def test_the_tools_of_one_server_are_capped_and_tools_narrows_them(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    cfg = hostile(tmp_path, spec={"tools": [tool(f"t{i}") for i in range(MAX_TOOLS + 50)]})
    hub = hub_for(tmp_path, cfg)
    try:
        with caplog.at_level(logging.WARNING, logger="subagents.mcp"):
            names = mcp_names(await hub.grant(ToolRegistry([])))
        assert len(names) == MAX_TOOLS
        said = warnings(caplog)
        assert "50 tools of the MCP server 'h' are left out" in said
        assert f"mcp__h__t{MAX_TOOLS}" in said
        assert "tools:" in said
        narrowed = await hub.grant(ToolRegistry([]), tools=[f"mcp__h__t{MAX_TOOLS + 10}"])
        assert mcp_names(narrowed) == [f"mcp__h__t{MAX_TOOLS + 10}"]
    finally:
        await hub.aclose()


async def test_a_huge_tool_is_left_out_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = hostile(tmp_path, spec={"tools": [tool("huge", "x" * (MAX_TOOL_CHARS + 1)), TOOL]})
    hub = hub_for(tmp_path, cfg)
    try:
        with caplog.at_level(logging.WARNING, logger="subagents.mcp"):
            names = [t.name for t in await hub.tools_of(cfg)]
        assert names == ["mcp__h__t"]
        assert "mcp__h__huge" in warnings(caplog)
    finally:
        await hub.aclose()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_the_stderr_of_a_chatty_server_is_bounded(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    cfg = hostile(tmp_path, spec={"tools": [TOOL], "pidfile": str(pidfile), "calls": {"t": {"stderr_mb": 8}}})
    hub = hub_for(tmp_path, cfg)
    try:
        assert await call(hub, cfg, "mcp__h__t", tmp_path) == ("ok", False)
        [pid] = pids(pidfile)
        st = os.stat(f"/proc/{pid}/fd/2")
        kept = st.st_size if stat.S_ISREG(st.st_mode) else 0
        assert kept <= 1 << 20
        assert hub.connection(cfg).stderr_tail().endswith("THE LAST LINE")
    finally:
        await hub.aclose()


def test_duplicate_keys_in_mcp_json_are_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text('{"mcpServers": {"gh": {"command": "a"}, "gh": {"command": "b"}}}')
    with caplog.at_level(logging.WARNING, logger="subagents.mcp"):
        servers = load_mcp_json(path)
    assert servers["gh"].command == "b"  # as Claude Code reads it: the last one
    said = warnings(caplog)
    assert "'gh'" in said
    assert str(path) in said


async def test_a_tool_list_change_reaches_the_agents_that_start_after_it(tmp_path: Path) -> None:
    other = tool("u")
    cfg = hostile(tmp_path, spec={"tools": [TOOL], "calls": {"t": {"list_changed": [TOOL, other]}}})
    hub = hub_for(tmp_path, cfg)
    try:
        assert mcp_names(await hub.grant(ToolRegistry([]))) == ["mcp__h__t"]
        assert await call(hub, cfg, "mcp__h__t", tmp_path) == ("ok", False)
        assert mcp_names(await hub.grant(ToolRegistry([]))) == ["mcp__h__t", "mcp__h__u"]
        assert await call(hub, cfg, "mcp__h__u", tmp_path) == ("ok", False)
    finally:
        await hub.aclose()


def test_json_with_no_duplicates_is_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"url": "http://127.0.0.1:1/mcp"}}}))
    assert sorted(load_mcp_json(path)) == ["a", "b"]
