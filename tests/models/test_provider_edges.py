"""Both adapters against a misbehaving provider, proxy or gateway (through the real SDKs, on loopback).

Each case is something a server really sends now and then: a data line that is not JSON, events out of
order, tool input that is not a JSON object, repeated tool-call ids, usage that is negative or not a
number, an HTML page (with 200 or 502), a body of ``{}``, lone UTF-16 surrogates.  The run never crashes:
the answer is retried and then ends with a clear error, or the bad part is made safe (a tool error for
the model, a fresh id, a zero count, U+FFFD).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ModelError
from subagents.messages import Message
from subagents.models.anthropic import AnthropicModel
from subagents.models.anthropic import from_spec as anthropic_from_spec
from subagents.models.base import INVALID_ARGUMENTS_KEY, AgentInfo, ModelRequest, ToolSpec
from subagents.models.openai import OpenAIModel
from subagents.models.openai import from_spec as openai_from_spec
from subagents.models.resolve import parse_model_string
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry, tool
from subagents.tools.paths import Workspace

from .loopback import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    SSE,
    Loopback,
    Raw,
    a_text,
    a_tool,
    anthropic_message,
    anthropic_stream,
    o_call,
    openai_completion,
    openai_stream,
)

INFO = AgentInfo("agent-1", "main", "general-purpose")
FAST = {"retry_base_s": 0.001, "retry_max_s": 0.01, "max_retries": 1, "read_timeout_s": 2.0,
        "stall_timeout_s": 2.0, "timeout_s": 4.0}
MALFORMED = "sent a malformed answer for model"
HTML_502 = (b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>"
            + b"<p>upstream went away</p>" * 2000 + b"</body></html>")


@tool(category="read")
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return {"alpha": "1"}.get(key, "missing")


def claude(loopback: Loopback, **settings: Any) -> AnthropicModel:
    return anthropic_from_spec(parse_model_string("anthropic:claude-x"),
                               {"api_key": "k", "base_url": loopback.url} | FAST | settings)


def local(loopback: Loopback, **settings: Any) -> OpenAIModel:
    return openai_from_spec(parse_model_string(f"openai:llama@{loopback.openai_url}"), FAST | settings)


def request() -> ModelRequest:
    return ModelRequest(INFO, "sys", [Message.user("hi")], [ToolSpec("lookup", "Look.", lookup.parameters)])


def core(model: AnthropicModel | OpenAIModel, tmp_path: Path) -> AgentCore:
    return AgentCore(info=INFO, model=model, system="sys", registry=ToolRegistry([lookup]),
                     ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)))


def a_events(message: dict[str, Any]) -> list[tuple[str | None, Any]]:
    return anthropic_stream(message).events


def o_events(completion: dict[str, Any]) -> list[tuple[str | None, Any]]:
    return openai_stream(completion).events


# -- a stream the SDK cannot read: retried, then a clear error -------------------------------------
async def test_openai_data_line_that_is_not_json_is_retried(loopback: Loopback) -> None:
    events = o_events(openai_completion("broken answer"))
    loopback.openai(SSE([*events[:2], (None, "not json {"), *events[2:]]), openai_stream(openai_completion("ok")))
    response = await local(loopback).request(request())
    assert response.text == "ok"
    assert len(loopback.requests) == 2


async def test_anthropic_data_line_that_is_not_json_is_retried(loopback: Loopback) -> None:
    events = a_events(anthropic_message(a_text("broken")))
    loopback.anthropic(SSE([*events[:3], ("content_block_delta", "garbage {")]),
                       anthropic_stream(anthropic_message(a_text("ok"))))
    response = await claude(loopback).request(request())
    assert response.text == "ok"


@pytest.mark.parametrize("case", ["delta before its block", "no message_start"])
async def test_anthropic_events_out_of_order_end_the_run_with_a_clear_error(loopback: Loopback, tmp_path: Path,
                                                                          case: str) -> None:
    events = a_events(anthropic_message(a_text("hello")))  # start, ping, block start, delta, block stop...
    bad = [events[0], events[3], events[2], *events[4:]] if case == "delta before its block" else events[2:]
    loopback.anthropic(SSE(bad), SSE(bad))
    result = await core(claude(loopback), tmp_path).run("hi")  # used to escape as IndexError / AssertionError
    assert result.outcome == "error"
    assert MALFORMED in (result.error or "")
    assert (result.error or "").endswith("Gave up after 2 attempts (max_retries=1).")


async def test_anthropic_tool_input_that_is_not_json_goes_back_to_the_model(loopback: Loopback) -> None:
    """Was retried, then the run's error; now one request, and the loop answers the call with a tool error."""
    events = a_events(anthropic_message(a_tool("toolu_1", "lookup", {"key": "alpha"}), stop_reason="tool_use"))
    events[4:-3] = [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "input_json_delta", "partial_json": '{"key": al'}})]
    loopback.anthropic(SSE(events))
    response = await claude(loopback).request(request())
    assert response.tool_calls[0].arguments == {INVALID_ARGUMENTS_KEY: '{"key": al'}
    assert len(loopback.requests) == 1


async def test_anthropic_usage_missing_from_message_delta_is_a_clear_error(loopback: Loopback) -> None:
    events = a_events(anthropic_message(a_text("hello")))
    events[-2] = ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": None})
    loopback.anthropic(SSE(events), SSE(events))
    with pytest.raises(ModelError) as info:
        await claude(loopback).request(request())
    assert MALFORMED in str(info.value)


# -- a body that is no answer: never an empty "ok" ------------------------------------------------
@pytest.mark.parametrize("body", [b"{}", b"<html><body>Please log in</body></html>"])
async def test_openai_non_answer_with_status_200_is_an_error_not_an_empty_answer(loopback: Loopback,
                                                                                 tmp_path: Path, body: bytes) -> None:
    kind = "application/json" if body == b"{}" else "text/html"
    loopback.openai(Raw(body, 200, kind), Raw(body, 200, kind))
    result = await core(local(loopback, stream=False), tmp_path).run("hi")
    assert result.outcome == "error"
    assert MALFORMED in (result.error or "")
    assert "no choices" in (result.error or "")


@pytest.mark.parametrize("body", [b"{}", b'{"type": "message", "content": null, "stop_reason": "end_turn"}',
                                  b"<html><body>Please log in</body></html>"])
async def test_anthropic_non_answer_with_status_200_is_a_clear_error(loopback: Loopback, tmp_path: Path,
                                                                     body: bytes) -> None:
    kind = "text/html" if body.startswith(b"<") else "application/json"
    loopback.anthropic(Raw(body, 200, kind), Raw(body, 200, kind))
    result = await core(claude(loopback, stream=False), tmp_path).run("hi")
    assert result.outcome == "error"
    assert MALFORMED in (result.error or "")
    assert "no content" in (result.error or "")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_html_error_page_is_summarised_not_pasted_whole(loopback: Loopback, provider: str) -> None:
    loopback.script(ANTHROPIC_PATH if provider == "anthropic" else OPENAI_PATH, *[Raw(HTML_502, 502)] * 2)
    model = claude(loopback) if provider == "anthropic" else local(loopback)
    with pytest.raises(ModelError) as info:
        await model.request(request())
    message = str(info.value)
    assert "returned HTTP 502 for model" in message
    assert ": HTML page: 502 Bad Gateway. To fix:" in message
    assert len(message) < 600
    assert info.value.status == 502


# -- bad parts made safe --------------------------------------------------------------------------
async def test_anthropic_tool_input_that_is_no_object_goes_back_to_the_model(loopback: Loopback) -> None:
    events = a_events(anthropic_message(a_tool("toolu_1", "lookup", {"key": "alpha"}), stop_reason="tool_use"))
    events[4:-3] = [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "input_json_delta", "partial_json": '["alpha"]'}})]
    loopback.anthropic(SSE(events),
                       anthropic_message(a_tool("toolu_2", "lookup", "alpha"), stop_reason="tool_use"))  # type: ignore[arg-type]
    streamed = await claude(loopback).request(request())
    plain = await claude(loopback, stream=False).request(request())
    assert streamed.tool_calls[0].arguments == {INVALID_ARGUMENTS_KEY: '["alpha"]'}  # used to be {}: run on a guess
    assert plain.tool_calls[0].arguments == {INVALID_ARGUMENTS_KEY: '"alpha"'}


async def test_repeated_and_empty_tool_call_ids_are_replaced(loopback: Loopback) -> None:
    loopback.anthropic(anthropic_stream(anthropic_message(
        a_tool("toolu_1", "lookup", {"key": "a"}), a_tool("toolu_1", "lookup", {"key": "b"}),
        a_tool("", "lookup", {"key": "c"}), stop_reason="tool_use")))
    loopback.openai(openai_stream(openai_completion(
        None, o_call("dup", "lookup", {"key": "a"}), o_call("dup", "lookup", {"key": "b"}))))
    for model in (claude(loopback), local(loopback)):
        calls = (await model.request(request())).tool_calls
        ids = [c.id for c in calls]
        assert ids[0] in ("toolu_1", "dup")
        assert all(ids)
        assert len(set(ids)) == len(ids)
        assert [c.arguments["key"] for c in calls][:2] == ["a", "b"]


@pytest.mark.parametrize("usage", [-5, "abc"])
async def test_usage_that_is_negative_or_not_a_number_counts_zero(loopback: Loopback, usage: Any) -> None:
    events = a_events(anthropic_message(a_text("hello")))
    events[-2][1]["usage"] = {"output_tokens": usage, "input_tokens": usage}
    completion = openai_completion("hello")
    completion["usage"] = {"prompt_tokens": usage, "completion_tokens": usage,
                           "prompt_tokens_details": {"cached_tokens": usage}}
    loopback.anthropic(SSE(events))
    loopback.openai(openai_stream(completion))
    for model in (claude(loopback), local(loopback)):
        response = await model.request(request())  # "abc" used to raise ValueError
        assert response.usage is not None
        counts = (response.usage.input_tokens, response.usage.output_tokens, response.usage.cache_read_tokens)
        assert min(counts) >= 0, counts


def _with_surrogates(sse: SSE) -> SSE:
    """``sse`` with ``LONE`` in text and ``ARGS`` in tool arguments replaced by the escape of a lone surrogate."""
    def swap(data: Any) -> Any:
        raw = json.dumps(data).encode().replace(b"LONE", b"\\ud800").replace(b"ARGS", b"\\\\ud800")
        return data if isinstance(data, str) else json.loads(raw)
    return SSE([(name, swap(data)) for name, data in sse.events])


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_lone_surrogates_do_not_poison_the_next_request(loopback: Loopback, tmp_path: Path,
                                                              provider: str) -> None:
    if provider == "anthropic":  # (the SDK refuses a lone surrogate in tool input: a malformed answer, retried)
        first = anthropic_stream(anthropic_message(a_text("bad LONE text"), a_tool("toolu_1", "lookup", {"key": "a"}),
                                                   stop_reason="tool_use"))
        second, marks = anthropic_stream(anthropic_message(a_text("done"))), 1
    else:
        first = openai_stream(openai_completion("bad LONE text", o_call("c1", "lookup", {"key": "ARGS"})),
                              json_chunk=100)
        second, marks = openai_stream(openai_completion("done")), 2
    path = ANTHROPIC_PATH if provider == "anthropic" else OPENAI_PATH
    loopback.script(path, _with_surrogates(first), second)
    model = claude(loopback) if provider == "anthropic" else local(loopback)
    result = await core(model, tmp_path).run("hi")  # the 2nd request used to fail: UnicodeEncodeError
    assert (result.outcome, result.text) == ("ok", "done"), result.error
    sent = json.dumps(loopback.bodies(path)[1]["messages"], ensure_ascii=False)
    assert "bad \ufffd text" in sent
    assert sent.count("\ufffd") == marks
