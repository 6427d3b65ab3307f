"""The Anthropic adapter, driven through the official SDK against the loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ModelError
from subagents.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from subagents.models.anthropic import AnthropicModel, from_spec, to_anthropic
from subagents.models.base import AgentInfo, ModelRequest, ToolSpec
from subagents.models.resolve import parse_model_string, resolve_model
from subagents.runtime.events import Event, EventBus
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry, tool
from subagents.tools.paths import Workspace

from .loopback import ANTHROPIC_PATH, Loopback, a_text, a_tool, anthropic_error, anthropic_message, anthropic_stream

MODEL = "claude-sonnet-4-6"
EPHEMERAL = {"type": "ephemeral"}
INFO = AgentInfo("agent-1", "main", "general-purpose")


@tool(category="read")
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return {"alpha": "1", "beta": "2"}.get(key, "missing")


@tool(category="read")
def fail(reason: str) -> str:
    """Always fails.

    Args:
        reason: why.
    """
    raise ValueError(reason)


def model(loopback: Loopback, **settings: Any) -> AnthropicModel:
    base = {"api_key": "sk-test", "base_url": loopback.url, "retry_base_s": 0.001, "retry_max_s": 0.01}
    return from_spec(parse_model_string(f"anthropic:{MODEL}"), base | settings)


def request(text: str = "hi", on_text: Any = None) -> ModelRequest:
    spec = ToolSpec("lookup", "Look a key up.", {"type": "object", "properties": {"key": {"type": "string"}}})
    return ModelRequest(INFO, "You are terse.", [Message.user(text)], [spec], on_text)


async def test_multi_turn_tool_run_through_agent_core(loopback: Loopback, tmp_path: Path) -> None:
    loopback.anthropic(
        anthropic_stream(anthropic_message(
            a_text("Looking both up."), a_tool("toolu_01", "lookup", {"key": "alpha"}),
            a_tool("toolu_02", "fail", {"reason": "no beta"}),
            stop_reason="tool_use", input_tokens=20, output_tokens=30, cache_write=1000)),
        anthropic_stream(anthropic_message(
            a_text("alpha is 1 and beta failed."), input_tokens=60, output_tokens=8, cache_read=1000)),
    )
    bus = EventBus()
    events: list[Event] = []
    bus.on(events.append)
    core = AgentCore(info=INFO, model=model(loopback), system="You are terse.",
                     registry=ToolRegistry([lookup, fail]),
                     ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)), bus=bus)

    result = await core.run("What are alpha and beta?")

    assert (result.outcome, result.text, result.turns, result.tool_calls) == (
        "ok", "alpha is 1 and beta failed.", 2, 2)
    assert result.usage == Usage(input_tokens=2080, output_tokens=38, cache_read_tokens=1000, cache_write_tokens=1000)
    # claude-sonnet-4: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million tokens
    assert result.cost_usd == pytest.approx((80 * 3 + 38 * 15 + 1000 * 0.3 + 1000 * 3.75) / 1e6)
    deltas = [e.data["text"] for e in events if e.kind == "assistant_text"]
    assert deltas == ["Looking ", "both ", "up.", "alpha ", "is ", "1 ", "and ", "beta ", "failed."]
    assert all(e.data["delta"] for e in events if e.kind == "assistant_text")

    first, second = loopback.bodies(ANTHROPIC_PATH)
    assert first["model"] == MODEL
    assert first["max_tokens"] == 8192
    assert first["stream"] is True
    assert first["system"] == [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}]
    assert [t["name"] for t in first["tools"]] == ["lookup", "fail"]
    assert first["tools"][0]["input_schema"] == lookup.parameters
    assert "cache_control" not in first["tools"][0]
    assert first["tools"][1]["cache_control"] == EPHEMERAL
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What are alpha and beta?", "cache_control": EPHEMERAL}]}
    ]
    assert second["messages"][1:] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking both up."},
            {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"key": "alpha"}},
            {"type": "tool_use", "id": "toolu_02", "name": "fail", "input": {"reason": "no beta"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "1", "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "tool 'fail' failed: ValueError: no beta",
             "is_error": True, "cache_control": EPHEMERAL},
        ]},
    ]
    assert second["messages"][0]["content"][0] == {"type": "text", "text": "What are alpha and beta?"}


async def test_non_streaming_maps_text_usage_and_stop_reason(loopback: Loopback) -> None:
    loopback.anthropic(anthropic_message(a_text("Done."), stop_reason="max_tokens", input_tokens=7,
                                         output_tokens=3, cache_read=5, cache_write=2))
    deltas: list[str] = []
    response = await model(loopback, stream=False).request(request(on_text=deltas.append))
    assert (response.text, response.tool_calls, response.stop_reason) == ("Done.", [], "max_tokens")
    assert response.usage == Usage(input_tokens=14, output_tokens=3, cache_read_tokens=5, cache_write_tokens=2)
    assert deltas == []
    assert "stream" not in loopback.bodies(ANTHROPIC_PATH)[0]


async def test_headers_carry_the_key_and_no_sdk_retry(loopback: Loopback) -> None:
    loopback.anthropic(anthropic_message(a_text("ok")))
    await model(loopback, stream=False).request(request())
    headers = loopback.requests[0].headers
    assert "sk-test" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    assert headers["x-stainless-retry-count"] == "0"
    assert "anthropic-version" in headers


@pytest.mark.parametrize("stream", [True, False])
async def test_retries_429_529_and_500_then_succeeds(loopback: Loopback, stream: bool) -> None:
    loopback.anthropic(
        anthropic_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit.",
                        {"retry-after": "0"}),
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_error(500, "api_error", "Internal server error"),
        anthropic_stream(anthropic_message(a_text("finally"))) if stream else anthropic_message(a_text("finally")),
    )
    response = await model(loopback, stream=stream).request(request())
    assert response.text == "finally"
    assert len(loopback.requests) == 4


async def test_retry_after_is_honoured(loopback: Loopback) -> None:
    from subagents.models import _retry

    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    loopback.anthropic(anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "0.004"}),
                       anthropic_message(a_text("ok")))
    m = model(loopback, stream=False, retry_max_s=5)
    params = to_anthropic("", [Message.user("x")], []) | {"model": MODEL, "max_tokens": 5}
    response = await _retry.call_with_retries(lambda: m._attempt(params, request()), m.retry, sleep=sleep)
    assert response.text == "ok"
    assert slept == [0.004]


async def test_mid_stream_overloaded_error_is_retried(loopback: Loopback) -> None:
    broken = anthropic_stream(anthropic_message(a_text("partial answer")))
    broken.events[3:] = [("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})]
    loopback.anthropic(broken, anthropic_stream(anthropic_message(a_text("whole answer"))))
    response = await model(loopback).request(request())
    assert response.text == "whole answer"
    assert len(loopback.requests) == 2


async def test_gives_up_after_max_retries(loopback: Loopback) -> None:
    loopback.anthropic(*[anthropic_error(529, "overloaded_error", "Overloaded")] * 3)
    with pytest.raises(ModelError) as info:
        await model(loopback, max_retries=2, stream=False).request(request())
    assert str(info.value) == (
        f"Anthropic API returned HTTP 529 for model {MODEL!r}: Overloaded. To fix: the provider is failing or "
        "overloaded; try again later or raise max_retries. Gave up after 3 attempts (max_retries=2)."
    )
    assert (info.value.provider, info.value.status, info.value.retryable) == ("anthropic", 529, True)
    assert len(loopback.requests) == 3


async def test_401_is_not_retried_and_says_what_to_do(loopback: Loopback) -> None:
    loopback.anthropic(anthropic_error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(ModelError) as info:
        await model(loopback).request(request())
    assert str(info.value) == (
        f"Anthropic API returned HTTP 401 for model {MODEL!r}: invalid x-api-key. To fix: check the API key: "
        "set ANTHROPIC_API_KEY or [providers.anthropic] api_key."
    )
    assert (info.value.status, info.value.retryable) == (401, False)
    assert len(loopback.requests) == 1


async def test_context_length_400_is_not_retried(loopback: Loopback) -> None:
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"
    loopback.anthropic(anthropic_error(400, "invalid_request_error", too_long))
    with pytest.raises(ModelError) as info:
        await model(loopback).request(request())
    assert str(info.value) == (
        f"Anthropic API returned HTTP 400 for model {MODEL!r}: prompt is too long: 210000 tokens > 200000 maximum. "
        "To fix: the conversation no longer fits the model's context window; start a fresh run or shorten the prompt."
    )
    assert len(loopback.requests) == 1


async def test_model_error_ends_the_run_with_outcome_error(loopback: Loopback, tmp_path: Path) -> None:
    loopback.anthropic(anthropic_error(403, "permission_error", "no access"))
    core = AgentCore(info=INFO, model=model(loopback), system="", registry=ToolRegistry([]),
                     ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)))
    result = await core.run("hi")
    assert result.outcome == "error"
    assert result.error is not None
    assert "HTTP 403" in result.error


async def test_tool_call_cut_off_by_max_tokens_is_an_error(loopback: Loopback) -> None:
    loopback.anthropic(anthropic_message(a_tool("toolu_9", "lookup", {"key": "al"}), stop_reason="max_tokens"))
    with pytest.raises(ModelError) as info:
        await model(loopback, stream=False, max_output_tokens=64).request(request())
    assert str(info.value) == (
        "Claude was cut off at max_output_tokens=64 while writing the arguments of tool 'lookup', so the call "
        "was not run; raise max_output_tokens in the model settings."
    )


async def test_connection_refused_is_retried_then_reported() -> None:
    m = from_spec(parse_model_string(f"anthropic:{MODEL}"),
                  {"api_key": "k", "base_url": "http://127.0.0.1:9", "max_retries": 1, "retry_base_s": 0.001})
    with pytest.raises(ModelError) as info:
        await m.request(request())
    assert str(info.value).startswith("Anthropic API could not connect at http://127.0.0.1:9 (")
    assert str(info.value).endswith("Gave up after 2 attempts (max_retries=1).")


async def test_missing_key_is_a_clear_error() -> None:
    m = resolve_model(f"anthropic:{MODEL}")
    with pytest.raises(ModelError) as info:
        await m.request(request())
    assert str(info.value) == (
        "No Anthropic API key is configured; set ANTHROPIC_API_KEY or [providers.anthropic] api_key "
        "(or ANTHROPIC_AUTH_TOKEN)."
    )


async def test_key_from_environment(loopback: Loopback, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.url)
    loopback.anthropic(anthropic_message(a_text("ok")))
    response = await resolve_model(f"anthropic:{MODEL}", {"stream": False}).request(request())
    assert response.text == "ok"
    headers = loopback.requests[0].headers
    assert "sk-env" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


def test_mapping_skips_empty_text_and_marks_the_last_block() -> None:
    messages = [
        Message.user("q"),
        Message("assistant", [TextBlock(""), ToolUseBlock("t1", "lookup", {"key": "a"})]),
        Message("user", [ToolResultBlock("t1", "1"), TextBlock("also this")]),
    ]
    params = to_anthropic("", messages, [])
    assert "system" not in params
    assert "tools" not in params
    assert params["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"key": "a"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "1", "is_error": False},
            {"type": "text", "text": "also this", "cache_control": EPHEMERAL},
        ]},
    ]


def test_name_and_settings() -> None:
    m = from_spec(parse_model_string(f"anthropic:{MODEL}"), {"max_output_tokens": 100, "stream": False,
                                                             "max_retries": 7})
    assert (m.name, m.max_output_tokens, m.stream, m.retry.max_retries) == (f"anthropic:{MODEL}", 100, False, 7)
