"""The parts of ``subagents chat`` that need no terminal: the follow-up turn it builds on, its help, its refusals,
the toolbar and the turn's lines."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from subagents import Runtime
from subagents.cli.chat_screen import Screen, TurnLines
from subagents.cli.main import main
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event


async def test_an_idle_roots_queued_announcement_is_its_whole_next_turn(tmp_path: Path) -> None:
    """What a chat does while the person is idle: ``rt.resume(root, "")`` delivers the queued announcement alone."""
    release = asyncio.Event()
    turns: list[list[str]] = []

    async def script(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            await release.wait()
            return ModelResponse("FOUND it")
        last = req.messages[-1]
        if len(req.messages) == 1:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "find it",
                                                               "background": True, "label": "finder"})])
        if last.tool_results:
            return ModelResponse("started")
        turns.append([m.text for m in req.messages[2:] if m.role == "user" and not m.tool_results])
        return ModelResponse("NO_REPLY")

    async with Runtime(FunctionModel(script), workdir=tmp_path, store="memory://") as rt:
        root = await rt.run("go")
        child = next(a for a in rt.agents() if a.parent_id == root.id)
        release.set()
        await rt.wait([child.id])
        await rt.resume(root.id, "")
        answer = (await rt.wait([root.id]))[root.id]
        with pytest.raises(Exception, match="the message is empty"):  # nothing queued any more: refused as before
            await rt.resume(root.id, "")
    assert answer.silent
    [[message]] = turns  # one turn, whose only new user message is the announcement
    assert message.startswith('<subagent-notification>\nA background task "finder"')
    assert message.endswith("</subagent-notification>")
    assert "FOUND it" in message


def test_chat_needs_a_terminal() -> None:
    code = main(["chat"], model=FunctionModel(lambda req: "hi"))  # pytest's stdin is not a terminal
    assert code == 2


def test_chat_needs_a_terminal_message(capsys: pytest.CaptureFixture[str]) -> None:
    main(["chat"], model=FunctionModel(lambda req: "hi"))
    err = capsys.readouterr().err
    assert err.startswith("error: subagents chat needs a terminal (stdin and stdout); in scripts use subagents run")


def test_chat_help_lists_runs_options_and_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--resume ID", "--store URL", "--model PROVIDER:MODEL", "--agent", "--cwd", "--max-turns",
                   "--timeout", "--permission-mode", "--allow RULE", "--deny RULE", "--sandbox"):
        assert option in out, option
    assert "--json" not in out
    assert "--prompt-file" not in out
    for command in ("/agents", "/cancel ID", "/wait", "/help", "/exit", "NO_REPLY", "Ctrl-D", "Ctrl-C"):
        assert command in " ".join(out.split()), command


def _screen(out: io.StringIO | None = None) -> Screen:
    with create_pipe_input() as pipe:
        return Screen(PromptSession(input=pipe, output=DummyOutput()), out=out)


def _ev(kind: str, agent: str, depth: int, parent: str | None = None, **data: object) -> Event:
    return Event(kind, agent, parent, depth, dict(data), nickname=agent)


def test_the_toolbar_shows_the_background_agents_still_working() -> None:
    screen = _screen()
    screen.root_id = "root"
    assert "/help" in screen.toolbar()  # nobody works in the background: the commands are shown
    screen(_ev("run_start", "root", 0, agent_type="general-purpose"))
    screen(_ev("run_start", "scout", 1, "root", agent_type="explore"))
    screen(_ev("tool_start", "scout", 1, "root", tool="grep", arguments={"pattern": "TODO"}))
    lines = screen.toolbar().splitlines()
    assert lines[0] == " 1 agent working in the background:"
    assert lines[1] == ' • scout [explore]: grep(pattern="TODO")  (turn 0, 1 tool call)'
    screen(_ev("subagent_completed", "scout", 1, "root", status="completed", outcome="ok"))
    assert "/help" in screen.toolbar()


def test_turn_lines_tell_tool_calls_and_children_and_wait_during_an_approval() -> None:
    out = io.StringIO()
    screen = _screen(out)
    lines = TurnLines(screen)
    lines(_ev("tool_start", "ada", 0, tool="read_file", arguments={"path": "a.py"}))
    lines(_ev("subagent_spawned", "bob", 1, "ada", agent_type="explore", background=True))
    screen.asking = True
    lines(_ev("subagent_completed", "bob", 1, "ada", outcome="ok"))
    assert out.getvalue().splitlines() == ['  · ada: read_file(path="a.py")',
                                           "    + bob [explore] started in the background"]
    screen.answered()
    assert out.getvalue().splitlines()[-1] == "    ✓ bob finished (ok)"
