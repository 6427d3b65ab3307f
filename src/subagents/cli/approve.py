"""Approvals on a terminal: ``subagents run`` asks the person, and tells them what was refused or failed.

:class:`TerminalApprover` is the runtime's approver when stdin and stderr are a terminal: the live
view pauses, the request is shown (which agent, its parents, the call, why it asks) and one answer
decides: ``y`` allow once, ``a`` allow for the rest of this run, ``n`` deny (then an optional reason
for the agent).  Requests of several agents are queued by the runtime and shown one at a time.  The call
is shown as it will run (:func:`~subagents.authority.approvals.visible`: no escape code obeyed, nothing
invisible, padding told by its length), and keys typed before the question appeared answer nothing.

:class:`Notices` prints, on stderr, what a person must never miss: hook errors, calls denied because
no one could approve them, and the warning of an unconfined shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..authority.approvals import ApprovalRequest, Decision, visible
from ..ids import short_id

if TYPE_CHECKING:
    from ..runtime.events import Event
    from .render import LiveView

__all__ = ["Notices", "TerminalApprover"]

ReadLine = Callable[[], str]
_ANSWERS = {"y": "y", "yes": "y", "a": "a", "always": "a", "n": "n", "no": "n"}
"""The answers understood (a whole word: a sentence that starts with ``a`` is no "allow always")."""
SHOWN = 2000
"""Characters of a call's arguments (and of the rule "allow always" adds) an approval question shows; the rest is
cut, and the cut says how many characters are not shown."""


def _stdin_line() -> str:
    return sys.stdin.readline()


def discard_typeahead(fd: int = 0) -> int:
    """Drop what was typed on the terminal ``fd`` before a question was shown (a chat's next message typed while
    the turn ran, a ``y`` pressed twice): it answers no question the person has not seen.  Returns how many bytes
    were dropped (0 when ``fd`` is not a terminal)."""
    try:
        import fcntl
        import termios
    except ImportError:  # not a POSIX terminal
        return 0
    try:
        if not os.isatty(fd):
            return 0
        pending = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)
        termios.tcflush(fd, termios.TCIFLUSH)
    except (OSError, ValueError, termios.error):
        return 0
    return pending


class TerminalApprover:
    """Asks the person at the terminal; see the module docstring."""

    __slots__ = ("_reading", "_waiter", "discard", "out", "read_line", "view")

    def __init__(self, view: LiveView | None = None, *, out: TextIO | None = None,
                 read_line: ReadLine = _stdin_line, discard: Callable[[], int] = discard_typeahead) -> None:
        self.view = view
        self.out = out or sys.stderr
        self.read_line = read_line
        self.discard = discard
        # the loop a reader thread delivers its line to, while one waits for a line (one at most: two split answers)
        self._reading: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[str | None] | None = None  # the question the next line answers

    async def __call__(self, req: ApprovalRequest) -> Decision:
        if self.view is not None:
            self.view.pause()
        try:
            return await self._ask(req)
        finally:
            if self.view is not None:
                self.view.resume()

    async def _ask(self, req: ApprovalRequest) -> Decision:
        offer, remembered = _always(req)
        dropped = self.discard()
        if dropped:
            self._say(f"\n  ({dropped} characters typed before this question were dropped: they answer nothing)")
        self._say(f"\n? approval needed: {req.describe(SHOWN)}\n"
                  f"  why: {visible(req.reason, SHOWN)}\n"
                  f"  [y] allow once   [a] {offer}   [n] deny")
        while True:
            answer = await self._read("  your choice [y/a/n]: ")
            if answer is None:
                return Decision.deny("no answer (the terminal closed)")
            key = _ANSWERS.get(answer.strip().lower())
            if key == "y":
                return Decision.allow()
            if key == "a":
                return Decision.allow_always() if remembered else Decision.allow()
            if key == "n":
                why = await self._read("  reason for the agent (optional, Enter to skip): ")
                return Decision.deny((why or "").strip() or None)
            self._say("  please answer y (yes), a (always) or n (no)")

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    async def _read(self, prompt: str) -> str | None:
        """One line from the person, read in a daemon thread (an unanswered prompt never blocks exit).

        A question that went unanswered (timed out, or its run was closed) leaves its reader waiting for a line:
        the next question takes that reader over instead of starting a second one, which would have left the
        person's answer to the first reader, dropped with the old question, and the new one waiting on."""
        self.out.write(prompt)
        self.out.flush()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str | None] = loop.create_future()
        self._waiter = fut

        def deliver(line: str | None) -> None:
            if self._reading is loop:
                self._reading = None
            waiter = self._waiter
            if waiter is not None and waiter.get_loop() is loop and not waiter.done():
                waiter.set_result(line)

        def read() -> None:
            try:
                line: str | None = self.read_line()
            except (OSError, ValueError, EOFError):
                line = None
            if line == "":
                line = None  # end of input
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits for this line
                loop.call_soon_threadsafe(deliver, line)

        if self._reading is not loop:
            self._reading = loop
            threading.Thread(target=read, name="subagents-approval-input", daemon=True).start()
        return await fut


def _always(req: ApprovalRequest) -> tuple[str, bool]:
    """What ``a`` offers, and whether it adds the request's rule: only when that rule covers this very call (a
    compound command's exact rule may not; ``a`` then allows the call once, and says so)."""
    from ..authority.rules import parse_rule

    try:
        rule = parse_rule(req.always_rule, "approval")
        covers = rule.matches(req.tool, req.arguments, allow=True)
    except (ValueError, TypeError):
        covers = False
    if covers:
        every = f"every {visible(req.tool)} call " if rule.specifier is None else ""
        return f"allow {every}for the rest of this run ({visible(req.always_rule, SHOWN)})", True
    return "allow now (this call cannot be remembered as a rule: the next one like it is asked again)", False


class Notices:
    """An event listener that prints hook errors and refusals nobody could approve (on stderr)."""

    __slots__ = ("_seen", "emit")

    def __init__(self, emit: Callable[[str], Any]) -> None:
        self.emit = emit
        self._seen: set[str] = set()

    def __call__(self, ev: Event) -> None:
        d = ev.data
        who = ev.nickname or short_id(ev.agent_id)
        if ev.kind == "hook_error":
            after = "the call was blocked (on_error = \"block\")" if d.get("on_error") == "block" else "the run went on"
            self.emit(f"subagents: hook error ({d.get('event')}, {d.get('source') or 'python'}): {d.get('message')}; "
                      f"{after}")
        elif ev.kind == "approval_decided" and d.get("by") in ("no approver", "timeout"):
            key = f"{d.get('tool')}:{d.get('by')}"
            if key in self._seen:
                return
            self._seen.add(key)
            why = "no one can approve it here" if d.get("by") == "no approver" else "the approval timed out"
            self.emit(f"subagents: denied {d.get('tool')} for {who}: {d.get('reason')}, and {why}. Allow it with "
                      "--permission-mode autoEdit|yolo or --allow 'RULE' (see docs/permissions.md).")
