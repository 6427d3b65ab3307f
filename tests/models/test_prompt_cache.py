"""Prompt-cache sharing over the Anthropic wire: a parent, two ``explore`` siblings and a ``general-purpose`` child.

Driven through the official SDK against the loopback server; every request body is replayed through
:class:`~subagents.models.prompt_cache.PrefixCache` (the provider's rule: entries written at breakpoints,
read by later requests whose prefix is byte-identical).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents.messages import Message
from subagents.models.anthropic import MAX_BREAKPOINTS, from_spec, to_anthropic
from subagents.models.base import ToolSpec
from subagents.models.prompt_cache import PrefixCache, request_blocks
from subagents.models.resolve import parse_model_string

from .loopback import ANTHROPIC_PATH, Loopback, a_text, a_tool, anthropic_message, anthropic_stream

BASE = "BASE: project memory. " + "The project keeps its sources under src/ and its tests under tests/. " * 40


def spawn(call_id: str, agent_type: str, prompt: str) -> dict[str, Any]:
    """The parent's turn that spawns one foreground child."""
    args = {"agent_type": agent_type, "prompt": prompt, "description": prompt[:20]}
    return anthropic_message(a_tool(call_id, "spawn_agent", args), stop_reason="tool_use")


async def run_tree(loopback: Loopback, tmp_path: Path) -> list[dict[str, Any]]:
    """Parent -> explore A, explore B, general-purpose C (one after the other); the request bodies in order."""
    loopback.anthropic(
        anthropic_stream(spawn("toolu_1", "explore", "find the config loader")),
        anthropic_stream(anthropic_message(a_text("src/config.py"))),
        anthropic_stream(spawn("toolu_2", "explore", "find the tests of the loader")),
        anthropic_stream(anthropic_message(a_text("tests/test_config.py"))),
        anthropic_stream(spawn("toolu_3", "general-purpose", "summarise the loader")),
        anthropic_stream(anthropic_message(a_text("It reads TOML."))),
        anthropic_stream(anthropic_message(a_text("Done."))),
    )
    model = from_spec(parse_model_string("anthropic:claude-sonnet-4-6"),
                      {"api_key": "sk-test", "base_url": loopback.url})
    async with Runtime(model, workdir=tmp_path, store="memory://", system_prompt=BASE) as rt:
        r = await rt.run("look into the config loader")
    assert r.text == "Done."
    return loopback.bodies(ANTHROPIC_PATH)


def first_message(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"][0]["text"])


async def test_children_read_the_prefix_an_earlier_request_wrote(loopback: Loopback, tmp_path: Path) -> None:
    bodies = await run_tree(loopback, tmp_path)
    assert [first_message(b) for b in bodies] == [
        "look into the config loader", "find the config loader", "look into the config loader",
        "find the tests of the loader", "look into the config loader", "summarise the loader",
        "look into the config loader"]
    assert all(len(request_blocks(b)) and sum(m for _, m in request_blocks(b)) <= MAX_BREAKPOINTS for b in bodies)
    shares = PrefixCache().add_all(bodies)
    explore_a, explore_b, general = shares[1], shares[3], shares[5]
    # siblings of the same type: tools, the whole system prompt — all but the task message
    task_b = len(request_blocks(bodies[3])[-1][0])
    assert explore_b.cached_bytes == explore_b.total_bytes - task_b
    assert explore_b.share > 0.9
    # a child with the parent's fence: the tools and the inherited base prompt come from the parent's entry
    assert general.share > 0.8
    # the first explore child: its read-only tools are the parent's leading group (a breakpoint there)
    assert explore_a.cached_bytes > 0
    # the parent's later turns read its own earlier turns
    assert all(s.share > 0.9 for s in (shares[2], shares[4], shares[6]))


async def test_explore_children_read_the_parents_cached_read_tools(loopback: Loopback, tmp_path: Path) -> None:
    bodies = await run_tree(loopback, tmp_path)
    parent, explore = bodies[0], bodies[1]
    explore_tools = [t["name"] for t in explore["tools"]]
    parent_tools = [t["name"] for t in parent["tools"]]
    assert parent_tools[:len(explore_tools)] == explore_tools  # the child's fence is the parent's leading group
    assert "cache_control" in parent["tools"][len(explore_tools) - 1]  # and the parent wrote an entry there
    assert parent_tools[-1] in {"spawn_agent", "wait", "send_input", "close_agent", "resume_agent", "list_agents"}
    share = PrefixCache().add_all(bodies[:2])[1]
    tools_bytes = sum(len(data) for data, _ in request_blocks({"tools": explore["tools"]}))
    assert share.cached_bytes == tools_bytes


def spec(name: str, category: str) -> ToolSpec:
    return ToolSpec(name, f"The {name} tool.", {"type": "object", "properties": {}}, category)


def marked(params: dict[str, Any]) -> list[str]:
    """The blocks that carry a cache breakpoint, named."""
    out = [f"tool:{t['name']}" for t in params.get("tools", ()) if "cache_control" in t]
    out += [f"system:{i}" for i, b in enumerate(params.get("system", ())) if "cache_control" in b]
    out += [f"message:{i}" for i, m in enumerate(params["messages"]) if "cache_control" in m["content"][-1]]
    return out


def test_breakpoints_follow_the_groups_narrower_fences_share() -> None:
    tools = [spec("read_file", "read"), spec("grep", "read"), spec("write_file", "edit"), spec("bash", "execute"),
             spec("spawn_agent", "agent"), spec("wait", "agent")]
    msgs = [Message.user("go")]
    # a parent that can spawn: the last message, the inherited base, the read-only group, the tools before
    # the agent tools (four: the Messages API's limit)
    assert marked(to_anthropic("BASE\n\nown layers", msgs, tools, system_prefix=4)) == [
        "tool:grep", "tool:bash", "system:0", "message:0"]
    # a read-only child: the whole tool list is one group; the end of its system prompt serves its siblings
    assert marked(to_anthropic("BASE\n\nexplore layers", msgs, tools[:2], system_prefix=4)) == [
        "tool:grep", "system:0", "system:1", "message:0"]
    # tools without categories (an adapter's caller that does not say): tools end, system, last message
    plain = [ToolSpec(t.name, t.description, t.parameters) for t in tools]
    assert marked(to_anthropic("sys", msgs, plain)) == ["tool:wait", "system:0", "message:0"]
    # a structured run's final_result (no category) after the agent tools keeps the group breakpoints
    final = ToolSpec("final_result", "The result.", {"type": "object", "properties": {}})
    assert marked(to_anthropic("BASE\n\nown", msgs, [*tools, final], system_prefix=4)) == [
        "tool:grep", "tool:bash", "system:0", "message:0"]
    # categories out of cache order (agent tools not last): no group breakpoint before them
    mixed = [tools[4], *tools[:4]]
    assert marked(to_anthropic("sys", msgs, mixed)) == ["tool:bash", "system:0", "message:0"]
