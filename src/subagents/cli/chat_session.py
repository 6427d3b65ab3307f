"""One ``subagents chat`` conversation: the person's turns, follow-up turns, and the slash commands.

The conversation is one root run in the store.  The person's first message spawns it
(``Runtime.spawn(..., background=False)``); each later message continues it
(``Runtime.resume(root_id, text)``), so the whole exchange is one transcript that
``subagents chat --resume ID`` (or ``subagents runs resume``) continues after the process exits.

Background children the root starts keep working while the person is at the prompt.  When one ends
and the root is idle, its announcement (seed 003's trigger message) is queued for the root as a
follow-up; :meth:`ChatSession.announcer` notices it and runs a *follow-up turn*: the root resumes
with the queued announcements as its message, and its answer is printed above the prompt — unless it
is exactly ``NO_REPLY`` (:attr:`~subagents.runtime.result.RunResult.silent`), which prints nothing.

Turns run one at a time (``turn_lock``).  Ctrl-C during a turn closes the root's run (and the agents
still working under it); the next message continues the conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exceptions import SubagentsError
from ..ids import short_id
from .chat_screen import Screen

if TYPE_CHECKING:
    from ..runtime.events import Event
    from ..runtime.limits import Limits
    from ..runtime.result import RunResult
    from ..runtime.runtime import Runtime

__all__ = ["HELP", "ChatSession"]

HELP = """Commands:
  /agents      the conversation's agents: a tree with each one's status
  /cancel ID   close an agent (id, id prefix or nickname) and the agents under it
  /wait        wait for the background agents, then for the conversation's answers to them
  /exit        leave (Ctrl-D too); agents still working are stopped, recorded as interrupted
  /help        this list
Ctrl-C stops the current turn (and the agents still working under it); at the prompt it clears the line."""


class ChatSession:
    """The state of one conversation and what the person's input does (see the module docstring)."""

    __slots__ = ("_closing", "agent", "announced", "interruptible", "limits", "root_id", "rt", "screen", "turn_lock",
                 "turning", "wake")

    def __init__(self, rt: Runtime, screen: Screen, *, agent: str, limits: Limits | None,
                 root_id: str | None = None) -> None:
        self.rt = rt
        self.screen = screen
        self.agent = agent
        self.limits = limits
        self.root_id = root_id
        screen.root_id = root_id
        self.turn_lock = asyncio.Lock()
        self.turning = False  # a turn of the root runs now (Ctrl-C closes it)
        self.wake = asyncio.Event()  # set when an announcement may wait for an idle root
        self.announced: list[str] = []  # the children whose announcements wait (named in the follow-up turn)
        self.interruptible: asyncio.Task[Any] | None = None  # a /wait that Ctrl-C stops
        self._closing: set[asyncio.Task[Any]] = set()

    # -- events ---------------------------------------------------------------------------------
    def on_event(self, ev: Event) -> None:
        """An announcement for the root queued as a follow-up wakes the announcer."""
        if ev.kind == "announcement" and ev.agent_id == self.root_id and ev.data.get("mode") == "followup":
            child = str(ev.data.get("child_id", ""))
            row = self.screen.progress.rows.get(child)
            self.announced.append(row.nickname if row is not None and row.nickname else short_id(child))
            self.wake.set()

    def followups_pending(self) -> bool:
        """Whether announcements wait for the root while it is idle (they make the next turn)."""
        if self.root_id is None:
            return False
        node = self.rt.manager.find(self.root_id)
        return node is not None and node.status.is_final() and bool(node.followups)

    async def announcer(self) -> None:
        """Run a follow-up turn each time announcements wait for the idle root (runs for the whole chat)."""
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.followups_pending():
                try:
                    if await self.turn(None) is None:
                        break  # the turn could not start (said on the screen): no retry in a loop
                except SubagentsError as e:  # e.g. the store failed: said, and the chat goes on
                    self.screen.say(f"error: the follow-up turn failed: {e}")
                    break

    # -- turns ----------------------------------------------------------------------------------
    async def turn(self, text: str | None) -> RunResult | None:
        """One turn of the root: the person's ``text``, or (``None``) the announcements queued for it."""
        async with self.turn_lock:
            if text is None and not self.followups_pending():
                return None  # another turn took them with it
            async with self.screen.out_of_prompt():
                return await self._turn(text)

    async def _turn(self, text: str | None) -> RunResult | None:
        rt = self.rt
        self.turning = True
        try:
            try:
                if self.root_id is None:
                    assert text is not None
                    h = await rt.spawn(text, self.agent, background=False, limits=self.limits)
                    self.root_id = self.screen.root_id = h.id
                    self.screen.say(f"conversation {h.id} ({h.nickname})")
                else:
                    if text is None:
                        who = ", ".join(dict.fromkeys(self.announced)) or "a background agent"
                        self.screen.say(f"· {who} finished: the conversation is told")
                    self.announced.clear()  # this turn takes every queued announcement with it
                    await rt.resume(self.root_id, text or "", limits=self.limits)
            except SubagentsError as e:
                self.screen.say(f"error: {e}")
                return None
            result = (await rt.wait([self.root_id]))[self.root_id]
            await rt.events_delivered()
        finally:
            self.turning = False
        self.show(result)
        if self.followups_pending():
            self.wake.set()  # announcements that came while it ended: the announcer answers them
        return result

    def show(self, result: RunResult) -> None:
        """The answer (nothing for a silent NO_REPLY), then why the turn stopped if it did not end well."""
        if result.text and not result.silent:
            self.screen.say(result.text)
        if not result.ok:
            why = result.error or (f"limit {result.limit}" if result.limit else str(result.outcome))
            self.screen.say(f"(the turn stopped: {result.outcome}: {why}; your next message continues the "
                            "conversation)")

    def interrupt(self) -> None:
        """Ctrl-C outside the prompt: close the running turn, or stop a /wait."""
        if self.turning and self.root_id is not None:
            self.screen.say("^C: stopping the turn…")
            task = asyncio.ensure_future(self.rt.close(self.root_id))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        elif self.interruptible is not None:
            self.interruptible.cancel()

    # -- slash commands -------------------------------------------------------------------------
    async def command(self, line: str) -> bool:
        """Run a slash command; False when it ends the chat."""
        name, _, arg = line.strip().partition(" ")
        arg = arg.strip()
        handlers: dict[str, Callable[[str], Any]] = {"/agents": self.cmd_agents, "/cancel": self.cmd_cancel,
                                                     "/wait": self.cmd_wait, "/help": self.cmd_help}
        if name in ("/exit", "/quit"):
            return False
        handler = handlers.get(name)
        if handler is None:
            self.screen.say(f"unknown command {name!r}; /help lists the commands (a message that starts with "
                            "'/' is sent as it is if you begin it with '//')")
            return True
        out = handler(arg)
        if asyncio.iscoroutine(out):
            await out
        return True

    def cmd_help(self, arg: str) -> None:
        self.screen.say(HELP)

    def cmd_agents(self, arg: str) -> None:
        lines = self.tree_lines()
        self.screen.say("\n".join(lines) if lines else "no agents yet: your first message starts the conversation")

    def tree_lines(self) -> list[str]:
        """The conversation's agents as a tree (from the store: those of earlier processes too)."""
        if self.root_id is None:
            return []
        runs = {r.run_id: r for r in self.rt.runs(include_archived=True) if (r.root_id or r.run_id) == self.root_id}
        kids: dict[str | None, list[str]] = {}
        for r in runs.values():
            kids.setdefault(r.parent_id if r.parent_id in runs else None, []).append(r.run_id)
        out: list[str] = []

        def walk(rid: str, depth: int) -> None:
            r = runs[rid]
            label = "" if r.parent_id is None else f" — {r.label}"
            out.append(f"{'  ' * depth}{r.nickname} [{r.agent_type}] {r.status} ({short_id(r.run_id)}){label}")
            for k in kids.get(rid, []):
                walk(k, depth + 1)

        if self.root_id in runs:
            walk(self.root_id, 0)
        return out

    async def cmd_cancel(self, arg: str) -> None:
        if not arg:
            self.screen.say("usage: /cancel ID (an agent's id, id prefix or nickname; /agents lists them)")
            return
        node = self.rt.manager.find(arg)
        if node is None or node.root_id != self.root_id:
            self.screen.say(f"no agent {arg!r} in this conversation; /agents lists them")
            return
        if node.status.is_final():
            self.screen.say(f"{node.nickname} has already finished ({node.status})")
            return
        result = await self.rt.close(node.id)
        self.screen.say(f"cancelled {node.nickname} ({short_id(node.id)}): {result.outcome}")

    async def cmd_wait(self, arg: str) -> None:
        ids = self.working()
        if ids:
            self.screen.say(f"waiting for {len(ids)} agent{'s' if len(ids) != 1 else ''} (Ctrl-C stops waiting)…")
            self.interruptible = asyncio.ensure_future(self.rt.wait(ids))
            try:
                await self.interruptible
            except asyncio.CancelledError:
                self.screen.say("stopped waiting; the agents go on")
                return
            finally:
                self.interruptible = None
        elif not self.followups_pending():
            self.screen.say("no agent is working in the background")
            return
        await self.rt.events_delivered()
        while self.followups_pending():
            if await self.turn(None) is None:
                break

    def working(self) -> list[str]:
        """The ids of the conversation's agents still working (the root aside)."""
        return [a.id for a in self.rt.agents()
                if a.id != self.root_id and not a.status.is_final() and self._in_conversation(a.id)]

    def _in_conversation(self, agent_id: str) -> bool:
        node = self.rt.manager.find(agent_id)
        return node is not None and node.root_id == self.root_id
