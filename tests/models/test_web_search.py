"""``web_search``: an agent tool whose searches Claude's server-side ``web_search_20250305`` tool runs, behind
the permission rules (over the loopback server, through the official SDK)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.authority.approvals import ApprovalRequest, Decision
from subagents.models.anthropic import AnthropicModel, from_spec
from subagents.models.openai import from_spec as openai_from_spec
from subagents.models.resolve import parse_model_string
from subagents.tools.web_search import supports_web_search, web_search_tool

from .loopback import ANTHROPIC_PATH, Loopback, a_text, a_tool, anthropic_message, anthropic_stream

QUERY = "python 3.13 release date"


def claude(loopback: Loopback) -> AnthropicModel:
    settings = {"api_key": "sk-test", "base_url": loopback.url}
    return from_spec(parse_model_string("anthropic:claude-sonnet-4-6"), settings)


def searched(use_id: str, query: str, *results: tuple[str, str]) -> list[dict[str, Any]]:
    """A ``server_tool_use`` block and its ``web_search_tool_result`` block."""
    return [{"type": "server_tool_use", "id": use_id, "name": "web_search", "input": {"query": query}},
            {"type": "web_search_tool_result", "tool_use_id": use_id, "content": [
                {"type": "web_search_result", "url": url, "title": title, "encrypted_content": "EqgfCioIARgB",
                 "page_age": None} for title, url in results]}]


def script_search(loopback: Loopback) -> None:
    """The agent calls web_search; the provider pauses once mid-search, then answers; the agent answers."""
    loopback.anthropic(
        anthropic_stream(anthropic_message(a_tool("toolu_1", "web_search", {"query": QUERY}), stop_reason="tool_use")),
        anthropic_message(*searched("srvtoolu_1", QUERY, ("Python 3.13 release", "https://www.python.org/3.13/")),
                          stop_reason="pause_turn", input_tokens=400, output_tokens=20),
        anthropic_message(*searched("srvtoolu_2", "python 3.13 october", ("PEP 719", "https://peps.python.org/719/")),
                          a_text("Python 3.13 was released on 7 October 2024."), input_tokens=900, output_tokens=30),
        anthropic_stream(anthropic_message(a_text("It came out on 7 October 2024."))),
    )


async def test_a_search_runs_on_the_provider_and_the_agent_gets_answer_and_sources(loopback: Loopback,
                                                                                   tmp_path: Path) -> None:
    script_search(loopback)
    model = claude(loopback)
    async with Runtime(model, workdir=tmp_path, store="memory://", tools=[web_search_tool(model)],
                       allow=["web_search"]) as rt:
        r = await rt.run("when did python 3.13 come out?")
    assert r.text == "It came out on 7 October 2024."
    turn1, search1, search2, turn2 = loopback.bodies(ANTHROPIC_PATH)
    assert "web_search" in [t["name"] for t in turn1["tools"]]
    # the search call carries only the server tool
    assert search1["tools"] == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]
    assert QUERY in search1["messages"][0]["content"]
    # pause_turn: the paused answer is sent back verbatim (server blocks replayed) to continue
    assert [m["role"] for m in search2["messages"]] == ["user", "assistant"]
    assert [b["type"] for b in search2["messages"][1]["content"]] == ["server_tool_use", "web_search_tool_result"]
    assert search2["messages"][1]["content"][1]["content"][0]["encrypted_content"] == "EqgfCioIARgB"
    result = turn2["messages"][-1]["content"][0]
    assert result["tool_use_id"] == "toolu_1"
    assert result["content"] == (
        "Python 3.13 was released on 7 October 2024.\n\n"
        "Sources:\n- Python 3.13 release — https://www.python.org/3.13/\n- PEP 719 — https://peps.python.org/719/\n\n"
        "[web search: 2 searches, 1300 input / 50 output tokens]")


async def test_default_mode_asks_before_searching_and_a_refusal_never_reaches_the_provider(
        loopback: Loopback, tmp_path: Path) -> None:
    loopback.anthropic(
        anthropic_stream(anthropic_message(a_tool("toolu_1", "web_search", {"query": QUERY}), stop_reason="tool_use")),
        anthropic_stream(anthropic_message(a_text("I was not allowed to search."))),
    )
    asked: list[ApprovalRequest] = []

    async def approver(req: ApprovalRequest) -> Decision:
        asked.append(req)
        return Decision.deny("no web access today")

    model = claude(loopback)
    async with Runtime(model, workdir=tmp_path, store="memory://", tools=[web_search_tool(model)],
                       permission_mode="default", approver=approver) as rt:
        r = await rt.run("when did python 3.13 come out?")
    assert r.text == "I was not allowed to search."
    assert [(q.tool, q.arguments) for q in asked] == [("web_search", {"query": QUERY})]
    assert len(loopback.bodies(ANTHROPIC_PATH)) == 2  # no search call was made


@pytest.mark.parametrize("rule", ["web_search", "WebSearch", "WebSearch(python *)"])
async def test_rules_allow_it_by_our_name_or_claude_codes(rule: str, loopback: Loopback, tmp_path: Path) -> None:
    script_search(loopback)
    model = claude(loopback)
    asked: list[ApprovalRequest] = []

    async def approver(req: ApprovalRequest) -> Decision:
        asked.append(req)
        return Decision.deny("asked although a rule allows it")

    async with Runtime(model, workdir=tmp_path, store="memory://", tools=[web_search_tool(model)],
                       permission_mode="default", approver=approver, allow=[rule]) as rt:
        r = await rt.run("when did python 3.13 come out?")
    assert r.text == "It came out on 7 October 2024."
    assert asked == []
    assert len(loopback.bodies(ANTHROPIC_PATH)) == 4  # the two search calls were made


def test_only_models_with_a_native_search_back_the_tool(loopback: Loopback) -> None:
    assert supports_web_search(claude(loopback))
    gpt = openai_from_spec(parse_model_string("openai:gpt-4.1"), {"api_key": "sk-test", "base_url": loopback.url})
    assert not supports_web_search(gpt)  # Chat Completions has no server-side web search tool
