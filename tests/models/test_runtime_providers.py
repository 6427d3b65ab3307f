"""Providers end to end: Runtime + sub-agents over the real SDKs, config prices, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.cli.main import main
from subagents.config import load_settings
from subagents.models.anthropic import from_spec
from subagents.models.resolve import parse_model_string

from .loopback import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Loopback,
    a_text,
    a_tool,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
)

EPHEMERAL = {"type": "ephemeral"}


async def test_child_shares_the_parents_cached_prefix(loopback: Loopback, tmp_path: Path) -> None:
    loopback.anthropic(
        anthropic_stream(anthropic_message(
            a_tool("toolu_1", "spawn_agent", {"agent_type": "general-purpose", "prompt": "count the files",
                                              "description": "count"}), stop_reason="tool_use")),
        anthropic_stream(anthropic_message(a_text("3 files"), cache_read=900)),
        anthropic_stream(anthropic_message(a_text("The child counted 3 files."))),
    )
    model = from_spec(parse_model_string("anthropic:claude-sonnet-4-6"),
                      {"api_key": "sk-test", "base_url": loopback.url})
    async with Runtime(model, workdir=tmp_path, store="memory://", system_prompt="BASE: shared context.") as rt:
        r = await rt.run("delegate the count")
    assert r.text == "The child counted 3 files."
    parent, child, parent2 = loopback.bodies(ANTHROPIC_PATH)
    # the inherited base prompt is its own cached block, byte-identical in parent and child
    assert parent["system"][0] == child["system"][0] == {"type": "text", "text": "BASE: shared context.",
                                                         "cache_control": EPHEMERAL}
    # at most 4 breakpoints (Anthropic's limit): after the shared tool groups, the base prompt, the last message
    for body in (parent, child):
        marks = [b for b in [*body["tools"], *body["system"], *body["messages"][-1]["content"]] if "cache_control" in b]
        assert 2 <= len(marks) <= 4
    assert child["system"][1]["text"] != parent["system"][1]["text"]  # the child's own layers differ
    assert parent["tools"] == child["tools"]  # same fence at depth 1 < max_depth: tools prefix shared too
    assert [m["content"][0]["text"] for m in child["messages"]] == ["count the files"]
    tool_result = parent2["messages"][-1]["content"][0]
    assert (tool_result["type"], tool_result["tool_use_id"]) == ("tool_result", "toolu_1")
    assert tool_result["content"].endswith("\n3 files") or "3 files" in str(tool_result["content"])


async def test_config_prices_override_the_table(loopback: Loopback, tmp_path: Path) -> None:
    (tmp_path / ".subagents").mkdir()
    (tmp_path / ".subagents" / "config.toml").write_text(
        '[pricing."llama3.1"]\ninput = 1000.0\noutput = 2000.0\n')
    loopback.openai(openai_stream(openai_completion("hi", prompt_tokens=1000, completion_tokens=500)))
    settings = load_settings(tmp_path)
    async with Runtime(f"openai:llama3.1@{loopback.openai_url}", workdir=tmp_path, settings=settings,
                       store="memory://") as rt:
        r = await rt.run("hello")
    assert r.cost_usd == pytest.approx(1000 * 1000 / 1e6 + 500 * 2000 / 1e6)


def test_cli_run_against_a_compatible_server(loopback: Loopback, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    loopback.openai(openai_stream(openai_completion("Hello from the loopback server.")))
    code = main(["run", "say hello", "--model", f"openai:llama3.1@{loopback.openai_url}", "--cwd", str(tmp_path),
                 "--json"])
    assert code == 0
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert lines[-1]["kind"] == "result"
    assert (lines[-1]["outcome"], lines[-1]["text"]) == ("ok", "Hello from the loopback server.")
    deltas = [e["text"] for e in lines if e["kind"] == "assistant_text"]
    assert "".join(deltas) == "Hello from the loopback server."
    body = loopback.bodies(OPENAI_PATH)[0]
    assert body["model"] == "llama3.1"
    assert body["messages"][-1] == {"role": "user", "content": "say hello"}
