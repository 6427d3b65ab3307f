from __future__ import annotations

import pytest

from subagents.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    dumps_messages,
    loads_messages,
)


def test_history_round_trip() -> None:
    history = [
        Message.user("find the bug"),
        Message("assistant", [TextBlock("looking"), ToolUseBlock("c1", "grep", {"pattern": "x", "n": [1, 2]})]),
        Message("user", [ToolResultBlock("c1", "a.py:1: x", False), ToolResultBlock("c2", "boom", True),
                         TextBlock("note ✓")]),
        Message.assistant("done"),
    ]
    text = dumps_messages(history)
    assert loads_messages(text) == history
    assert '"is_error":true' in text
    assert "✓" in text
    assert history[1].text == "looking"
    assert [b.id for b in history[1].tool_uses] == ["c1"]
    assert [b.is_error for b in history[2].tool_results] == [False, True]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('{"role": "user"}', "a message history must be a JSON list of messages"),
        ('[{"role": "system", "content": []}]', "unknown message role 'system'; expected 'user' or 'assistant'"),
        ('[{"role": "user", "content": [{"kind": "image"}]}]',
         "unknown message block kind 'image'; expected 'text', 'tool_use' or 'tool_result'"),
    ],
)
def test_malformed_history(data: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        loads_messages(data)


def test_usage_arithmetic() -> None:
    u = Usage(10, 5, 3, 1)
    u.add(Usage(1, 1, 1, 1))
    assert u == Usage(11, 6, 4, 2)
    assert (u + Usage(1, 0)).total_tokens == 18
    assert Usage.from_dict(u.to_dict()) == u
