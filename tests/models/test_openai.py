"""The OpenAI adapter (and compatible servers), driven through the official SDK against the loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ModelError
from subagents.messages import Message, Usage
from subagents.models.base import AgentInfo, ModelRequest, ToolSpec
from subagents.models.openai import INVALID_ARGUMENTS_KEY, OpenAIModel, from_spec, parse_arguments
from subagents.models.resolve import parse_model_string, resolve_model
from subagents.runtime.events import Event, EventBus
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry, tool
from subagents.tools.paths import Workspace

from .loopback import OPENAI_PATH, Loopback, Reply, o_call, openai_completion, openai_error, openai_stream

MODEL = "gpt-4.1"
INFO = AgentInfo("agent-1", "main", "general-purpose")


@tool(category="read")
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return {"alpha": "1", "beta": "2"}.get(key, "missing")


def official(loopback: Loopback, **settings: Any) -> OpenAIModel:
    """``openai:<model>`` with a key, its base URL moved to the loopback server by settings."""
    base = {"api_key": "sk-test", "base_url": loopback.openai_url, "retry_base_s": 0.001, "retry_max_s": 0.01}
    m = from_spec(parse_model_string(f"openai:{MODEL}"), base | settings)
    return m


def compatible(loopback: Loopback, **settings: Any) -> OpenAIModel:
    """``openai:<model>@<base_url>``: a compatible server, no key."""
    base = {"retry_base_s": 0.001, "retry_max_s": 0.01}
    return from_spec(parse_model_string(f"openai:llama3.1@{loopback.openai_url}"), base | settings)


def request(on_text: Any = None) -> ModelRequest:
    spec = ToolSpec("lookup", "Look a key up.", lookup.parameters)
    return ModelRequest(INFO, "You are terse.", [Message.user("hi")], [spec], on_text)


def core(model: OpenAIModel, tmp_path: Path, bus: EventBus | None = None) -> AgentCore:
    return AgentCore(info=INFO, model=model, system="You are terse.", registry=ToolRegistry([lookup]),
                     ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)), bus=bus)


async def test_multi_turn_parallel_tool_run_through_agent_core(loopback: Loopback, tmp_path: Path) -> None:
    loopback.openai(
        openai_stream(openai_completion("Checking.", o_call("call_a", "lookup", {"key": "alpha"}),
                                        o_call("call_b", "lookup", {"key": "nope"}), o_call("call_c", "lookup", {}),
                                        prompt_tokens=50, completion_tokens=20, cached_tokens=0)),
        openai_stream(openai_completion("alpha is 1.", prompt_tokens=120, completion_tokens=6, cached_tokens=64)),
    )
    bus = EventBus()
    events: list[Event] = []
    bus.on(events.append)

    result = await core(official(loopback), tmp_path, bus).run("What is alpha?")

    assert (result.outcome, result.text, result.turns, result.tool_calls) == ("ok", "alpha is 1.", 2, 3)
    assert result.usage == Usage(input_tokens=170, output_tokens=26, cache_read_tokens=64)
    # gpt-4.1: $2 in, $8 out, $0.50 cache read per million tokens
    assert result.cost_usd == pytest.approx(((170 - 64) * 2 + 26 * 8 + 64 * 0.5) / 1e6)
    assert [e.data["text"] for e in events if e.kind == "assistant_text"] == ["Checking.", "alpha ", "is ", "1."]

    first, second = loopback.bodies(OPENAI_PATH)
    assert (first["model"], first["max_completion_tokens"], first["stream"], first["stream_options"]) == (
        MODEL, 8192, True, {"include_usage": True})
    assert "max_tokens" not in first
    assert first["messages"] == [{"role": "system", "content": "You are terse."},
                                 {"role": "user", "content": "What is alpha?"}]
    assert first["tools"] == [{"type": "function", "function": {
        "name": "lookup", "description": lookup.description, "parameters": lookup.parameters}}]
    assert second["messages"][2:] == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "alpha"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "nope"}'}},
            {"id": "call_c", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_a", "content": "1"},
        {"role": "tool", "tool_call_id": "call_b", "content": "missing"},
        {"role": "tool", "tool_call_id": "call_c",
         "content": "Error: invalid arguments for tool 'lookup': arguments is missing the required property 'key'. "
                    "Fix the arguments and call it again."},
    ]


async def test_compatible_server_needs_no_key_and_gets_max_tokens(loopback: Loopback) -> None:
    loopback.openai(openai_completion("hello"))
    m = compatible(loopback, stream=False)
    assert m.name == f"openai:llama3.1@{loopback.openai_url}"
    response = await m.request(request())
    assert response.text == "hello"
    assert response.stop_reason == "end_turn"
    body = loopback.bodies(OPENAI_PATH)[0]
    assert body["max_tokens"] == 8192
    assert "max_completion_tokens" not in body
    assert "stream" not in body
    assert loopback.requests[0].headers["authorization"] == "Bearer not-needed"
    assert loopback.requests[0].headers["x-stainless-retry-count"] == "0"


@pytest.mark.parametrize("stream", [True, False])
async def test_quirks_missing_usage_missing_ids_list_content(loopback: Loopback, stream: bool) -> None:
    completion = openai_completion([{"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}],
                                   o_call(None, "lookup", {"key": "a"}), o_call(None, "lookup", {"key": "b"}),
                                   usage=False)
    if stream:
        completion["choices"][0]["message"]["content"] = "part one, part two"
    loopback.openai(openai_stream(completion) if stream else completion)
    response = await compatible(loopback, stream=stream).request(request())
    assert response.text == "part one, part two"
    assert response.usage == Usage()
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("lookup", {"key": "a"}), ("lookup", {"key": "b"})]
    ids = [c.id for c in response.tool_calls]
    assert all(ids)
    assert len(set(ids)) == 2
    assert response.stop_reason == "tool_use"


async def test_invalid_json_arguments_reach_the_model_as_a_tool_error(loopback: Loopback, tmp_path: Path) -> None:
    loopback.openai(
        openai_completion(None, o_call("call_x", "lookup", '{"key": "alpha"')),
        openai_completion("gave up"),
    )
    result = await core(compatible(loopback, stream=False), tmp_path).run("go")
    assert result.text == "gave up"
    tool_msg = loopback.bodies(OPENAI_PATH)[1]["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["tool_call_id"] == "call_x"
    assert tool_msg["content"] == ("Error: the arguments of tool 'lookup' were not valid JSON: '{\"key\": \"alpha\"'; "
                                   "resend the call with the arguments as one JSON object")


def test_parse_arguments() -> None:
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("") == {}
    assert parse_arguments(None) == {}
    assert parse_arguments({"a": 1}) == {"a": 1}
    assert parse_arguments('{"a": ') == {INVALID_ARGUMENTS_KEY: '{"a": '}
    assert parse_arguments("[1]") == {INVALID_ARGUMENTS_KEY: "[1]"}


async def test_streamed_deltas_arrive_in_order(loopback: Loopback) -> None:
    pieces = ["one ", "two ", "three ", "four"]
    loopback.openai(openai_stream(openai_completion("one two three four"), text_pieces=pieces))
    seen: list[str] = []
    response = await official(loopback).request(request(seen.append))
    assert seen == pieces
    assert response.text == "one two three four"


@pytest.mark.parametrize("stream", [True, False])
async def test_retries_429_and_5xx_then_succeeds(loopback: Loopback, stream: bool) -> None:
    done = openai_completion("ok")
    loopback.openai(
        openai_error(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded", {"retry-after": "0"}),
        openai_error(500, "The server had an error while processing your request.", "server_error"),
        openai_error(503, "The engine is currently overloaded.", "server_error"),
        openai_stream(done) if stream else done,
    )
    response = await official(loopback, stream=stream).request(request())
    assert response.text == "ok"
    assert len(loopback.requests) == 4


async def test_gives_up_after_max_retries(loopback: Loopback) -> None:
    loopback.openai(*[openai_error(500, "boom", "server_error")] * 2)
    with pytest.raises(ModelError) as info:
        await official(loopback, max_retries=1).request(request())
    assert str(info.value) == (
        f"OpenAI API returned HTTP 500 for model {MODEL!r}: boom. To fix: the provider is failing or overloaded; "
        "try again later or raise max_retries. Gave up after 2 attempts (max_retries=1)."
    )
    assert len(loopback.requests) == 2


async def test_401_is_not_retried(loopback: Loopback) -> None:
    loopback.openai(openai_error(401, "Incorrect API key provided: sk-test.", "invalid_request_error",
                                 "invalid_api_key"))
    with pytest.raises(ModelError) as info:
        await official(loopback).request(request())
    assert str(info.value) == (
        f"OpenAI API returned HTTP 401 for model {MODEL!r}: Incorrect API key provided: sk-test. To fix: check the "
        "API key: set OPENAI_API_KEY or [providers.openai] api_key."
    )
    assert (info.value.provider, info.value.status, info.value.retryable) == ("openai", 401, False)
    assert len(loopback.requests) == 1


async def test_context_length_400_is_not_retried(loopback: Loopback) -> None:
    loopback.openai(openai_error(400, "This model's maximum context length is 128000 tokens.",
                                 "invalid_request_error", "context_length_exceeded"))
    with pytest.raises(ModelError) as info:
        await compatible(loopback).request(request())
    assert str(info.value) == (
        f"OpenAI-compatible server at {loopback.openai_url} returned HTTP 400 for model 'llama3.1': This model's "
        "maximum context length is 128000 tokens. To fix: the conversation no longer fits the model's context "
        "window; start a fresh run or shorten the prompt."
    )
    assert len(loopback.requests) == 1


async def test_length_cut_off_inside_a_tool_call_is_an_error(loopback: Loopback) -> None:
    loopback.openai(openai_completion(None, o_call("c1", "lookup", '{"key": "al'), finish_reason="length"))
    with pytest.raises(ModelError, match="cut off at max_output_tokens=8192"):
        await official(loopback, stream=False).request(request())


async def test_missing_key_is_a_clear_error() -> None:
    with pytest.raises(ModelError) as info:
        await resolve_model(f"openai:{MODEL}").request(request())
    assert str(info.value) == (
        "No OpenAI API key is configured; set OPENAI_API_KEY or [providers.openai] api_key, or name a compatible "
        "server that needs no key with openai:<model>@<base_url>."
    )


async def test_server_not_running_is_reported() -> None:
    m = from_spec(parse_model_string("openai:llama3.1@http://127.0.0.1:9/v1"), {"max_retries": 0})
    with pytest.raises(ModelError) as info:
        await m.request(request())
    assert str(info.value).startswith("OpenAI API could not be reached at http://127.0.0.1:9/v1 (")


async def test_error_body_that_is_not_json(loopback: Loopback) -> None:
    loopback.openai(Reply({"detail": "Not Found"}, 404))
    with pytest.raises(ModelError) as info:
        await compatible(loopback).request(request())
    assert "HTTP 404" in str(info.value)
    assert "check the model name 'llama3.1'" in str(info.value)
