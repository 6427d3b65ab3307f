"""``max_threads`` / ``when_full`` across the workflows of a tree: the root workflow keeps the slot ledger.

Locally :class:`~subagents.runtime.slots.SlotPool` counts the sub-agents running at once.  Agent workflows
share no memory, so on the Temporal engine the tree's **root workflow** holds the ledger (per tree, with
the root's worker's ``[agents] max_threads`` / ``when_full``; ``max_threads=0`` turns it off), and the other
runs of the tree talk to it with one signal, ``slots`` (``{"op": ...}``):

- a spawn reserves a slot before its child is recorded (a refusal costs nothing): the root decides at
  once for its own spawns; a run below it sends ``ask`` and waits for the root's ``reply`` (an ended root
  answers nothing: the spawn then goes ahead, as nobody is left to count);
- once the child is recorded the spawner names the holder (``named``: the local refusal lists the
  holders), or frees the slot when the spawn failed (``free``);
- a child frees its slot when its end is recorded (``free``; before it announces itself);
- over the limit ``when_full="refuse"`` refuses with the local engine's tool error; ``"queue"`` queues a
  *background* spawn of the root (first in, first out): the child is recorded ``pending_init``, its
  workflow starts and waits for the root's ``grant``, then is recorded ``running`` and goes on.  As
  locally, a foreground spawn and a spawn by a sub-agent (which holds a slot) are refused instead.

Everything is decided in signal handlers and workflow code, so it replays deterministically.  The root
carries the ledger over a continue-as-new (``Carry.limits_state["slots"]``) after sending what it owes
(:meth:`TreeSlots.flush`), and it stays open after recording its own end until its queue is empty (it
must grant the waiting children their slots).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow

from .shapes import Prepared

__all__ = ["Seat", "TreeSlots"]

_NAMING_S = 10.0  # how long a refusal waits for the holders being recorded to have names


@dataclass
class Seat:
    """A spawn's reservation: its ``slot`` id (``""``: not counted), the refusal (a tool error), or how many
    waiting children are ahead of it when it is queued (``ahead``)."""

    slot: str = ""
    refusal: str | None = None
    ahead: int | None = None
    held: list[str] = field(default_factory=list)  # a refusal: the holders it names
    running: int = 0  # a refusal: how many held a slot


def _describe(p: Prepared) -> str:
    return f"{p.nickname} ({p.agent_type}, depth {p.depth}, running)"


class TreeSlots:
    """The slot side of one agent workflow: the ledger when it is a tree's root, the asking otherwise."""

    def __init__(self) -> None:
        self.max_threads = 0
        self.when_full = "refuse"
        self.run_id = self.root_id = self.prefix = ""
        self.is_root = False
        self.holders: dict[str, str] = {}  # root: slot id -> the holder's description
        self.queue: list[list[str]] = []  # root: [slot id, run id ("" until named), description], oldest first
        self.replies: dict[str, str | None] = {}  # a run below the root: slot id -> refusal (None: held)
        self.granted = False  # a queued child: the root gave it a slot
        self.asked = 0
        self.names: dict[str, str] = {}  # root: freed holders a refusal being written names
        self.explaining = 0
        self._sends: list[asyncio.Task[None]] = []

    def bind(self, p: Prepared, continued: int, state: dict[str, Any] | None) -> None:
        """The run's settings and place in its tree; ``state``: the ledger a previous history carried."""
        self.max_threads, self.when_full = p.max_threads, p.when_full
        self.run_id, self.root_id, self.is_root = p.run_id, p.root_id, p.run_id == p.root_id
        self.prefix = f"{p.run_id}/{p.runs}/{continued}/"
        if state:
            self.holders.update(state.get("holders", {}))
            self.queue.extend([str(x) for x in q] for q in state.get("queue", []))

    def state(self) -> dict[str, Any]:
        """The ledger for the run's next history (a root's only)."""
        return {"holders": dict(self.holders), "queue": [list(q) for q in self.queue]} if self.is_root else {}

    # -- the root's ledger ------------------------------------------------------------------------------
    def _decide(self, slot: str, *, background: bool, by_root: bool) -> Seat:
        if len(self.holders) < self.max_threads and not self.queue:
            self.holders[slot] = ""  # named once its child is recorded
            return Seat(slot)
        if self.when_full == "queue" and background and by_root:
            self.queue.append([slot, "", ""])
            return Seat(slot, ahead=len(self.queue) - 1)
        why = ""
        if self.when_full == "queue":
            why = ("; a foreground spawn cannot wait for a slot; run it in the background or wait for one to finish"
                   if not background else
                   "; a sub-agent that holds a slot cannot queue a child (it could wait for it forever); "
                   "wait for one to finish")
        return Seat(refusal=why, held=list(self.holders)[:8], running=len(self.holders))

    async def _explain(self, seat: Seat) -> str:
        """The local refusal text, naming the holders (those being recorded: once they are, a moment later)."""
        self.explaining += 1
        try:
            await workflow.wait_condition(lambda: all(self.holders.get(h) or h in self.names for h in seat.held),
                                          timeout=_NAMING_S)
        except TimeoutError:
            workflow.logger.info("slot holders not named within %ss", _NAMING_S)
        names = ", ".join(self.holders.get(h) or self.names.get(h) or "a sub-agent being started" for h in seat.held)
        self.explaining -= 1
        if not self.explaining:
            self.names.clear()
        return (f"max_threads={self.max_threads} reached: {seat.running} sub-agents are running ({names})"
                f"{seat.refusal}; wait for one to finish (wait) or close one (close_agent), or raise [agents] "
                "max_threads / Runtime(max_threads=...)")

    async def _answer(self, slot: str, requester: str, seat: Seat) -> None:
        refusal = None if seat.refusal is None else await self._explain(seat)
        await self._signal(requester, {"op": "reply", "slot": slot, "refusal": refusal})

    def _free(self, slot: str) -> None:
        desc = self.holders.pop(slot, None)
        if desc is None:
            self.queue = [q for q in self.queue if q[0] != slot]  # it ended (closed) while it waited
            return
        if self.explaining:  # a refusal being written still names it
            self.names[slot] = desc
        if self.queue and len(self.holders) < self.max_threads:
            slot, run_id, desc = self.queue.pop(0)
            self.holders[slot] = desc
            if run_id:  # else it is granted when it is named (its workflow is not started yet)
                self._send(run_id, {"op": "grant"})

    def _named(self, slot: str, run_id: str, desc: str, queued: bool) -> None:
        if slot in self.holders:
            self.holders[slot] = desc
            if queued:  # its slot freed while it was being recorded
                self._send(run_id, {"op": "grant"})
        for q in self.queue:
            if q[0] == slot:
                q[1], q[2] = run_id, desc

    def on_signal(self, msg: dict[str, Any]) -> None:
        """The ``slots`` signal (see the module docstring)."""
        op, slot = msg.get("op"), str(msg.get("slot", ""))
        if op == "grant":
            self.granted = True
        elif op == "reply":
            self.replies[slot] = msg.get("refusal")
        elif not self.is_root:
            return
        elif op == "ask":
            seat = self._decide(slot, background=bool(msg.get("background")), by_root=False)
            self._sends.append(asyncio.ensure_future(self._answer(slot, str(msg["from"]), seat)))
        elif op == "named":
            self._named(slot, str(msg["run_id"]), str(msg["desc"]), False)
        elif op == "free":
            self._free(slot)

    # -- any run of the tree ------------------------------------------------------------------------------
    async def reserve(self, background: bool) -> Seat:
        """A slot for a child about to be spawned (``Seat()`` when ``max_threads`` is not enforced)."""
        if self.max_threads <= 0:
            return Seat()
        self.asked += 1
        slot = f"{self.prefix}{self.asked}"
        if self.is_root:
            seat = self._decide(slot, background=background, by_root=True)
            return seat if seat.refusal is None else Seat(refusal=await self._explain(seat))
        try:
            await workflow.get_external_workflow_handle(self.root_id).signal(
                "slots", {"op": "ask", "slot": slot, "from": self.run_id, "background": background})
        except Exception:  # the root has ended: nobody is left to count
            return Seat()
        await workflow.wait_condition(lambda: slot in self.replies)
        refusal = self.replies.pop(slot)
        return Seat(slot if refusal is None else "", refusal)

    def named(self, seat: Seat, child: Prepared) -> None:
        """The child holding (or waiting for) ``seat`` is recorded and its workflow started."""
        if not seat.slot:
            return
        if self.is_root:
            self._named(seat.slot, child.run_id, _describe(child), child.queued)
        else:
            self._send(self.root_id, {"op": "named", "slot": seat.slot, "run_id": child.run_id,
                                      "desc": _describe(child)})

    def release(self, slot: str) -> None:
        """A reserved slot not used (the spawn failed), or a child's slot at its end."""
        if not slot:
            return
        if self.is_root:
            self._free(slot)
        else:
            self._send(self.root_id, {"op": "free", "slot": slot})

    async def wait_turn(self, p: Prepared, opts: dict[str, Any]) -> None:
        """A queued child: wait for the root's ``grant``, then record the run as started."""
        await workflow.wait_condition(lambda: self.granted)
        await workflow.execute_activity("subagents.started", p.run_id, **opts)

    async def ended(self, p: Prepared, closed: bool) -> None:
        """The run's end is recorded: free its slot; a root waits until its queued children have their slots."""
        if p.slot and not self.is_root:
            try:
                await workflow.get_external_workflow_handle(self.root_id).signal("slots", {"op": "free",
                                                                                          "slot": p.slot})
            except Exception:  # the root has ended: nobody is left to count
                workflow.logger.info("the root %s has ended: slot %s not freed there", self.root_id, p.slot)
        if self.is_root and not closed:
            await workflow.wait_condition(lambda: not self.queue)
        await self.flush()

    def _send(self, run_id: str, msg: dict[str, Any]) -> None:
        self._sends.append(asyncio.ensure_future(self._signal(run_id, msg)))

    @staticmethod
    async def _signal(run_id: str, msg: dict[str, Any]) -> None:
        try:
            await workflow.get_external_workflow_handle(run_id).signal("slots", msg)
        except Exception:  # it has ended: nothing to tell it any more
            workflow.logger.info("%s has ended: slots %s not delivered", run_id, msg.get("op"))

    async def flush(self) -> None:
        """Wait for the signals sent (before the run ends or continues as new)."""
        while self._sends:
            sends, self._sends = self._sends, []
            await asyncio.gather(*sends)
