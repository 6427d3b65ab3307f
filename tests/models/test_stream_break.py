"""Streamed tool input that does not parse: the model gets a tool error, the run goes on (Anthropic, on loopback).

The adapter assembles tool input from the raw Messages API events itself: the SDK's own assembly
parsed ``input_json_delta`` pieces as partial JSON, so a malformed input raised inside the SDK (the
whole answer retried, then the run ended with an error) and an input that stopped short was run as if
complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ModelError
from subagents.messages import Message
from subagents.models.anthropic import AnthropicModel, from_spec
from subagents.models.base import INVALID_ARGUMENTS_KEY, AgentInfo, ModelRequest, ToolSpec
from subagents.models.resolve import parse_model_string
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry, tool
from subagents.tools.paths import Workspace

from .loopback import ANTHROPIC_PATH, SSE, Loopback, a_text, a_tool, anthropic_message, anthropic_stream

INFO = AgentInfo("agent-1", "main", "general-purpose")
FAST = {"retry_base_s": 0.001, "retry_max_s": 0.01, "max_retries": 2, "stall_timeout_s": 2.0, "timeout_s": 4.0}


@tool(category="read")
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return {"alpha": "1"}.get(key, "missing")


def claude(loopback: Loopback, **settings: Any) -> AnthropicModel:
    return from_spec(parse_model_string("anthropic:claude-x"),
                     {"api_key": "k", "base_url": loopback.url} | FAST | settings)


def request() -> ModelRequest:
    return ModelRequest(INFO, "sys", [Message.user("hi")], [ToolSpec("lookup", "Look.", lookup.parameters)])


def tool_stream(partial_json: list[str], stop_reason: str = "tool_use", text: str = "") -> SSE:
    """A streamed answer: optional text, then a ``lookup`` tool_use whose input arrives as ``partial_json``."""
    blocks = ([a_text(text)] if text else []) + [a_tool("toolu_1", "lookup", {"key": "alpha"})]
    sse = anthropic_stream(anthropic_message(*blocks, stop_reason=stop_reason))
    index = len(blocks) - 1
    start = next(i for i, (_, e) in enumerate(sse.events)
                 if e.get("type") == "content_block_start" and e["index"] == index)
    deltas = [("content_block_delta", {"type": "content_block_delta", "index": index,
                                       "delta": {"type": "input_json_delta", "partial_json": p}})
              for p in partial_json]
    sse.events[start + 1:-3] = deltas  # between the block's start and its content_block_stop
    return sse


async def test_malformed_tool_input_goes_back_to_the_model_as_a_tool_error(loopback: Loopback,
                                                                         tmp_path: Path) -> None:
    loopback.anthropic(tool_stream(['{"key": ', "al", "pha}"], text="Looking."),
                       anthropic_stream(anthropic_message(a_text("Sorry, resent."))))
    core = AgentCore(info=INFO, model=claude(loopback), system="sys", registry=ToolRegistry([lookup]),
                     ctx=ToolContext(agent=INFO, workspace=Workspace(tmp_path)))
    result = await core.run("hi")  # used to: SDK ValueError, retried 3 times, then outcome "error"
    assert result.outcome == "ok"
    assert result.text == "Sorry, resent."
    bodies = loopback.bodies(ANTHROPIC_PATH)
    assert len(bodies) == 2
    tool_result = bodies[1]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result"
    assert tool_result["is_error"] is True
    assert "the arguments of tool 'lookup' were not valid JSON: '{\"key\": alpha}'" in str(tool_result["content"])


async def test_malformed_tool_input_is_one_call_with_the_raw_text(loopback: Loopback) -> None:
    loopback.anthropic(tool_stream(['{"key": al', "pha}"]))
    response = await claude(loopback).request(request())
    assert response.tool_calls[0].arguments == {INVALID_ARGUMENTS_KEY: '{"key": alpha}'}
    assert response.tool_calls[0].name == "lookup"
    assert len(loopback.requests) == 1


async def test_tool_input_that_stops_short_is_not_run_on_a_guess(loopback: Loopback) -> None:
    loopback.anthropic(tool_stream(['{"key": ', '"alpha"']))  # no closing brace, yet stop_reason tool_use
    response = await claude(loopback).request(request())
    assert response.tool_calls[0].arguments == {INVALID_ARGUMENTS_KEY: '{"key": "alpha"'}  # used to be {"key": "alpha"}


@pytest.mark.parametrize("pieces", [['{"key": "al'], ['{"key": ', "al"], ['{"key": "a\\']])
async def test_tool_input_cut_off_at_max_tokens_is_a_clear_error_not_retried(loopback: Loopback,
                                                                             pieces: list[str]) -> None:
    loopback.anthropic(tool_stream(pieces, stop_reason="max_tokens"), tool_stream(pieces, stop_reason="max_tokens"))
    with pytest.raises(ModelError) as info:
        await claude(loopback, max_output_tokens=64).request(request())
    assert str(info.value) == (
        "Claude was cut off at max_output_tokens=64 while writing the arguments of tool 'lookup', so the call "
        "was not run; raise max_output_tokens in the model settings."
    )
    assert len(loopback.requests) == 1


async def test_valid_input_split_anywhere_still_parses_and_text_streams(loopback: Loopback) -> None:
    loopback.anthropic(tool_stream(["", '{"ke', 'y": "al', 'pha"', "}"], text="Looking it up."))
    deltas: list[str] = []
    response = await claude(loopback).request(
        ModelRequest(INFO, "sys", [Message.user("hi")], [ToolSpec("lookup", "Look.", lookup.parameters)],
                     deltas.append))
    assert response.tool_calls[0].arguments == {"key": "alpha"}
    assert response.text == "Looking it up."
    assert "".join(deltas) == "Looking it up."
    assert response.stop_reason == "tool_use"


async def test_tool_input_sent_whole_in_the_start_block_is_kept(loopback: Loopback) -> None:
    sse = tool_stream([])  # no input_json_delta: the content_block_start's input stands
    for _, event in sse.events:
        if event.get("type") == "content_block_start":
            event["content_block"]["input"] = {"key": "alpha"}
    loopback.anthropic(sse)
    response = await claude(loopback).request(request())
    assert response.tool_calls[0].arguments == {"key": "alpha"}


async def test_only_the_malformed_call_of_several_is_marked(loopback: Loopback) -> None:
    sse = anthropic_stream(anthropic_message(a_tool("toolu_1", "lookup", {"key": "x"}),
                                             a_tool("toolu_2", "lookup", {"key": "alpha"}), stop_reason="tool_use"))
    for _, event in sse.events:
        delta = event.get("delta", {})
        if event.get("index") == 0 and delta.get("type") == "input_json_delta" and delta["partial_json"]:
            delta["partial_json"] = delta["partial_json"].replace('"', "'")  # {'key': 'x'}: not JSON
    loopback.anthropic(sse)
    calls = (await claude(loopback).request(request())).tool_calls
    assert [c.id for c in calls] == ["toolu_1", "toolu_2"]
    assert calls[0].arguments == {INVALID_ARGUMENTS_KEY: "{'key': 'x'}"}
    assert calls[1].arguments == {"key": "alpha"}


def _named(events: list[Any], names: list[str]) -> SSE:
    """An OpenAI stream whose tool call's name comes in pieces (``names``), one delta each."""
    first = events[1][1]
    first["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] = names[0]
    extra = [(None, dict(first, choices=[{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": n}}]},
                                          "logprobs": None, "finish_reason": None}])) for n in names[1:]]
    return SSE([events[0], events[1], *extra, *events[2:]])


@pytest.mark.parametrize("names", [["look", "up"], ["lo", "ok", "up"], ["look", "lookup"], ["lookup", "lookup"]])
async def test_an_openai_tool_name_split_across_deltas_is_whole(loopback: Loopback, names: list[str]) -> None:
    """The name's later pieces were dropped (``look``): the call then named no tool.  A server that repeats the
    whole name, or sends it cumulatively, still gives it once."""
    from .loopback import o_call, openai_completion, openai_stream
    from .test_provider_edges import local
    from .test_provider_edges import request as openai_request

    events = openai_stream(openai_completion(None, o_call("c1", "lookup", {"key": "a"}))).events
    loopback.openai(_named(events, names))
    r = await local(loopback).request(openai_request())
    assert r.tool_calls[0].name == "lookup"
