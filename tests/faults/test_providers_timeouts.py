"""A model call never hangs: connect / read / stall / total timeouts, retried like a 429 (issue #12).

Each test drives an adapter through its official SDK against a loopback server that misbehaves
(tests/models/loopback.py: ``Silent``, ``Drip``, ``SSE(hang=True)``), with timeouts of a fraction of
a second and a tiny backoff.  Before the fix there was no stall or total deadline and ``timeout_s``
only bounded each socket operation, so every one of these calls hung (the tests' own deadline fired).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import anthropic  # noqa: F401  -- imported here so the SDKs' import time (seconds) is not timed below
import openai  # noqa: F401
import pytest

from models.loopback import (
    SSE,
    Drip,
    Loopback,
    Silent,
    a_text,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
)
from subagents.exceptions import ModelError
from subagents.messages import Message
from subagents.models.base import AgentInfo, Model, ModelRequest, ModelResponse
from subagents.models.resolve import resolve_model
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.paths import Workspace

PROVIDERS = ["anthropic", "openai"]
INFO = AgentInfo("agent-1", "main", "general-purpose")
FAST = {"retry_base_s": 0.001, "retry_max_s": 0.01}
GUARD_S = 8.0  # the test's own deadline: a call that is still running then has hung


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    server = Loopback()
    try:
        yield server
    finally:
        server.close()


def model(provider: str, server: Loopback, **settings: Any) -> Model:
    url = server.url if provider == "anthropic" else server.openai_url
    return resolve_model(f"{provider}:test-model", {"api_key": "sk-test", "base_url": url, **FAST, **settings})


def script(provider: str, server: Loopback, *responses: Any) -> None:
    (server.anthropic if provider == "anthropic" else server.openai)(*responses)


def whole(provider: str, text: str) -> SSE:
    if provider == "anthropic":
        return anthropic_stream(anthropic_message(a_text(text)))
    return openai_stream(openai_completion(text))


def stalled(provider: str) -> SSE:
    """The first events of a streamed answer (some text included), then silence on an open connection."""
    events = whole(provider, "the beginning of an answer that never ends").events
    cut = 4 if provider == "anthropic" else 3
    return SSE(events[:cut], hang=True)


def ask() -> ModelRequest:
    return ModelRequest(INFO, "", [Message.user("hi")], [])


async def timed(m: Model) -> tuple[float, ModelResponse | ModelError]:
    """(seconds, the response or the ModelError); a call that outlives GUARD_S fails the test."""
    start = time.monotonic()
    try:
        async with asyncio.timeout(GUARD_S):
            result: ModelResponse | ModelError = await m.request(ask())
    except ModelError as e:
        result = e
    except TimeoutError:
        pytest.fail(f"the model call hung: still running after {GUARD_S} s")
    return time.monotonic() - start, result


# Before: no read timeout of our own (the SDK default is 600 s and read_timeout_s did not exist): hung.
@pytest.mark.timeout(15)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_server_that_never_answers_times_out_and_is_retried(provider: str, loopback: Loopback) -> None:
    script(provider, loopback, Silent(), Silent(), Silent())
    elapsed, result = await timed(model(provider, loopback, read_timeout_s=0.2, max_retries=2))
    assert isinstance(result, ModelError)
    assert len(loopback.requests) == 3  # first attempt + max_retries
    assert 0.6 <= elapsed < 3.0
    message = str(result)
    assert "sent no data for 0.2 s" in message
    assert f"[providers.{provider}] read_timeout_s" in message
    assert message.endswith("Gave up after 3 attempts (max_retries=2).")
    assert (result.retryable, result.status, result.provider) == (True, None, provider)


@pytest.fixture
def full_backlog() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a listener that never accepts, its backlog full: a connect hangs (Linux)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for sock in (*fillers, listener):
            sock.close()


# Before: the SDKs' own connect timeout of 5 s (connect_timeout_s did not exist): each attempt took 5 s.
@pytest.mark.timeout(15)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_connection_that_is_never_accepted_times_out(provider: str, full_backlog: str) -> None:
    url = full_backlog if provider == "anthropic" else full_backlog + "/v1"
    m = resolve_model(f"{provider}:test-model", {"api_key": "sk-test", "base_url": url, "connect_timeout_s": 0.2,
                                                 "max_retries": 1, **FAST})
    elapsed, result = await timed(m)
    assert isinstance(result, ModelError)
    assert 0.4 <= elapsed < 3.0
    message = str(result)
    assert "did not accept the connection within 0.2 s" in message
    assert f"[providers.{provider}] connect_timeout_s" in message
    assert message.endswith("Gave up after 2 attempts (max_retries=1).")


# Before: a byte every 20 ms kept the per-read timeout (timeout_s) from ever firing: hung forever.
@pytest.mark.timeout(15)
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_dripping_server_is_ended_by_the_total_deadline(provider: str, stream: bool,
                                                              loopback: Loopback) -> None:
    content_type = "text/event-stream" if stream else "application/json"
    script(provider, loopback, Drip(0.02, content_type), Drip(0.02, content_type))
    m = model(provider, loopback, stream=stream, timeout_s=0.4, read_timeout_s=5, stall_timeout_s=5,
              max_retries=1)
    elapsed, result = await timed(m)
    assert isinstance(result, ModelError)
    assert len(loopback.requests) == 2
    assert 0.8 <= elapsed < 3.0
    message = str(result)
    assert "did not finish its answer within 0.4 s" in message
    assert f"[providers.{provider}] timeout_s" in message
    assert message.endswith("Gave up after 2 attempts (max_retries=1).")


# Before: a stream that went silent midway waited on the SDK's 600 s read timeout: hung.
@pytest.mark.timeout(15)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stalled_stream_is_retried_and_the_retry_answers(provider: str, loopback: Loopback) -> None:
    script(provider, loopback, stalled(provider), whole(provider, "the whole answer"))
    deltas: list[str] = []
    m = model(provider, loopback, stall_timeout_s=0.3, read_timeout_s=5, max_retries=2)
    start = time.monotonic()
    async with asyncio.timeout(GUARD_S):
        response = await m.request(ModelRequest(INFO, "", [Message.user("hi")], [], deltas.append))
    elapsed = time.monotonic() - start
    assert response.text == "the whole answer"
    assert response.stop_reason == "end_turn"
    assert len(loopback.requests) == 2
    assert 0.3 <= elapsed < 3.0
    assert "".join(deltas).endswith("the whole answer")  # the stalled attempt's text may come first


@pytest.mark.timeout(15)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_that_keeps_stalling_fails_naming_the_stall_timeout(provider: str,
                                                                          loopback: Loopback) -> None:
    script(provider, loopback, stalled(provider), stalled(provider))
    elapsed, result = await timed(model(provider, loopback, stall_timeout_s=0.25, read_timeout_s=5, max_retries=1))
    assert isinstance(result, ModelError)
    assert len(loopback.requests) == 2
    assert 0.5 <= elapsed < 3.0
    message = str(result)
    assert "sent no stream event for 0.25 s" in message
    assert f"[providers.{provider}] stall_timeout_s" in message
    assert message.endswith("Gave up after 2 attempts (max_retries=1).")


# Before: read_timeout_s did not exist (hung).  With the old per-read timeout_s=0.25 instead, the Anthropic
# SDK's read timeout inside a stream escaped as a raw httpx2.ReadTimeout: not a ModelError, never retried.
@pytest.mark.timeout(15)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_read_timeout_mid_stream_is_a_retried_model_error(provider: str, loopback: Loopback) -> None:
    script(provider, loopback, stalled(provider), stalled(provider))
    elapsed, result = await timed(model(provider, loopback, read_timeout_s=0.25, stall_timeout_s=5, max_retries=1))
    assert isinstance(result, ModelError)
    assert len(loopback.requests) == 2
    assert elapsed < 3.0
    assert f"[providers.{provider}] read_timeout_s" in str(result)


@pytest.mark.timeout(15)
async def test_a_timed_out_run_ends_with_outcome_error_not_a_traceback(loopback: Loopback, tmp_path: Any) -> None:
    script("openai", loopback, stalled("openai"), stalled("openai"))
    core = AgentCore(info=INFO, model=model("openai", loopback, stall_timeout_s=0.2, max_retries=1), system="",
                     registry=ToolRegistry([]), ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)))
    async with asyncio.timeout(GUARD_S):
        result = await core.run("hi")
    assert result.outcome == "error"
    assert result.error is not None
    assert "stall_timeout_s" in result.error


# Before: none of these existed; timeout_s went to the SDK as a per-operation timeout.
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_call_has_default_timeouts_handed_to_the_sdk(provider: str) -> None:
    for settings, expected in (({}, (10.0, 120.0, 120.0, 600.0)),
                               ({"connect_timeout_s": 1, "read_timeout_s": 2, "stall_timeout_s": 3,
                                 "timeout_s": 4}, (1.0, 2.0, 3.0, 4.0))):
        m: Any = resolve_model(f"{provider}:m", {"api_key": "k", **settings})
        t = m.timeouts
        assert (t.connect_s, t.read_s, t.stall_s, t.total_s) == expected
        client = m.connection.open()
        try:
            assert (client.timeout.connect, client.timeout.read) == expected[:2]
        finally:
            await client.close()
