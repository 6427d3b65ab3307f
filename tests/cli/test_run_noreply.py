"""``subagents run``: an answer that is exactly NO_REPLY (seed 003) prints nothing on stdout."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def announced_then(answer: str) -> FunctionModel:
    """The root spawns a background child, then answers ``answer`` once the announcement reached it."""

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="nothing new in the logs")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "check the logs", "background": True,
                "label": "log check"})])
        texts = [b.text for m in req.messages if m.role == "user" for b in m.content if b.kind == "text"]
        if any('A background task "log check"' in t for t in texts):
            return ModelResponse(text=answer)
        await asyncio.sleep(0.01)  # (not wait: its result would take the announcement's place)
        return ModelResponse(tool_calls=[ToolCall("list_dir", {})])

    return FunctionModel(fn)


def test_a_no_reply_answer_prints_nothing(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "watch the logs"], model=announced_then("NO_REPLY")) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "runtime " in captured.err  # the stats still go to stderr


def test_another_answer_is_printed(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "watch the logs"], model=announced_then("The log check found nothing new.")) == 0
    assert capsys.readouterr().out == "The log check found nothing new.\n"


def test_json_marks_the_result_silent(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "watch the logs", "--json"], model=announced_then("NO_REPLY")) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["kind"] == "result"
    assert result["silent"] is True
    assert result["text"] == "NO_REPLY"
