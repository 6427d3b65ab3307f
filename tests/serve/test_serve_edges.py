"""A careless or hostile MCP client of ``subagents serve``: bad arguments, unknown ids, races, other sessions' agents.

Every bad call is a tool error (``isError``) whose text says what is wrong, never a traceback; ``wait`` with
``return_when="any"`` returns at once when one of the agents has already finished, in this session or an earlier one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from subagents import Runtime
from subagents.serve import build_server

from .mcp_calls import call, error, text
from .serve_scripts import model

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def served(workdir: Path, store: str = "memory://") -> AsyncIterator[Client]:
    async with Runtime(model, workdir=workdir, store=store) as rt, Client(build_server(rt)) as c:
        yield c


async def test_wait_for_any_returns_an_agent_an_earlier_session_finished(workdir: Path) -> None:
    store = f"sqlite:///{workdir / 'state.db'}"
    async with served(workdir, store) as c:
        _, old = await call(c, "spawn_agent", prompt="echo from before")
    async with served(workdir, store) as c:
        _, new = await call(c, "spawn_agent", prompt="hang", background=True)
        async with asyncio.timeout(10):  # it used to wait for all of them: here, forever
            said, w = await call(c, "wait", agent_ids=[old["agent_id"], new["agent_id"]], return_when="any")
        assert [r["text"] for r in w["results"]] == ["echo: from before"]
        assert (w["running"], w["timed_out"]) == ([new["agent_id"]], False)
        assert said.startswith(f"[wait: 1 finished, 1 still running: {new['nickname']} ({new['agent_id']})")


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("spawn_agent", {}, "prompt\n  Field required"),
    ("spawn_agent", {"prompt": 42}, "prompt\n  Input should be a valid string"),
    ("spawn_agent", {"prompt": "echo x", "background": "yes please"}, "background\n  Input should be a valid boolean"),
    ("spawn_agent", {"prompt": "echo x", "timeout_s": -5}, "timeout_s\n  Input should be greater than 0"),
    ("spawn_agent", {"prompt": "echo x", "agent_type": "../../etc/passwd"}, "unknown agent type '../../etc/passwd'"),
    ("spawn_agent", {"prompt": "echo x", "model": "serve_scripts:model"}, "unknown model provider 'serve_scripts'"),
    ("wait", {"agent_ids": "abc"}, "agent_ids\n  Input should be a valid list"),
    ("wait", {"return_when": "some"}, "return_when\n  Input should be 'all' or 'any'"),
    ("status", {"agent_id": None}, "agent_id\n  Input should be a valid string"),
    ("send_input", {"agent_id": "x"}, "message\n  Field required"),
    ("close_agent", {"agent_id": 5}, "agent_id\n  Input should be a valid string"),
    ("resume_agent", {"agent_id": "", "message": "x"}, "no agent with id or nickname ''"),
]


@pytest.mark.parametrize(("tool", "args", "said"), BAD, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD)])
async def test_a_bad_call_is_a_tool_error_that_says_what_is_wrong(workdir: Path, tool: str, args: dict[str, Any],
                                                                  said: str) -> None:
    async with served(workdir) as c:
        got = await error(c, tool, **args)
        assert said in got
        assert "Traceback" not in got


async def test_a_huge_unknown_id_is_not_echoed_whole(workdir: Path) -> None:
    async with served(workdir) as c:
        said = await error(c, "status", agent_id="x" * 100_000)
        assert said.startswith(f"no agent with id or nickname '{'x' * 100}...'; call list_agents")
        assert len(said) < 400


async def test_many_concurrent_calls(workdir: Path) -> None:
    async with served(workdir) as c:
        answers = await asyncio.gather(*(c.call_tool("spawn_agent", {"prompt": f"echo {i}", "background": i % 2 == 0})
                                         for i in range(30)))
        assert [r.is_error for r in answers] == [False] * 30, [text(r) for r in answers if r.is_error][:2]
        _, w = await call(c, "wait", timeout_s=20)
        assert sorted(r["text"] for r in w["results"]) == sorted(f"echo: {i}" for i in range(30))
        assert w["running"] == []
