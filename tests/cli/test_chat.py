"""``subagents chat`` in a pseudo-terminal: turns, background announcements while idle, commands, resume, approvals.

Each test starts ``scripted_chat.py`` (the real CLI with a scripted model, see its docstring) in a
fixed-size pty with pexpect and talks to it as a person would.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

SCRIPT = Path(__file__).with_name("scripted_chat.py")
PROMPT = "›"  # (prompt_toolkit draws the space after it as a cursor move)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TIMEOUT = 30

Chat = Callable[..., pexpect.spawn]


@pytest.fixture
def chat(isolated: Path, tmp_path: Path) -> Iterator[Chat]:
    """Start a chat in the project directory (a SQLite store under tmp_path, so a conversation outlives it)."""
    env = {**os.environ, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "NO_COLOR": "1",
           "SUBAGENTS_STORE": f"sqlite:///{tmp_path / 'state.db'}"}
    started: list[pexpect.spawn] = []

    def start(*args: str, cpr: bool = False) -> pexpect.spawn:
        """``cpr``: the test answers the cursor-position requests itself (prompt_toolkit then draws the toolbar)."""
        child = pexpect.spawn(sys.executable, [str(SCRIPT), *args], cwd=str(isolated), encoding="utf-8",
                              env={k: v for k, v in env.items() if not (cpr and k == "PROMPT_TOOLKIT_NO_CPR")},
                              dimensions=(40, 160), timeout=TIMEOUT)
        started.append(child)
        return child

    yield start
    for child in started:
        if child.isalive():
            child.terminate(force=True)


def said(child: pexpect.spawn) -> str:
    """What the last expect skipped over, without the terminal's escape sequences."""
    return ANSI.sub("", str(child.before))


def ask(child: pexpect.spawn, line: str) -> None:
    child.expect_exact(PROMPT)
    child.sendline(line)


def conversation_id(child: pexpect.spawn) -> str:
    child.expect(r"conversation ([0-9a-f-]{36}) ")
    return str(child.match.group(1))


def leave(child: pexpect.spawn) -> str:
    """Ctrl-D at the prompt; returns the id the farewell names, checks the exit status."""
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(r"subagents chat --resume ([0-9a-f-]{36})")
    rid = str(child.match.group(1))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return rid


def test_a_turn_is_answered_and_the_conversation_id_is_printed_at_start_and_exit(chat: Chat) -> None:
    child = chat()
    child.expect_exact("a new conversation")
    ask(child, "hello there")
    rid = conversation_id(child)
    child.expect_exact("ECHO #1: hello there")
    ask(child, "/help")
    child.expect_exact("/cancel ID")
    ask(child, "and again")
    child.expect_exact("ECHO #2: and again")  # the same conversation: the script counts the person's messages
    assert leave(child) == rid


def test_a_background_child_is_announced_while_the_person_is_idle(chat: Chat, isolated: Path) -> None:
    child = chat()
    ask(child, "spawn alpha")
    child.expect_exact("started in the background")
    child.expect_exact(PROMPT)  # the turn is over: the person is at the prompt and types nothing
    (isolated / "release-alpha").touch()
    child.expect(r"· general-purpose-\w+ finished: the conversation is told")
    child.expect_exact("HEARD: FOUND alpha")  # the root was given the announcement as a turn, and answered
    ask(child, "spawn quiet")
    child.expect_exact("started in the background")
    child.expect_exact(PROMPT)
    (isolated / "release-quiet").touch()
    child.expect(r"· general-purpose-\w+ finished: the conversation is told")
    child.sendline("/agents")
    child.expect_exact("— quiet")
    assert "NO_REPLY" not in said(child)  # the answer NO_REPLY printed nothing
    assert "HEARD" not in said(child)
    leave(child)


def answer_cpr(child: pexpect.spawn) -> None:
    """Answer the terminal's cursor-position request, as a real terminal does (row 5, column 1)."""
    child.expect_exact("\x1b[6n")
    child.send("\x1b[5;1R")


def test_the_toolbar_under_the_prompt_shows_the_agents_working_in_the_background(chat: Chat, isolated: Path) -> None:
    child = chat(cpr=True)
    answer_cpr(child)
    child.expect_exact("/help commands · /agents tree · Ctrl-D exits")  # nobody works yet
    child.sendline("spawn delta")
    child.expect(r"\+ (\S+) \[general-purpose\] started in the background")
    nickname = str(child.match.group(1))
    answer_cpr(child)  # the next prompt
    child.expect_exact("1 agent working in the background:")
    child.expect(rf"• {nickname}: \w+")
    (isolated / "release-delta").touch()
    child.expect_exact("HEARD: FOUND delta")
    child.sendline("/exit")
    child.expect(pexpect.EOF)


def test_agents_lists_the_tree_and_cancel_closes_a_background_agent(chat: Chat) -> None:
    child = chat()
    ask(child, "spawn beta")
    child.expect(r"\+ (\S+) \[general-purpose\] started in the background")
    nickname = str(child.match.group(1))
    ask(child, "/agents")
    child.expect(rf"general-purpose-\w+ \[general-purpose\] completed \(\w+\)\s+{nickname} \[general-purpose\] "
                 r"running \((\w+)\) — beta")
    ask(child, f"/cancel {child.match.group(1)}")  # the short id /agents shows
    child.expect_exact(f"cancelled {nickname}")
    child.expect_exact("HEARD: (no output)")  # its announcement ("was cancelled") is a follow-up turn too
    ask(child, "/agents")
    child.expect(rf"{nickname} \[general-purpose\] shutdown")
    ask(child, "/cancel nobody")
    child.expect_exact("no agent 'nobody' in this conversation")
    leave(child)


def test_wait_waits_for_the_background_agents_and_the_answers_to_them(chat: Chat, isolated: Path) -> None:
    child = chat()
    ask(child, "spawn gamma")
    child.expect_exact("started in the background")
    ask(child, "/wait")
    child.expect_exact("waiting for 1 agent")
    (isolated / "release-gamma").touch()
    child.expect_exact("HEARD: FOUND gamma")
    ask(child, "/wait")
    child.expect_exact("no agent is working in the background")
    leave(child)


def test_a_conversation_is_resumed_after_the_process_exits(chat: Chat) -> None:
    first = chat()
    ask(first, "remember the word kiwi")
    rid = conversation_id(first)
    first.expect_exact("ECHO #1: remember the word kiwi")
    assert leave(first) == rid

    again = chat("--resume", rid[:8])  # an id prefix is enough
    again.expect_exact(f"conversation {rid}")
    again.expect_exact("ECHO #1: remember the word kiwi")  # its last answer, shown for context
    ask(again, "/agents")
    again.expect(r"general-purpose-\w+ \[general-purpose\] completed")  # from the store, before any turn
    ask(again, "what was the word")
    again.expect_exact("ECHO #2: what was the word")  # the whole history came back with it
    assert leave(again) == rid


def test_resume_of_an_unknown_conversation_is_a_usage_error(chat: Chat) -> None:
    child = chat("--resume", "nope-nope")
    child.expect_exact("error: no run matches 'nope-nope'")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2


def test_an_approval_is_asked_inline(chat: Chat, isolated: Path) -> None:
    child = chat()
    ask(child, "edit yes.txt")
    child.expect_exact("? approval needed:")
    child.expect_exact("your choice [y/a/n]: ")
    child.sendline("y")
    child.expect_exact("Created yes.txt")
    assert (isolated / "yes.txt").read_text() == "edited"
    ask(child, "edit no.txt")
    child.expect_exact("your choice [y/a/n]: ")
    child.sendline("n")
    child.expect_exact("reason for the agent")
    child.sendline("not today")
    child.expect_exact("not today")  # the denial, with the reason, is the tool result the agent answers with
    assert not (isolated / "no.txt").exists()
    leave(child)


def test_ctrl_c_stops_the_current_turn_and_the_chat_goes_on(chat: Chat) -> None:
    child = chat()
    ask(child, "hang")
    conversation_id(child)
    child.sendintr()
    child.expect_exact("the turn stopped: cancelled")
    ask(child, "still there?")
    child.expect_exact("ECHO #2: still there?")
    leave(child)


def test_sigterm_closes_the_agents_as_interrupted_and_the_conversation_can_go_on(chat: Chat) -> None:
    child = chat()
    ask(child, "hang")
    rid = conversation_id(child)
    child.kill(15)
    child.expect_exact("Stopped by SIGTERM")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 143
    again = chat("--resume", rid)
    again.expect_exact(f"conversation {rid}")
    ask(again, "back again")
    again.expect_exact("ECHO #2: back again")
    leave(again)


def test_prompt_is_the_first_message_and_a_double_slash_sends_a_slash(chat: Chat) -> None:
    child = chat("first words")
    child.expect_exact("ECHO #1: first words")
    ask(child, "//agents is a word")
    child.expect_exact("ECHO #2: /agents is a word")
    ask(child, "/frobnicate")
    child.expect_exact("unknown command '/frobnicate'; /help lists the commands")
    leave(child)


def test_ctrl_c_at_an_approval_question_stops_the_turn_and_the_next_line_reaches_the_prompt(chat: Chat,
                                                                                         isolated: Path) -> None:
    child = chat()
    ask(child, "edit never.txt")
    child.expect_exact("your choice [y/a/n]: ")
    child.sendintr()
    child.expect_exact("the turn stopped: cancelled")
    ask(child, "hello after")
    child.expect_exact("ECHO #2: hello after")  # the unanswered question kept no reader of this line
    assert not (isolated / "never.txt").exists()
    leave(child)


def test_leaving_stops_the_background_agents_as_interrupted(chat: Chat) -> None:
    child = chat()
    ask(child, "spawn epsilon")
    child.expect(r"\+ (\S+) \[general-purpose\] started in the background")
    nickname = str(child.match.group(1))
    ask(child, "/exit")
    child.expect_exact("stopping 1 agent still working (recorded as interrupted)")
    rid = leave_after_exit(child)
    again = chat("--resume", rid)
    ask(again, "/agents")
    again.expect(rf"{nickname} \[general-purpose\] errored \(\w+\) — epsilon")
    again.expect_exact(PROMPT)
    again.sendline("/exit")
    again.expect(pexpect.EOF)


def leave_after_exit(child: pexpect.spawn) -> str:
    child.expect(r"subagents chat --resume ([0-9a-f-]{36})")
    rid = str(child.match.group(1))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return rid
