"""The terminal of ``subagents chat``: the prompt, the agent tree under it, and what is printed around it.

One :class:`Screen` owns the terminal.  While the person is at the prompt (prompt_toolkit's
:class:`~prompt_toolkit.PromptSession`), the prompt is *visible*: anything else that must be shown —
a background child's announcement answered by the conversation, an approval question, a notice — is
shown with the prompt suspended (:meth:`Screen.out_of_prompt`, prompt_toolkit's ``in_terminal``),
which erases the prompt, gives the terminal back in cooked mode, and draws the prompt again below,
with what the person had typed so far.  While a turn runs, the prompt is not shown and lines are
printed as they come.

The bottom toolbar under the prompt shows the agents of the conversation that are still running
(background children): their nickname, type and what they are doing, from the runtime's events.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

from ..ids import short_id
from .approve import TerminalApprover
from .render import Progress, terminal_safe

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from ..authority.approvals import ApprovalRequest, Decision
    from ..runtime.events import Event

__all__ = ["ChatApprover", "ChatAsk", "Screen", "TurnLines", "read_fd_line"]

TOOLBAR_ROWS = 6
"""How many running agents the toolbar shows (the rest are counted)."""


class Screen:
    """The chat's terminal (see the module docstring)."""

    __slots__ = ("_held", "_pending", "asking", "out", "progress", "prompting", "root_id", "session", "suspended")

    def __init__(self, session: PromptSession[str], out: TextIO | None = None) -> None:
        self.session = session
        self.out = out or sys.stdout
        self.progress = Progress()  # every agent of the conversation, from the events
        self.root_id: str | None = None
        self.prompting = False  # the person's prompt is running (perhaps suspended)
        self.suspended = 0  # how many out_of_prompt sections are open
        self.asking = False  # an approval question waits for its answer: other lines wait after it
        self._held: list[str] = []
        self._pending: set[Any] = set()

    def visible(self) -> bool:
        """Whether the prompt is on the screen now (anything printed must suspend it first)."""
        return self.prompting and self.suspended == 0 and self.session.app.is_running

    @asynccontextmanager
    async def out_of_prompt(self) -> AsyncIterator[None]:
        """Suspend the prompt (if it is on the screen) while the body prints or asks; draw it again after."""
        if not self.visible():
            yield
            return
        from prompt_toolkit.application import in_terminal
        from prompt_toolkit.application.current import set_app

        with set_app(self.session.app):
            async with in_terminal():
                self.suspended += 1
                try:
                    yield
                finally:
                    self.suspended -= 1

    def say(self, text: str) -> None:
        """Print ``text`` (a line or more): above the prompt when it is on the screen, else where the cursor is
        (after the answer when an approval question is open)."""
        if self.asking:
            self._held.append(text)
            return
        if not self.visible():
            self._write(text)
            return
        from prompt_toolkit.application import run_in_terminal
        from prompt_toolkit.application.current import set_app

        with set_app(self.session.app):
            fut = run_in_terminal(lambda: self._write(text))
        self._pending.add(fut)  # the future is kept until it is done (no lost task)
        fut.add_done_callback(self._pending.discard)  # type: ignore[attr-defined]

    def answered(self) -> None:
        """The approval question is answered: print what came meanwhile."""
        self.asking = False
        held, self._held = self._held, []
        for text in held:
            self.say(text)

    def _write(self, text: str) -> None:
        self.out.write(terminal_safe(text) + "\n")  # answers and notices are shown, their escape codes not obeyed
        self.out.flush()

    def toolbar(self) -> str:
        """The bottom toolbar: the conversation's running agents, else a reminder of the commands."""
        rows = [r for r in self.progress.rows.values()
                if r.id != self.root_id and r.status in ("running", "pending_init")]
        if not rows:
            return " /help commands · /agents tree · Ctrl-D exits"
        width = max(self.session.app.output.get_size().columns - 1, 20) if self.session.app.is_running else 100
        lines = [f" {r.line(width - 1).lstrip()}" for r in rows[:TOOLBAR_ROWS]]
        if len(rows) > TOOLBAR_ROWS:
            lines.append(f" … and {len(rows) - TOOLBAR_ROWS} more (/agents)")
        return "\n".join([f" {len(rows)} agent{'s' if len(rows) != 1 else ''} working in the background:",
                          *lines])

    def __call__(self, ev: Event) -> None:
        """An event listener: keeps the tree up to date and redraws the toolbar."""
        self.progress.update(ev)
        if self.visible():
            self.session.app.invalidate()


class TurnLines:
    """An event listener that prints, during a turn, what the agents do (one short line per step)."""

    __slots__ = ("screen",)

    def __init__(self, screen: Screen) -> None:
        self.screen = screen

    def __call__(self, ev: Event) -> None:
        line = self.line(ev)
        if line is not None:
            self.screen.say(line)

    def line(self, ev: Event) -> str | None:
        """The line for one event, or None for the events not shown."""
        d = ev.data
        who = ev.nickname or short_id(ev.agent_id)
        pad = "  " * (ev.depth + 1)
        if ev.kind == "tool_start" and d.get("tool") not in ("spawn_agent",):
            return f"{pad}· {who}: {d.get('tool')}({_brief(d.get('arguments'))})"
        if ev.kind == "subagent_spawned" and ev.parent_id is not None:
            how = "in the background" if d.get("background") else "and waits for it"
            return f"{pad}+ {who} [{d.get('agent_type', '')}] started {how}"
        if ev.kind == "subagent_completed" and ev.parent_id is not None:
            outcome = d.get("outcome") or d.get("status")
            return f"{pad}{'✓' if outcome == 'ok' else '✗'} {who} finished ({outcome})"
        return None


class ChatAsk(TerminalApprover):
    """``subagents run``'s question (:class:`~subagents.cli.approve.TerminalApprover`), its answers read with
    :func:`read_fd_line`: a question closed unanswered (Ctrl-C stopped the turn) leaves no reader behind."""

    __slots__ = ()

    async def _read(self, prompt: str) -> str | None:
        self.out.write(prompt)
        self.out.flush()
        return await read_fd_line(0)


class ChatApprover:
    """The runtime's approver in a chat: the question (``ask``, a :class:`ChatAsk`) is asked with the prompt
    suspended, and lines that come meanwhile wait for the answer."""

    __slots__ = ("ask", "screen")

    def __init__(self, screen: Screen, ask: Callable[[ApprovalRequest], Any]) -> None:
        self.screen = screen
        self.ask = ask

    async def __call__(self, req: ApprovalRequest) -> Decision:
        async with self.screen.out_of_prompt():
            self.screen.asking = True
            try:
                decision: Decision = await self.ask(req)
            finally:
                self.screen.answered()
            return decision


def _brief(arguments: Any, room: int = 60) -> str:
    if not isinstance(arguments, dict):
        return ""
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items())
    return text if len(text) <= room else text[: room - 1] + "…"


async def read_fd_line(fd: int = 0) -> str | None:
    """One line typed on ``fd`` (None at end of input), read by the event loop: cancelling it leaves nothing
    behind that would take the person's next line from the prompt (a reading thread would)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()
    data = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            if not done.done():
                done.set_result(None)
            return
        data.extend(chunk)
        if (b"\n" in data or b"\r" in data) and not done.done():
            done.set_result(data.decode("utf-8", "replace"))

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)
