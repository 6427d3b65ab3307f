"""A stream that ends without a stop reason is a truncated answer: a retried ModelError, never "ok" (issue #12).

The loopback server (tests/models/loopback.py) writes the real SSE formats and then closes the
connection early; the official SDKs read them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from models.loopback import (
    SSE,
    Loopback,
    a_text,
    a_tool,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
)
from subagents.exceptions import ModelError
from subagents.messages import Message
from subagents.models.base import AgentInfo, Model, ModelRequest
from subagents.models.resolve import resolve_model
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.paths import Workspace

INFO = AgentInfo("agent-1", "main", "general-purpose")
ANSWER = "The answer is forty-two, and here is why it matters"


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    server = Loopback()
    try:
        yield server
    finally:
        server.close()


def model(provider: str, server: Loopback, **settings: Any) -> Model:
    url = server.url if provider == "anthropic" else server.openai_url
    return resolve_model(f"{provider}:test-model", {"api_key": "sk-test", "base_url": url, "retry_base_s": 0.001,
                                                    "retry_max_s": 0.01, **settings})


def ask() -> ModelRequest:
    return ModelRequest(INFO, "", [Message.user("hi")], [])


def anthropic_full(text: str = ANSWER) -> SSE:
    return anthropic_stream(anthropic_message(a_text(text)))


def anthropic_cut(drop: str) -> SSE:
    """The Anthropic stream of ANSWER, closed early: ``drop`` names where it ends."""
    events = anthropic_full().events
    kinds = [name for name, _ in events]
    if drop == "message_stop":  # everything but the final event
        return SSE(events[:-1])
    if drop == "message_delta":  # no stop_reason, no message_stop: cut after the text block
        return SSE(events[:kinds.index("message_delta")])
    if drop == "mid_text":  # cut inside the text
        return SSE(events[:kinds.index("content_block_delta") + 2])
    assert drop == "everything"  # HTTP 200 and no event at all
    return SSE([])


def openai_cut(drop: str) -> SSE:
    """The OpenAI stream of ANSWER, closed early (never ``[DONE]``)."""
    events = openai_stream(openai_completion(ANSWER)).events
    if drop == "finish_reason":  # all the text, then the connection closes: no finish chunk, no usage, no [DONE]
        return SSE(events[:-3])
    if drop == "mid_text":
        return SSE(events[:3])
    assert drop == "everything"
    return SSE([])


# Before: every cut was accepted after one request: "message_stop" as a normal answer (stop_reason
# end_turn, final usage never confirmed), "message_delta" with stop_reason None, "mid_text" as half
# the answer, and "everything" crashed with a bare AssertionError inside the SDK's get_final_message().
@pytest.mark.timeout(15)
@pytest.mark.parametrize("drop", ["message_stop", "message_delta", "mid_text", "everything"])
async def test_anthropic_truncated_stream_is_retried(drop: str, loopback: Loopback) -> None:
    loopback.anthropic(anthropic_cut(drop), anthropic_full())
    async with asyncio.timeout(8):
        response = await model("anthropic", loopback, max_retries=2).request(ask())
    assert (response.text, response.stop_reason) == (ANSWER, "end_turn")
    assert len(loopback.requests) == 2


# Before: accepted as an ok answer with stop_reason None (or half the text).
@pytest.mark.timeout(15)
@pytest.mark.parametrize("drop", ["finish_reason", "mid_text", "everything"])
async def test_openai_truncated_stream_is_retried(drop: str, loopback: Loopback) -> None:
    loopback.openai(openai_cut(drop), openai_stream(openai_completion(ANSWER)))
    async with asyncio.timeout(8):
        response = await model("openai", loopback, max_retries=2).request(ask())
    assert (response.text, response.stop_reason) == (ANSWER, "end_turn")
    assert len(loopback.requests) == 2


# Before (Anthropic): the SDK let the HTTP layer's RemoteProtocolError ("peer closed connection without
# sending complete message body") escape as a raw httpx2 exception: no ModelError, no retry.
@pytest.mark.timeout(15)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_connection_dropped_mid_stream_is_retried(provider: str, loopback: Loopback) -> None:
    if provider == "anthropic":
        cut = SSE(anthropic_cut("mid_text").events, short_body=True)
        loopback.anthropic(cut, anthropic_full())
    else:
        cut = SSE(openai_cut("mid_text").events, short_body=True)
        loopback.openai(cut, openai_stream(openai_completion(ANSWER)))
    async with asyncio.timeout(8):
        response = await model(provider, loopback, max_retries=1).request(ask())
    assert (response.text, response.stop_reason) == (ANSWER, "end_turn")
    assert len(loopback.requests) == 2

    (loopback.anthropic if provider == "anthropic" else loopback.openai)(cut, cut)
    with pytest.raises(ModelError) as info:
        async with asyncio.timeout(8):
            await model(provider, loopback, max_retries=1).request(ask())
    assert "dropped the connection mid-answer" in str(info.value)
    assert str(info.value).endswith("Gave up after 2 attempts (max_retries=1).")


# Before: the cut-off tool call (its stop_reason never came) was run as if the answer were complete.
@pytest.mark.timeout(15)
async def test_anthropic_tool_call_without_stop_reason_is_not_run(loopback: Loopback) -> None:
    events = anthropic_stream(anthropic_message(a_tool("toolu_1", "lookup", {"key": "alpha"}),
                                                stop_reason="tool_use")).events
    cut = SSE(events[:[name for name, _ in events].index("message_delta")])
    loopback.anthropic(cut, cut)
    with pytest.raises(ModelError) as info:
        async with asyncio.timeout(8):
            await model("anthropic", loopback, max_retries=1).request(ask())
    assert len(loopback.requests) == 2
    assert "no message_stop" in str(info.value)


@pytest.mark.timeout(15)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_stream_that_is_always_truncated_fails_the_run_clearly(provider: str, loopback: Loopback,
                                                                      tmp_path: Path) -> None:
    cut = anthropic_cut("message_delta") if provider == "anthropic" else openai_cut("finish_reason")
    (loopback.anthropic if provider == "anthropic" else loopback.openai)(cut, cut, cut)
    m = model(provider, loopback, max_retries=2)
    with pytest.raises(ModelError) as info:
        async with asyncio.timeout(8):
            await m.request(ask())
    message = str(info.value)
    assert "ended before the answer was complete" in message
    assert message.endswith("Gave up after 3 attempts (max_retries=2).")
    assert (info.value.retryable, info.value.provider) == (True, provider)
    assert len(loopback.requests) == 3

    (loopback.anthropic if provider == "anthropic" else loopback.openai)(cut, cut, cut)
    core = AgentCore(info=INFO, model=m, system="", registry=ToolRegistry([]),
                     ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)))
    async with asyncio.timeout(8):
        result = await core.run("hi")
    assert result.outcome == "error"
    assert result.error is not None
    assert "ended before the answer was complete" in result.error
