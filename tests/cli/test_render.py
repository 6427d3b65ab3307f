from __future__ import annotations

import io
import json

import pytest

from subagents.cli.render import JsonLines, Progress
from subagents.runtime.events import Event


def ev(kind: str, agent: str, depth: int = 0, parent: str | None = None, **data: object) -> Event:
    return Event(kind, agent, parent, depth, dict(data), ts=1.0, nickname=agent)


def test_progress_shows_the_tree_indented_by_depth() -> None:
    p = Progress()
    p.update(ev("run_start", "root", agent_type="coordinator"))
    p.update(ev("turn_start", "root", turn=1))
    p.update(ev("subagent_spawned", "kid-a", 1, "root", agent_type="explore"))
    p.update(ev("subagent_spawned", "kid-b", 1, "root", agent_type="explore"))
    p.update(ev("subagent_spawned", "grandkid", 2, "kid-a", agent_type="explore"))
    p.update(ev("tool_start", "kid-a", 1, "root", tool="grep", call_id="c1", arguments={"pattern": "TODO"}))
    p.update(ev("turn_start", "kid-b", 1, "root", turn=2))
    p.update(ev("subagent_completed", "grandkid", 2, "kid-a", status="completed", outcome="ok", turns=3,
                tool_calls=4, usage={"input_tokens": 1200, "output_tokens": 300}))
    assert p.lines() == [
        "• root [coordinator]: thinking  (turn 1, 0 tool calls)",
        '  • kid-a [explore]: grep(pattern="TODO")  (turn 0, 1 tool call)',
        "    ✓ grandkid [explore]: completed  (turn 3, 4 tool calls, 1.5k tokens)",
        "  • kid-b [explore]: thinking  (turn 2, 0 tool calls)",
    ]


def test_progress_marks_stopped_runs() -> None:
    p = Progress()
    p.update(ev("run_start", "general-purpose-ada", agent_type="general-purpose"))
    p.update(ev("assistant_text", "general-purpose-ada", text="Looking\n  at   files\n", delta=False))
    assert p.lines() == ["• general-purpose-ada: says: at files  (turn 0, 0 tool calls)"]  # the current line
    p.update(ev("run_end", "general-purpose-ada", status="errored", outcome="limit", turns=1))
    assert p.lines() == ["✗ general-purpose-ada: errored (limit)  (turn 1, 0 tool calls)"]


def test_json_lines() -> None:
    buf = io.StringIO()
    out = JsonLines(buf)
    out(ev("tool_end", "a", tool="read_file", call_id="c", is_error=False, duration_s=0.1, output="é"))
    assert json.loads(buf.getvalue()) == {"kind": "tool_end", "agent_id": "a", "nickname": "a", "parent_id": None,
                                          "depth": 0, "ts": 1.0, "tool": "read_file", "call_id": "c",
                                          "is_error": False, "duration_s": 0.1, "output": "é"}


def test_live_view_renders_the_rows_without_color(monkeypatch: pytest.MonkeyPatch) -> None:

    from subagents.cli.render import LiveView

    monkeypatch.setenv("NO_COLOR", "1")
    buf = io.StringIO()
    with LiveView(buf) as view:
        view(ev("run_start", "general-purpose-ada", agent_type="general-purpose"))
        view(ev("run_end", "general-purpose-ada", status="completed", outcome="ok", turns=2))
    assert "✓ general-purpose-ada: completed  (turn 2, 0 tool calls)" in buf.getvalue()
    assert "\x1b[3" not in buf.getvalue()  # no color codes
