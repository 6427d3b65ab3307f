"""The server's tools through the MCP client SDK, in process (``Client(server)``): semantics and wording."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp.client import Client

from subagents import Runtime
from subagents.serve import TOOL_NAMES, build_server

from .mcp_calls import call, error
from .serve_scripts import model


@asynccontextmanager
async def served(workdir: Path) -> AsyncIterator[tuple[Client, Runtime]]:
    """A client talking to the server in process (a context manager, not a fixture: anyio's scopes must be
    entered and left by one task)."""
    async with Runtime(model, workdir=workdir, store="memory://") as rt, Client(build_server(rt)) as c:
        yield c, rt


async def test_the_tools_and_their_schemas(workdir: Path) -> None:
    async with served(workdir) as (c, _):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert sorted(tools) == sorted(TOOL_NAMES)
        spawn = tools["spawn_agent"]
        assert spawn.input_schema["required"] == ["prompt"]
        assert set(spawn.input_schema["properties"]) == {"prompt", "agent_type", "description", "background", "model",
                                                         "max_turns", "timeout_s"}
        assert "fresh conversation" in (spawn.description or "")
        assert spawn.output_schema is not None
        assert "agent_id" in spawn.output_schema["properties"]
        assert tools["wait"].input_schema["properties"]["return_when"]["enum"] == ["all", "any"]


async def test_foreground_spawn_returns_the_answer(workdir: Path) -> None:
    async with served(workdir) as (c, rt):
        said, data = await call(c, "spawn_agent", prompt="echo hello", description="say hello")
        assert "echo: hello" in said
        head = f"[agent {data['nickname']} · id {data['agent_id']} · general-purpose · status completed"
        assert said.startswith(head)
        assert data["status"] == "completed"
        assert data["queued"] is False
        res = data["result"]
        assert (res["text"], res["outcome"], res["turns"], res["usage"]["input_tokens"]) == ("echo: hello", "ok", 1, 10)
        assert rt.runs()[0].label == "say hello"


async def test_background_spawn_wait_and_result(workdir: Path) -> None:
    async with served(workdir) as (c, _):
        said, a = await call(c, "spawn_agent", prompt="echo one", background=True, agent_type="explore")
        assert a["status"] == "running"
        assert a["result"] is None
        assert a["agent_type"] == "explore"
        assert f"wait(agent_ids=['{a['agent_id']}'])" in said
        _, b = await call(c, "spawn_agent", prompt="echo two", background=True)
        said, w = await call(c, "wait", timeout_s=10)
        assert said.startswith("[wait: 2 finished, 0 still running; timed_out=false]")
        assert [r["text"] for r in w["results"]] == ["echo: one", "echo: two"]
        assert (w["running"], w["timed_out"]) == ([], False)
        said, r = await call(c, "result", agent_id=b["nickname"])  # a nickname works as well as an id
        assert "echo: two" in said
        assert r["result"]["text"] == "echo: two"
        assert r["status"] == "completed"
        said, s = await call(c, "status", agent_id=a["agent_id"])
        assert said.startswith(f"{a['nickname']} ({a['agent_id']}) type=explore status=completed outcome=ok\nruntime ")
        assert s["outcome"] == "ok"


async def test_close_a_long_running_agent(workdir: Path) -> None:
    async with served(workdir) as (c, _):
        _, h = await call(c, "spawn_agent", prompt="hang", background=True)
        said, w = await call(c, "wait", agent_ids=[h["agent_id"]], timeout_s=0.2)
        who = f"{h['nickname']} ({h['agent_id']})"
        assert said == f"[wait: 0 finished, 1 still running (timed out after 0.2s): {who}; timed_out=true]"
        assert (w["running"], w["timed_out"]) == ([h["agent_id"]], True)
        said, r = await call(c, "result", agent_id=h["agent_id"])
        assert "has not finished yet (status running)" in said
        assert r["result"] is None
        said, closed = await call(c, "close_agent", agent_id=h["agent_id"])
        assert said.startswith(f"{h['nickname']} closed (with its descendants).\n")
        assert (closed["status"], closed["outcome"]) == ("shutdown", "cancelled")
        said, _ = await call(c, "close_agent", agent_id=h["agent_id"])
        assert said.startswith(f"{h['nickname']} already finished.")


async def test_send_input_reaches_a_running_agent(workdir: Path) -> None:
    async with served(workdir) as (c, _):
        _, h = await call(c, "spawn_agent", prompt="listen", background=True)
        said, _ = await call(c, "send_input", agent_id=h["agent_id"], message="the word is teal")
        assert said == f"message queued for {h['nickname']} ({h['agent_id']}); it reads it at its next tool boundary"
        _, w = await call(c, "wait", agent_ids=[h["agent_id"]], timeout_s=10)
        assert w["results"][0]["text"] == "heard: the word is teal"
        assert "has already finished (status completed); use resume_agent" in await error(
            c, "send_input", agent_id=h["agent_id"], message="more")


async def test_resume_a_finished_agent(workdir: Path) -> None:
    async with served(workdir) as (c, _):
        _, h = await call(c, "spawn_agent", prompt="echo first")
        said, r = await call(c, "resume_agent", agent_id=h["agent_id"], message="again")
        assert r["agent_id"] == h["agent_id"]
        assert r["result"]["status"] == "completed"
        said, r = await call(c, "resume_agent", agent_id=h["agent_id"], message="again", background=True)
        assert said.startswith(f"resumed {h['nickname']} (id {h['agent_id']}) in the background")
        _, w = await call(c, "wait", agent_ids=[h["agent_id"]], timeout_s=10)
        assert w["results"][0]["outcome"] == "ok"


async def test_list_agents_shows_the_tree(workdir: Path) -> None:
    async with served(workdir) as (c, _):
        said, _ = await call(c, "list_agents")
        assert said == "no agents yet; start one with spawn_agent"
        _, root = await call(c, "spawn_agent", prompt="delegate hi", description="boss")
        assert root["result"]["text"] == "child said: echo: hi"
        said, data = await call(c, "list_agents")
        root_row, child_row = data["agents"]
        assert (root_row["agent_id"], root_row["depth"], root_row["label"]) == (root["agent_id"], 0, "boss")
        assert (child_row["parent_id"], child_row["depth"], child_row["agent_type"]) == (root["agent_id"], 1, "explore")
        lines = said.splitlines()
        assert lines[0].startswith(f"- {root['nickname']} ({root['agent_id']}) type=general-purpose status=completed")
        assert lines[1].startswith(f"  - {child_row['nickname']} ")
        assert lines[1].endswith(f"parent={root['nickname']} label='echo hi'")
        assert lines[2] == "capacity: 4 of 4 sub-agent thread slots free"


async def test_bad_input_is_a_tool_error(workdir: Path) -> None:
    async with served(workdir) as (c, _):
        for tool in ("status", "result", "close_agent"):
            assert await error(c, tool, agent_id="nope") == ("no agent with id or nickname 'nope'; call list_agents to "
                                                             "see the agents (list_agents(all_runs=true) also shows "
                                                             "earlier sessions' runs)")
        assert "no agent with id or nickname 'nope'" in await error(c, "wait", agent_ids=["nope"])
        assert "no agent with id or nickname 'nope'" in await error(c, "send_input", agent_id="nope", message="x")
        assert "no agent with id or nickname 'nope'" in await error(c, "resume_agent", agent_id="nope", message="x")
        said = await error(c, "spawn_agent", prompt="echo x", agent_type="wizard")
        assert "wizard" in said
        assert "Traceback" not in said
        assert "the prompt is empty" in await error(c, "spawn_agent", prompt="  ")
        assert "names a server" in await error(c, "spawn_agent", prompt="echo x", model="openai:m@http://evil")
        assert "max_turns" in await error(c, "spawn_agent", prompt="echo x", max_turns=0)
        assert "prompt" in await error(c, "spawn_agent", description="no prompt")
        said, _ = await call(c, "wait")
        assert said == "you have started no agents to wait for; start one with spawn_agent"


async def test_the_agents_running_at_once_are_capped(workdir: Path) -> None:
    # Without a cap a client started 2,000 background agents at once (each spending model calls).
    async with Runtime(model, workdir=workdir, store="memory://") as rt, Client(build_server(rt, max_agents=2)) as c:
        _, a = await call(c, "spawn_agent", prompt="hang", background=True)
        _, b = await call(c, "spawn_agent", prompt="echo done", background=True)
        await call(c, "wait", agent_ids=[b["agent_id"]], timeout_s=10)  # (finished: no longer counted)
        _, d = await call(c, "spawn_agent", prompt="hang", background=True)
        said = await error(c, "spawn_agent", prompt="echo three", background=True)
        assert said.startswith("2 agents are running, the most this server runs at once (subagents serve "
                               "--max-agents 2); wait for one to finish")
        said = await error(c, "resume_agent", agent_id=b["agent_id"], message="echo again")
        assert said.startswith("2 agents are running")
        await call(c, "close_agent", agent_id=d["agent_id"])
        _, r = await call(c, "resume_agent", agent_id=b["agent_id"], message="echo again")
        assert r["status"] == "completed"
        assert len(rt.agents()) == 3
        await call(c, "close_agent", agent_id=a["agent_id"])


def test_the_command_lines_default_cap_is_the_servers() -> None:
    from subagents.cli.serve_cmd import serve
    from subagents.serve.service import MAX_AGENTS

    option = next(p for p in serve.params if p.name == "max_agents")
    assert option.default == MAX_AGENTS
