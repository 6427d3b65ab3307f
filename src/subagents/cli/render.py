"""Output of ``run`` and ``demo``: JSON lines, and the live tree of agents on a terminal.

:class:`Progress` is the plain state (one row per agent, fed by events, rendered as indented
lines); :class:`LiveView` shows it with ``rich.live`` — imported only when a live view starts, so
``subagents --help`` never pays for rich.  Team events (issue 14) are told one line each above the view
(:class:`TeamLines`): a team created, a teammate joined / idle / shut down, a task created / claimed /
completed, a message sent (``from -> to``).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from ..ids import short_id
from .common import json_line, terminal_safe

if TYPE_CHECKING:
    from rich.live import Live

    from ..runtime.events import Event
    from ..runtime.result import RunResult

__all__ = ["TEAM_EVENTS", "AgentRow", "JsonLines", "LiveView", "Progress", "TeamLines", "current_line", "json_line",
           "no_color", "team_line", "terminal_safe"]

TEXT_KEPT = 4000  # characters of an agent's streamed text kept to find its current line

def no_color() -> bool:
    """True when the ``NO_COLOR`` convention asks for plain output (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


class JsonLines:
    """Writes one JSON object per event, then the result: ``{"kind": "result", ...}``.

    Once its reader is gone (``subagents run --json ... | head -1``) it writes nothing more and the run goes on,
    quietly: no error per event, no traceback at exit.  Another failed write (a full disk, a closed stdout) stops
    the writing too; :attr:`error` keeps it, for the command to tell once the run is over."""

    __slots__ = ("error", "gone", "stream")

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.gone = stream is None  # stdout closed (``>&-``): nothing to write to, nobody to tell
        self.error: OSError | ValueError | None = None

    def write(self, obj: dict[str, Any]) -> None:
        if self.gone or self.stream is None:
            return
        try:
            self.stream.write(json_line(obj) + "\n")
            self.stream.flush()
        except BrokenPipeError:
            self.gone = True
            silence(self.stream)
        except (OSError, ValueError) as e:
            self.gone = True
            self.error = e

    def __call__(self, ev: Event) -> None:
        self.write(ev.to_dict())

    def result(self, result: RunResult) -> None:
        self.write({"kind": "result", **result.to_dict()})


def silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null: its reader is gone, and Python must not fail flushing it."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


@dataclass(slots=True)
class AgentRow:
    """What one agent is doing, as far as the events told us."""

    id: str
    nickname: str
    agent_type: str = ""
    depth: int = 0
    parent_id: str | None = None
    status: str = "running"
    turns: int = 0
    tokens: int | None = None
    tool_calls: int = 0
    activity: str = "starting"
    member: str = ""
    """``team/name`` for a teammate."""
    text: str = ""
    """The text of the current turn so far (streamed chunks added up; only its tail is kept)."""

    def line(self, width: int | None = None) -> str:
        """The row; with ``width``, the activity is cut (with …) so that the row fits in it."""
        name = self.nickname or short_id(self.id)
        kind = f" [{self.agent_type}]" if self.agent_type and not name.startswith(self.agent_type) else ""
        kind += f" ({self.member})" if self.member else ""
        mark = "✓" if self.status == "completed" else "✗" if self.status in ("errored", "shutdown") else "•"
        stats = [f"turn {self.turns}", _n(self.tool_calls, "tool call")]
        if self.tokens is not None:
            stats.append(_n(self.tokens, "token"))
        head, tail = terminal_safe(f"{'  ' * self.depth}{mark} {name}{kind}: "), f"  ({', '.join(stats)})"
        room = max(width - len(head) - len(tail), 8) if width is not None else 70
        return f"{head}{_cut(terminal_safe(self.activity), room)}{tail}"

    def add_text(self, chunk: str, *, whole: bool = False) -> None:
        """Add a streamed chunk (or, ``whole``, the turn's whole text) and show the current line."""
        self.text = chunk if whole else (self.text + chunk)[-TEXT_KEPT:]
        current = current_line(self.text)
        if current:
            self.activity = f"says: {current}"


class Progress:
    """The state of every agent of a run, updated event by event."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: dict[str, AgentRow] = {}

    def row(self, ev: Event) -> AgentRow:
        r = self.rows.get(ev.agent_id)
        if r is None:
            r = self.rows[ev.agent_id] = AgentRow(ev.agent_id, ev.nickname, depth=ev.depth, parent_id=ev.parent_id)
        return r

    def update(self, ev: Event) -> None:
        r = self.row(ev)
        d = ev.data
        r.agent_type = str(d.get("agent_type") or r.agent_type)
        _tokens(r, d)
        if ev.kind == "run_start":  # also a lead's next turn after its teammates' mail, or a resumed run
            r.status = "running"
        elif ev.kind == "turn_start":
            r.turns = int(d.get("turn", r.turns + 1))
            r.activity = "thinking"
            r.text = ""
        elif ev.kind == "assistant_text":
            r.add_text(str(d.get("text", "")), whole=not d.get("delta"))
        elif ev.kind == "tool_start":
            r.tool_calls += 1
            r.activity = f"{d.get('tool')}({_args(d.get('arguments'))})"
        elif ev.kind == "tool_end":
            r.activity = f"{d.get('tool')} {'failed' if d.get('is_error') else 'done'}"
        elif ev.kind == "approval_requested":
            r.activity = f"waiting for approval: {d.get('tool')}"
        elif ev.kind == "approval_decided":
            r.activity = f"{d.get('tool')} {d.get('decision')}"
        elif ev.kind == "teammate_joined":
            r.member = f"{d.get('team')}/{d.get('name')}"
        elif ev.kind == "teammate_idle":
            r.activity = "idle: waits for a message"
        elif ev.kind == "teammate_shutdown":
            r.activity = "shut down"
        elif ev.kind in ("run_end", "subagent_completed", "subagent_status_changed"):
            r.status = str(d.get("status") or r.status)
            r.turns = int(d.get("turns", r.turns))
            r.tool_calls = int(d.get("tool_calls", r.tool_calls))
            outcome = d.get("outcome")
            r.activity = f"{r.status}" + (f" ({outcome})" if outcome and outcome != "ok" else "")

    def lines(self, width: int | None = None) -> list[str]:
        """Rows in tree order: each child right after its parent, indented by depth (each fits ``width``)."""
        children: dict[str | None, list[AgentRow]] = {}
        for r in self.rows.values():
            parent = r.parent_id if r.parent_id in self.rows else None
            children.setdefault(parent, []).append(r)
        out: list[str] = []

        def walk(parent: str | None) -> None:
            for r in children.get(parent, []):
                out.append(r.line(width))
                walk(r.id)

        walk(None)
        return out


class LiveView:
    """A small live-updating view of :class:`Progress` on a terminal (stderr)."""

    __slots__ = ("_held", "_live", "progress", "stream", "team_lines")

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.progress = Progress()
        self.team_lines = TeamLines(self.note)
        self._live: Live | None = None
        self._held: list[str] | None = None  # lines told while an approval prompt waits: printed after it

    def __enter__(self) -> LiveView:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream, no_color=no_color(), highlight=False)
        self._live = Live(self._renderable(), console=console, refresh_per_second=8, transient=False)
        self._live.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.team_lines.flush()
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)
            self._live.__exit__(et, e, tb)
            self._live = None

    def __call__(self, ev: Event) -> None:
        self.progress.update(ev)
        self.team_lines(ev)
        if self._live is not None:
            self._live.update(self._renderable())

    def pause(self) -> None:
        """Stop redrawing (while the person answers an approval prompt below the view); lines told meanwhile wait
        for the answer (another agent's line would land between the prompt and the person's answer)."""
        if self._live is not None:
            self._live.stop()
            self._held = []

    def resume(self) -> None:
        held, self._held = self._held or [], None
        if self._live is not None:
            self._live.start(refresh=True)
        for line in held:
            self.note(line)

    def note(self, line: str) -> None:
        """Print a line above the live view (hook errors, refusals)."""
        line = terminal_safe(line)
        if self._held is not None:
            self._held.append(line)
        elif self._live is not None:
            self._live.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def _renderable(self) -> Any:
        from rich.text import Text

        width = self._live.console.width if self._live is not None else None
        lines = self.progress.lines(width) or ["• starting…"]
        return Text("\n".join(lines[-20:]), no_wrap=True, overflow="ellipsis")


TEAM_EVENTS = frozenset({"team_created", "teammate_joined", "task_created", "task_claimed", "task_completed",
                         "message_sent", "teammate_idle", "teammate_shutdown", "plan_approved", "team_deleted"})


def team_line(ev: Event) -> str | None:
    """A team event as one line (``None`` for other events, and for an idle notice's mail: the idle line says it)."""
    d = ev.data
    team, who = d.get("team"), d.get("name")
    k = ev.kind
    if k not in TEAM_EVENTS or (k == "message_sent" and d.get("mail_kind") == "idle"):
        return None
    if k == "team_created":
        return f"team {team}: created by {ev.nickname or short_id(ev.agent_id)} (its lead)"
    if k == "team_deleted":
        return f"team {team}: deleted"
    if k == "teammate_joined":
        return f"team {team}: {who} joined ({d.get('agent_type')}, {ev.nickname or short_id(ev.agent_id)})"
    if k == "teammate_idle":
        return f"team {team}: {who} is idle"
    if k == "teammate_shutdown":
        released = d.get("released") or []
        back = f"; task {', '.join(f'#{t}' for t in released)} back to pending" if released else ""
        return f"team {team}: {who} shut down{back}"
    if k == "plan_approved":
        return f"team {team}: {who}'s plan approved"
    if k == "task_created":
        after = d.get("blocked_by") or []
        tail = f" (after {', '.join(f'#{b}' for b in after)})" if after else ""
        subject = _cut(" ".join(str(d.get("subject")).split()), 60)
        return f"team {team}: task #{d.get('task_id')} created by {d.get('by')}: {subject}{tail}"
    if k == "task_claimed":
        return f"team {team}: {d.get('owner')} claimed task #{d.get('task_id')}"
    if k == "task_completed":
        note = " ".join(str(d.get("note") or "").split())
        done = f"team {team}: {d.get('by')} completed task #{d.get('task_id')}"
        return done + (f": {_cut(note, 60)}" if note else "")
    kind = d.get("mail_kind")
    return f"team {team}: message {d.get('sender')} -> {d.get('recipient')}" + (
        f" [{kind}]" if kind and kind != "message" else "")


class TeamLines:
    """An event listener that tells each team event in one line (:func:`team_line`) to ``emit``; a broadcast
    (one ``message_sent`` per recipient) is told once, naming all its recipients."""

    __slots__ = ("_held", "emit")

    def __init__(self, emit: Callable[[str], Any]) -> None:
        self.emit = emit
        self._held: list[Event] = []  # the broadcast being gathered

    def __call__(self, ev: Event) -> None:
        d = ev.data
        if self._held:
            first = self._held[-1].data
            if (ev.kind == "message_sent" and d.get("mail_kind") == "broadcast" and d.get("team") == first.get("team")
                    and d.get("sender") == first.get("sender") and d.get("seq") == int(first.get("seq", 0)) + 1):
                self._held.append(ev)
                return
            self.flush()
        if ev.kind == "message_sent" and d.get("mail_kind") == "broadcast":
            self._held.append(ev)
            return
        line = team_line(ev)
        if line is not None:
            self.emit(line)

    def flush(self) -> None:
        """Tell the broadcast gathered so far (the next event, or the end of the run, closes it)."""
        held, self._held = self._held, []
        if held:
            d = held[0].data
            to = ", ".join(str(e.data.get("recipient")) for e in held)
            self.emit(f"team {d.get('team')}: broadcast {d.get('sender')} -> {to}")


def current_line(text: str) -> str:
    """The last non-empty line of ``text`` (the one being written), its whitespace collapsed."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return " ".join(line.split())
    return ""


def _tokens(r: AgentRow, d: dict[str, Any]) -> None:
    usage = d.get("usage")
    if isinstance(usage, dict):
        r.tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    elif "total_tokens" in d:
        r.tokens = int(d["total_tokens"])


def _args(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return ""
    return _cut(", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in arguments.items()), 50)


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _n(n: int, what: str) -> str:
    count = f"{n / 1000:.1f}k" if n >= 1000 else str(n)
    return f"{count} {what}{'' if n == 1 else 's'}"
