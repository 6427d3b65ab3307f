"""Both adapters against a hostile or broken server (found by trying to break them; each test fails on the code
before its fix): a ``retry-after`` of NaN (the retry slept forever), usage of ``10**400`` tokens (the cost math
overflowed and crashed the run) or of infinity (counted 0), tool arguments streamed in many small pieces (joined
in quadratic time: minutes of CPU with the event loop blocked), fields of the wrong type (a raw ``TypeError``
ended the run, never retried), an OpenAI ``refusal`` (dropped: an empty answer), a 200 answer to a streamed
request that is no stream (reported as a dropped connection, a whole JSON answer lost), a lone surrogate in the
request (every call failed), an API key with a line break or a non-ASCII character (the error quoted the key and
was retried as a network failure), and parallel calls streamed all at index 0 (merged into one broken call)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ConfigError, ModelError
from subagents.limits import Limits
from subagents.models._openai_answer import StreamAssembler
from subagents.models.anthropic import from_spec as anthropic_from_spec
from subagents.models.openai import OpenAIConnection, OpenAIModel
from subagents.models.openai import from_spec as openai_from_spec
from subagents.models.resolve import parse_model_string
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry, tool
from subagents.tools.paths import Workspace

from .loopback import (
    Loopback,
    Raw,
    Reply,
    a_text,
    a_tool,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    o_call,
    openai_completion,
    openai_error,
    openai_stream,
)
from .test_provider_edges import INFO, claude, local, lookup, request

MAX_TOKENS = 10**12  # (models/_sanitize.py: the most one answer may report)


# -- retry-after: a value that is no number must not stop the retry for good ------------------------------------
@pytest.mark.parametrize(("provider", "header"), [("openai", "retry-after"), ("openai", "retry-after-ms"),
                                                  ("anthropic", "retry-after"), ("anthropic", "retry-after-ms")])
async def test_a_retry_after_of_nan_does_not_hang_the_retry(loopback: Loopback, provider: str, header: str) -> None:
    """Before: ``float("nan")`` passed the cap (``min``/``max`` keep NaN) and ``asyncio.sleep(nan)`` never returns."""
    if provider == "openai":
        loopback.openai(openai_error(429, "slow down", "rate_limit_error", headers={header: "nan"}),
                        openai_stream(openai_completion("ok")))
        model: Any = local(loopback, retry_max_s=5.0)
    else:
        loopback.anthropic(anthropic_error(529, "overloaded_error", "busy", headers={header: "NaN"}),
                           anthropic_stream(anthropic_message(a_text("ok"))))
        model = claude(loopback, retry_max_s=5.0)
    response = await asyncio.wait_for(model.request(request()), 20)
    assert response.text == "ok"


# -- usage: a count past any model's is capped, and the budget still stops the run --------------------------------
def gpt(loopback: Loopback) -> OpenAIModel:
    """A priced model (gpt-4o) behind the loopback server."""
    return OpenAIModel("gpt-4o", OpenAIConnection(api_key="k", base_url=loopback.openai_url))


def _core(model: OpenAIModel, tmp_path: Path, limits: Limits | None = None) -> AgentCore:
    return AgentCore(info=INFO, model=model, system="sys", registry=ToolRegistry([lookup]),
                     ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)), limits=limits)


def _huge_usage(n: int) -> Any:
    completion = openai_completion("hello")
    completion["usage"] = {"prompt_tokens": n, "completion_tokens": n}
    return openai_stream(completion)


@pytest.mark.parametrize("n", [10**30, 10**400])
async def test_a_huge_token_count_is_capped(loopback: Loopback, tmp_path: Path, n: int) -> None:
    loopback.openai(_huge_usage(n))
    result = await _core(gpt(loopback), tmp_path).run("hi")  # 10**400 used to raise OverflowError from the cost
    assert result.usage.input_tokens == MAX_TOKENS


async def test_a_huge_token_count_still_stops_a_cost_budget(loopback: Loopback, tmp_path: Path) -> None:
    loopback.openai(_huge_usage(10**400))
    result = await _core(gpt(loopback), tmp_path, Limits(max_cost_usd=1.0)).run("hi")
    assert (result.outcome, result.limit) == ("limit", "max_cost_usd")


async def test_an_infinite_token_count_still_stops_a_token_budget(loopback: Loopback, tmp_path: Path) -> None:
    """Before: ``1e999`` (infinity in JSON) counted 0 tokens, so the budget never saw it."""
    completion = openai_completion("hello")
    sse = openai_stream(completion)
    sse.events[-2] = (None, '{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", '
                            '"choices": [], "usage": {"prompt_tokens": 1e999, "completion_tokens": 1}}')
    loopback.openai(sse)
    result = await _core(gpt(loopback), tmp_path, Limits(max_tokens=1000)).run("hi")
    assert (result.outcome, result.limit) == ("limit", "max_tokens")


# -- tool arguments in many pieces: joined once -----------------------------------------------------------------
def test_tool_arguments_streamed_in_many_small_pieces_are_joined_in_linear_time() -> None:
    """2 MB of arguments in 10-byte pieces: before, each piece copied all of the arguments so far (minutes)."""
    assembler = StreamAssembler()

    def delta(arguments: str, **extra: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": arguments},
                                                                   **extra}]}}]}

    started = time.perf_counter()
    assembler.add(delta('{"key": "', id="c1"))
    for _ in range(200_000):
        assembler.add(delta("x" * 10))
    assembler.add(delta('"}'))
    assembler.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    call = assembler.response(100).tool_calls[0]
    assert time.perf_counter() - started < 15, "quadratic join"
    assert len(call.arguments["key"]) == 2_000_000


def test_a_tool_name_streamed_without_end_is_cut() -> None:
    assembler = StreamAssembler()
    for i in range(20_000):  # (a piece that does not start with the name so far is appended to it)
        piece = "xy"[i % 2]
        assembler.add({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": piece}}]}}]})
    assembler.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert len(assembler.response(100).tool_calls[0].name) <= 1024


# -- fields of the wrong type: a malformed answer, retried -------------------------------------------------------
def _index(value: Any) -> Any:
    sse = openai_stream(openai_completion("", o_call("c1", "lookup", {"key": "a"})))
    for _, data in sse.events:
        for choice in data.get("choices", []) if isinstance(data, dict) else []:
            for tc in choice["delta"].get("tool_calls") or []:
                tc["index"] = value
    return sse


def _completion(**changes: Any) -> dict[str, Any]:
    completion = openai_completion("x")
    for key, value in changes.items():
        if key in ("tool_calls", "content"):
            completion["choices"][0]["message"][key] = value
        elif key == "finish_reason":
            completion["choices"][0][key] = value
        else:
            completion[key] = value
    return completion


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: _index("x"), id="stream-index-not-a-number"),
    pytest.param(lambda: _index([0]), id="stream-index-a-list"),
    pytest.param(lambda: Reply(_completion(choices=5)), id="choices-a-number"),
    pytest.param(lambda: Reply(_completion(tool_calls=5)), id="tool-calls-a-number"),
])
async def test_openai_fields_of_the_wrong_type_are_a_malformed_answer_that_is_retried(loopback: Loopback,
                                                                                      bad: Any) -> None:
    first = bad()
    stream = not isinstance(first, Reply)
    loopback.openai(first, openai_stream(openai_completion("ok")) if stream else openai_completion("ok"))
    response = await local(loopback, stream=stream).request(request())  # before: TypeError / ValueError, no retry
    assert response.text == "ok"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_stop_reason_that_is_no_string_is_not_a_crash(loopback: Loopback, provider: str) -> None:
    if provider == "openai":
        loopback.openai(_completion(finish_reason=["stop"]))
        model: Any = local(loopback, stream=False)
    else:
        loopback.anthropic(dict(anthropic_message(a_text("x")), stop_reason=["end_turn"]))
        model = claude(loopback, stream=False)
    response = await model.request(request())  # before: TypeError: unhashable type: 'list'
    assert isinstance(response.stop_reason, str)


# -- an OpenAI refusal is the answer --------------------------------------------------------------------------
async def test_an_openai_refusal_is_the_answer(loopback: Loopback) -> None:
    completion = openai_completion(None)
    completion["choices"][0]["message"]["refusal"] = "I can't help with that."
    loopback.openai(completion)
    response = await local(loopback, stream=False).request(request())  # before: "" and end_turn
    assert (response.text, response.stop_reason) == ("I can't help with that.", "refusal")


async def test_a_streamed_openai_refusal_is_the_answer(loopback: Loopback, tmp_path: Path) -> None:
    sse = openai_stream(openai_completion(None))
    head = {k: v for k, v in sse.events[0][1].items() if k != "choices"}
    sse.events[1:1] = [(None, dict(head, choices=[{"index": 0, "delta": {"refusal": p}, "finish_reason": None}]))
                       for p in ("I can't ", "help.")]
    loopback.openai(sse)
    result = await _core(OpenAIModel("llama", OpenAIConnection(base_url=loopback.openai_url, api_key="k",
                                                               compatible=True)), tmp_path).run("hi")
    assert result.text == "I can't help."



# -- a 200 answer to a stream request that is no stream ---------------------------------------------------------
async def test_a_whole_json_answer_to_a_stream_request_is_taken(loopback: Loopback) -> None:
    """A compatible server that ignores ``stream: true``: before, an empty stream, "truncated", and the answer lost."""
    loopback.openai(openai_completion("whole", o_call("c1", "lookup", {"key": "a"})))
    response = await local(loopback).request(request())
    assert (response.text, [c.arguments for c in response.tool_calls]) == ("whole", [{"key": "a"}])


@pytest.mark.parametrize(("body", "kind", "said"), [
    (b"<html><head><title>Sign in to the proxy</title></head><body>...</body></html>", "text/html",
     "a text/html body instead of a stream: HTML page: Sign in to the proxy"),
    (b'{"error": {"message": "model llama is loading"}}', "application/json",
     "an error with status 200: {'message': 'model llama is loading'}"),
])
async def test_a_page_or_an_error_instead_of_a_stream_is_a_malformed_answer(loopback: Loopback, body: bytes,
                                                                            kind: str, said: str) -> None:
    """Before: "the stream ... ended before the answer was complete (no finish_reason)", a dropped connection."""
    loopback.openai(Raw(body, 200, kind), Raw(body, 200, kind))
    with pytest.raises(ModelError) as info:
        await local(loopback).request(request())
    assert said in str(info.value)


# -- a lone surrogate in the request: sent as U+FFFD, not a failed run ------------------------------------------
@tool(category="read")
def list_names(path: str) -> str:
    """List file names.

    Args:
        path: the directory.
    """
    return "\udcffbad.txt\nok.txt"  # what os.listdir gives for a name that is not UTF-8 (surrogateescape)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("where", ["prompt", "system", "tool"])
async def test_a_lone_surrogate_in_the_request_is_sent_as_a_replacement_character(
        loopback: Loopback, tmp_path: Path, provider: str, where: str) -> None:
    """Before: the SDK could not encode the request (UnicodeEncodeError), so every call failed and the run ended."""
    if provider == "openai":
        loopback.openai(openai_stream(openai_completion("", o_call("c1", "list_names", {"path": "."}))),
                        openai_stream(openai_completion("done")))
        model: Any = local(loopback)
    else:
        loopback.anthropic(anthropic_stream(anthropic_message(a_tool("t1", "list_names", {"path": "."}),
                                                              stop_reason="tool_use")),
                           anthropic_stream(anthropic_message(a_text("done"))))
        model = claude(loopback)
    core = AgentCore(info=INFO, model=model, system="sys \udc80" if where == "system" else "sys",
                     registry=ToolRegistry([list_names]), ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)))
    result = await core.run("hi \ud800" if where == "prompt" else "hi")
    assert (result.outcome, result.text) == ("ok", "done"), result.error
    assert "\ufffdbad.txt" in json.dumps(loopback.requests[-1].body, ensure_ascii=False)


# -- an API key an HTTP header cannot carry: a clear error that does not quote it ------------------------------
def _keyed(loopback: Loopback, provider: str, key: str) -> Any:
    if provider == "openai":
        return local(loopback, api_key=key, max_retries=3)
    return claude(loopback, api_key=key, max_retries=3)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("key", ["sk-SECRET\u2026", "sk-SE\nCRET", "sk-SE CRET"])
async def test_an_api_key_with_a_space_a_line_break_or_non_ascii_is_refused_unquoted(
        loopback: Loopback, provider: str, key: str) -> None:
    """Before: the HTTP layer's error ("Illegal header value b'Bearer sk-...'") quoted the whole key into the run's
    error, and was retried as a dropped connection (or a raw UnicodeEncodeError ended the run)."""
    with pytest.raises(ModelError) as info:
        await _keyed(loopback, provider, key).request(request())
    assert "cannot be sent in an HTTP header" in str(info.value)
    assert "sk-SE" not in str(info.value)
    assert not loopback.requests


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_an_api_key_with_a_trailing_line_break_is_used_without_it(loopback: Loopback, provider: str) -> None:
    loopback.openai(openai_stream(openai_completion("ok")))
    loopback.anthropic(anthropic_stream(anthropic_message(a_text("ok"))))
    response = await _keyed(loopback, provider, "  sk-good\n").request(request())
    assert response.text == "ok"
    sent = loopback.requests[0].headers
    assert "sk-good" in (sent.get("authorization", "") + sent.get("x-api-key", ""))


# -- parallel calls that all say index 0 ------------------------------------------------------------------------
async def test_parallel_tool_calls_streamed_at_one_index_stay_apart(loopback: Loopback) -> None:
    """A server that sends each call whole at ``index: 0`` with its own id: before, one call named ``lookup``
    with the arguments ``{"key": "a"}{"key": "b"}`` (not JSON: a tool error), and the second call lost."""
    calls = o_call("c1", "lookup", {"key": "a"}), o_call("c2", "lookup", {"key": "b"})
    sse = openai_stream(openai_completion("", *calls), json_chunk=100)
    for _, data in sse.events:
        for choice in data.get("choices", []) if isinstance(data, dict) else []:
            for tc in choice["delta"].get("tool_calls") or []:
                tc["index"] = 0
    loopback.openai(sse)
    calls = (await local(loopback).request(request())).tool_calls
    assert [(c.id, c.arguments) for c in calls] == [("c1", {"key": "a"}), ("c2", {"key": "b"})]


# -- a base URL the HTTP layer cannot parse: a clear error, not a traceback --------------------------------------
@pytest.mark.parametrize("url", ["http://[::1", "http://h:99999/v1", "http://h\n/v1", "http:// h/v1", "http://"])
def test_a_base_url_that_is_no_url_is_refused_in_the_model_string(url: str) -> None:
    with pytest.raises(ConfigError, match="the base URL"):
        parse_model_string(f"openai:m@{url}")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_base_url_setting_that_is_no_url_ends_the_call_with_a_model_error(provider: str) -> None:
    """Before: ``httpx.InvalidURL`` (no ValueError: the loop does not catch it) escaped the run."""
    settings = {"api_key": "k", "base_url": "http://[::1", "max_retries": 0}
    model = (openai_from_spec(parse_model_string("openai:gpt-4.1"), settings) if provider == "openai"
             else anthropic_from_spec(parse_model_string("anthropic:claude-x"), settings))
    with pytest.raises(ModelError, match=r"the base URL 'http://\[::1' is not a URL"):
        await model.request(request())
