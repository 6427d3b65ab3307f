"""Models share their SDK client: one per server, key and event loop, kept-alive connections reused.

The loopback server runs with ``keep_alive=True`` (HTTP/1.1) and counts the TCP connections it
accepts; before the pool, every call built (and closed) its own client, so every call was a new one.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.config import load_settings
from subagents.exceptions import ModelError
from subagents.messages import Message
from subagents.models.base import AgentInfo, ModelRequest
from subagents.models.clients import SHARED, ClientPool
from subagents.models.resolve import resolve_model

from .loopback import (
    ANTHROPIC_PATH,
    Loopback,
    Silent,
    a_text,
    a_tool,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
)

REQUEST = ModelRequest(AgentInfo("agent-1", "main", "general-purpose"), "Be terse.", [Message.user("hi")], [])


@pytest.fixture
def server() -> Any:
    s = Loopback(keep_alive=True)
    try:
        yield s
    finally:
        s.close()


def anthropic(server: Loopback, pool: ClientPool | None, **settings: Any) -> Any:
    return resolve_model("anthropic:claude-sonnet-4-6",
                         {"api_key": "sk-test", "base_url": server.url, **settings}, clients=pool)


def openai(server: Loopback, pool: ClientPool | None, **settings: Any) -> Any:
    return resolve_model(f"openai:llama3.1@{server.openai_url}", settings, clients=pool)


def hello(n: int) -> list[Any]:
    return [anthropic_stream(anthropic_message(a_text(f"hello {i}"))) for i in range(n)]


def wait_for(check: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


async def test_sequential_calls_of_several_models_reuse_one_connection(server: Loopback) -> None:
    pool = ClientPool()
    models = [anthropic(server, pool) for _ in range(3)]
    server.anthropic(*hello(30))
    for i in range(30):
        r = await models[i % 3].request(REQUEST)
        assert r.text == f"hello {i}"
    assert server.connections == 1
    assert len(pool) == 1  # one client for the three models
    await pool.aclose()


async def test_concurrent_calls_open_no_more_connections_than_run_at_once(server: Loopback) -> None:
    pool = ClientPool()
    models = [anthropic(server, pool) for _ in range(4)]
    server.anthropic(*hello(40))
    for _ in range(10):
        await asyncio.gather(*(m.request(REQUEST) for m in models))
    assert 1 <= server.connections <= 4
    await pool.aclose()


async def test_agents_of_a_runtime_share_the_connection(server: Loopback, tmp_path: Path) -> None:
    server.anthropic(
        anthropic_stream(anthropic_message(
            a_tool("toolu_1", "spawn_agent", {"agent_type": "general-purpose", "prompt": "count",
                                              "description": "count"}), stop_reason="tool_use")),
        anthropic_stream(anthropic_message(a_text("3 files"))),
        anthropic_stream(anthropic_message(a_text("The child counted 3 files."))),
    )
    pool = ClientPool()
    async with Runtime(anthropic(server, pool), workdir=tmp_path, store="memory://") as rt:
        r = await rt.run("delegate the count")
    assert r.text == "The child counted 3 files."
    assert len(server.bodies(ANTHROPIC_PATH)) == 3
    assert server.connections == 1
    await pool.aclose()


async def test_each_server_and_key_has_its_own_client(server: Loopback) -> None:
    pool = ClientPool()
    server.anthropic(*hello(2))
    server.openai(openai_stream(openai_completion("hi")))
    await anthropic(server, pool).request(REQUEST)
    await anthropic(server, pool, api_key="sk-other").request(REQUEST)
    await openai(server, pool).request(REQUEST)
    assert len(pool) == 3
    keys = [r.headers.get("x-api-key") or r.headers["authorization"] for r in server.requests
            if r.path == ANTHROPIC_PATH]  # the header depends on the SDK's version
    assert [k.removeprefix("Bearer ") for k in keys] == ["sk-test", "sk-other"]  # each call with its key
    await pool.aclose()


async def test_aclose_closes_the_clients_and_their_connections(server: Loopback) -> None:
    pool = ClientPool()
    model = anthropic(server, pool)
    server.anthropic(*hello(2))
    await model.request(REQUEST)
    client = await model.connection.acquire()
    assert server.open_connections() == 1
    assert not client.is_closed()
    await pool.aclose()
    assert client.is_closed()
    assert len(pool) == 0
    await asyncio.to_thread(wait_for, lambda: server.open_connections() == 0)
    await model.request(REQUEST)  # a later call opens a new client
    assert (await model.connection.acquire()) is not client
    await pool.aclose()


def test_each_event_loop_has_its_own_client_closed_when_the_loop_ends(server: Loopback) -> None:
    pool = ClientPool()
    model = anthropic(server, pool)
    server.anthropic(*hello(4))

    async def two_calls() -> Any:
        await model.request(REQUEST)
        await model.request(REQUEST)
        return await model.connection.acquire()

    first = asyncio.run(two_calls())  # no aclose: the loop's end closes its clients
    assert first.is_closed()
    assert len(pool) == 0
    second = asyncio.run(two_calls())
    assert second is not first
    assert second.is_closed()
    assert server.connections == 2  # one per loop, not one per call
    wait_for(lambda: server.open_connections() == 0)


def test_models_built_without_a_pool_share_the_default_one(server: Loopback) -> None:
    server.anthropic(*hello(3))

    async def calls() -> Any:
        models = [anthropic(server, None) for _ in range(3)]
        for m in models:
            await m.request(REQUEST)
        return {id(await m.connection.acquire()) for m in models}

    assert len(asyncio.run(calls())) == 1
    assert server.connections == 1
    assert len(SHARED) == 0


async def test_a_timed_out_call_leaves_the_shared_client_usable(server: Loopback) -> None:
    pool = ClientPool()
    model = anthropic(server, pool, timeout_s=0.3, max_retries=0)
    server.anthropic(Silent(), *hello(2))
    with pytest.raises(ModelError, match=r"did not finish its answer within 0\.3 s"):
        await model.request(REQUEST)
    assert (await model.request(REQUEST)).text == "hello 0"
    assert (await model.request(REQUEST)).text == "hello 1"
    assert server.connections == 2  # the timed-out connection is dropped, the next one kept
    await pool.aclose()


async def test_a_ready_client_is_used_as_is_and_never_closed(server: Loopback) -> None:
    import anthropic as sdk

    client = sdk.AsyncAnthropic(api_key="sk-test", base_url=server.url, max_retries=0)
    pool = ClientPool()
    model = anthropic(server, pool, client=client)
    server.anthropic(*hello(1))
    await model.request(REQUEST)
    assert len(pool) == 0
    await pool.aclose()
    assert not client.is_closed()
    await client.close()


async def test_closing_the_runtime_closes_its_clients(server: Loopback, tmp_path: Path) -> None:
    server.anthropic(*hello(3))
    settings = load_settings(tmp_path)
    settings.providers["anthropic"] = {"api_key": "sk-test", "base_url": server.url}
    async with Runtime("anthropic:claude-sonnet-4-6", workdir=tmp_path, settings=settings, store="memory://") as rt:
        await rt.run("one")
        await rt.run("two", model="anthropic:claude-haiku-4-5")  # another model, same server: same client
        assert len(rt.clients) == 1
        assert server.open_connections() == 1
    assert len(rt.clients) == 0  # closed by rt.aclose(), while the loop still runs
    await asyncio.to_thread(wait_for, lambda: server.open_connections() == 0)
    assert server.connections == 1
