"""OpenAI's automatic prompt caching: one ``prompt_cache_key`` for the agent tree, the shared prefix first,
cached tokens read back into the usage."""

from __future__ import annotations

from pathlib import Path

from subagents import Runtime
from subagents.models.openai import from_spec
from subagents.models.resolve import parse_model_string

from .loopback import OPENAI_PATH, Loopback, o_call, openai_completion, openai_stream

BASE = "BASE: the project's shared context."


async def test_a_tree_shares_one_cache_key_and_reports_cached_tokens(loopback: Loopback, tmp_path: Path) -> None:
    spawn = {"agent_type": "general-purpose", "prompt": "count the files", "description": "count"}
    loopback.openai(
        openai_stream(openai_completion(None, o_call("call_1", "spawn_agent", spawn), prompt_tokens=3000)),
        openai_stream(openai_completion("3 files", prompt_tokens=2800, cached_tokens=2048)),
        openai_stream(openai_completion("The child counted 3 files.", prompt_tokens=3100, cached_tokens=2944)),
    )
    model = from_spec(parse_model_string("openai:gpt-4.1"), {"api_key": "sk-test", "base_url": loopback.openai_url})
    async with Runtime(model, workdir=tmp_path, store="memory://", system_prompt=BASE) as rt:
        r = await rt.run("delegate the count")
    assert r.text == "The child counted 3 files."
    parent, kid, parent2 = loopback.bodies(OPENAI_PATH)
    keys = {b["prompt_cache_key"] for b in (parent, kid, parent2)}
    assert len(keys) == 1
    assert keys.pop().startswith("subagents-")
    # the shared part first: the tools in the same order, the inherited base at the start of the system message
    assert [t["function"]["name"] for t in kid["tools"]] == [t["function"]["name"] for t in parent["tools"]]
    assert parent["messages"][0]["role"] == kid["messages"][0]["role"] == "system"
    assert parent["messages"][0]["content"].startswith(BASE)
    assert kid["messages"][0]["content"].startswith(BASE)
    assert r.usage.cache_read_tokens == 2944  # the root's own turns


async def test_compatible_servers_get_no_cache_key(loopback: Loopback, tmp_path: Path) -> None:
    loopback.openai(openai_stream(openai_completion("hi")))
    async with Runtime(f"openai:llama3.1@{loopback.openai_url}", workdir=tmp_path, store="memory://") as rt:
        await rt.run("hello")
    assert "prompt_cache_key" not in loopback.bodies(OPENAI_PATH)[0]
