"""``subagents serve`` as a real process over stdio, driven by the mcp SDK's ``stdio_client``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from subagents.cli.main import main
from subagents.serve import TOOL_NAMES
from subagents.store import open_store

from .mcp_calls import call, error, serve_command, serve_env


async def test_a_client_spawns_waits_reads_and_cancels(workdir: Path) -> None:
    cmd = serve_command(workdir)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=serve_env(), cwd=str(workdir))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        assert sorted(t.name for t in (await s.list_tools()).tools) == sorted(TOOL_NAMES)
        _, echo = await call(s, "spawn_agent", prompt="echo over stdio", background=True, description="echo")
        _, hang = await call(s, "spawn_agent", prompt="hang", background=True)
        _, left = await call(s, "spawn_agent", prompt="hang", background=True)  # still running at the end
        said, w = await call(s, "wait", agent_ids=[echo["agent_id"], hang["agent_id"]], return_when="any",
                             timeout_s=30)
        assert said.startswith("[wait: 1 finished, 1 still running")
        assert [r["text"] for r in w["results"]] == ["echo: over stdio"]
        said, r = await call(s, "result", agent_id=echo["agent_id"])
        assert r["result"]["text"] == "echo: over stdio"
        _, st = await call(s, "status", agent_id=hang["agent_id"])
        assert st["status"] == "running"
        _, closed = await call(s, "close_agent", agent_id=hang["agent_id"])
        assert (closed["status"], closed["outcome"]) == ("shutdown", "cancelled")
        assert "no agent with id or nickname 'no-such-agent'" in await error(s, "status", agent_id="no-such-agent")
        said, _ = await call(s, "spawn_agent", prompt="write")  # nobody can approve the edit: refused at once
        assert "write said: write_file was not run: permission mode 'default' asks before file edits, and no one " \
               "can approve it here" in said
        assert not (workdir / "out.txt").exists()
        _, listed = await call(s, "list_agents")
        assert [a["agent_id"] for a in listed["agents"]][:3] == [echo["agent_id"], hang["agent_id"], left["agent_id"]]
    # the client went away: the server closed its runtime; the records are in the project's store
    store = open_store(f"sqlite:///{workdir / 'state.db'}", workdir)
    try:
        recs = {r.run_id: r for r in store.list_runs()}
    finally:
        store.close()
    assert (recs[echo["agent_id"]].status, recs[echo["agent_id"]].result_text) == ("completed", "echo: over stdio")
    assert (recs[hang["agent_id"]].status, recs[hang["agent_id"]].outcome) == ("shutdown", "cancelled")
    assert (recs[left["agent_id"]].outcome, recs[left["agent_id"]].error) == (
        "interrupted", "interrupted: the process was stopped (the MCP client disconnected) before this agent "
        "finished; resume it with: subagents runs resume <id> <message>")


def test_serve_without_a_model_says_how_to_set_one(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--cwd", str(workdir)]) == 2
    assert capsys.readouterr().err.startswith("error: no model is configured.\nConfigure one in any of these ways:")


def test_a_model_path_that_names_no_model_is_a_usage_error(workdir: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        assert main(["serve", "--cwd", str(workdir), "--model", "serve_scripts:not_a_model"]) == 2
        assert capsys.readouterr().err == (
            "error: 'serve_scripts:not_a_model' is a int, not a model; it must be an object with an async request() "
            "(e.g. subagents.models.FunctionModel) or a function that returns one\n")
        assert main(["serve", "--cwd", str(workdir), "--model", "serve_scripts:nothing"]) == 2
        assert "'serve_scripts' has no attribute 'nothing'" in capsys.readouterr().err
    finally:
        sys.path.remove(str(Path(__file__).parent))
