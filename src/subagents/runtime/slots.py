"""``SlotPool``: the one place that counts running sub-agents (``max_threads``) and checks ``max_depth``.

A spawn reserves a slot first (a refusal costs nothing), then commits it when the child is built,
or the slot returns on its own if building failed; a child gives its slot back when it ends.  Root
agents take no slot.  Everything runs on the event loop thread, so the check-and-reserve cannot race.

When the pool is full, ``when_full`` decides: ``"refuse"`` (the default) refuses the spawn with a
:class:`SpawnError`; ``"queue"`` accepts a *background* spawn whose parent holds no slot (a root
agent, or none): the child is built and recorded (``pending_init``) but waits, first in first out, and
:meth:`SlotPool.release` hands the freed slot to the oldest waiting child, which the manager then
starts.  Two spawns are refused even then, because a parent holding a slot while it waits for a
queued child could wait forever (every slot held by a waiting parent): a foreground spawn, and a
spawn by a sub-agent that itself holds a slot.  ``max_depth`` always refuses.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable

from ..exceptions import SpawnError
from .node import AgentNode

__all__ = ["WHEN_FULL", "Queued", "Reservation", "SlotPool"]

WHEN_FULL = ("refuse", "queue")
"""The values of ``[agents] when_full``."""

Queued = tuple[AgentNode, str | None, Callable[[], Awaitable[None]] | None]
"""A waiting agent, the prompt it starts with and what to run before it (see ``AgentManager.start``)."""


class Reservation:
    """A slot held for a spawn in progress (a context manager): ``commit()`` once the child exists, else the
    slot returns to the pool when the ``with`` block ends.  ``queued``: no slot was free, the child waits."""

    __slots__ = ("committed", "held", "pool", "queued")

    def __init__(self, pool: SlotPool, *, held: bool, queued: bool = False) -> None:
        self.pool = pool
        self.held = held
        self.queued = queued
        self.committed = False

    def commit(self) -> None:
        self.committed = True

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.held and not self.committed:
            self.pool.running -= 1


class SlotPool:
    """Thread slots, the depth limit and the queue of waiting agents (see the module docstring)."""

    __slots__ = ("holders", "max_depth", "max_threads", "running", "waiting", "when_full")

    def __init__(self, max_threads: int, max_depth: int, holders: Callable[[], Iterable[AgentNode]],
                 when_full: str = "refuse") -> None:
        self.max_threads = max_threads
        self.max_depth = max_depth
        self.running = 0
        self.holders = holders  # the live agents holding a slot, to name them in a refusal
        self.when_full = when_full
        # agent id -> entry, oldest first; the common entry (its task as prompt, nothing before) is the node alone:
        # one object fewer per waiting agent for the garbage collector to walk
        self.waiting: OrderedDict[str, Queued | AgentNode] = OrderedDict()

    def _full(self) -> bool:
        return self.running >= self.max_threads or bool(self.waiting)

    def reserve(self, depth: int, parent: AgentNode | None, *, background: bool = False, resuming: bool = False
                ) -> Reservation:
        """Reserve a slot for an agent at ``depth`` (none for a root), as a context manager (``with``);
        :class:`SpawnError` when refused.  With ``when_full="queue"`` a background spawn over the limit
        gets a ``queued`` reservation instead (hand the child to :meth:`enqueue`); a resume (``resuming``) never
        queues."""
        if depth > self.max_depth:
            who = f"agent {parent.nickname!r} at depth {parent.depth}" if parent else "this agent"
            raise SpawnError(
                f"max_depth={self.max_depth} reached: {who} cannot spawn a sub-agent (it would be at depth "
                f"{depth}); do the work directly, or raise [agents] max_depth / Runtime(max_depth=...)")
        r = Reservation(self, held=depth > 0)
        if r.held:
            if self._full():
                if self.when_full == "queue" and background and not resuming and (parent is None or parent.depth == 0):
                    return Reservation(self, held=False, queued=True)
                names = ", ".join(n.describe() for n in list(self.holders())[:8])
                why = ""
                if self.when_full == "queue" and resuming:
                    why = "; a resumed agent does not wait in the queue for a slot"
                elif self.when_full == "queue":
                    why = ("; a foreground spawn cannot wait for a slot; run it in the background or wait for one "
                           "to finish" if not background else
                           "; a sub-agent that holds a slot cannot queue a child (it could wait for it forever); "
                           "wait for one to finish")
                raise SpawnError(
                    f"max_threads={self.max_threads} reached: {self.running} sub-agents are running "
                    f"({names}){why}; wait for one to finish (wait) or close one (close_agent), "
                    "or raise [agents] max_threads / Runtime(max_threads=...)")
            self.running += 1
        return r

    def enqueue(self, node: AgentNode, prompt: str | None,
                before: Callable[[], Awaitable[None]] | None = None) -> int:
        """``node`` waits for a slot (last in line); returns how many agents are ahead of it."""
        self.waiting[node.id] = node if before is None and prompt is node.task_text else (node, prompt, before)
        return len(self.waiting) - 1

    def ahead(self, node: AgentNode) -> int | None:
        """How many agents wait before ``node``; ``None`` when it is not waiting."""
        if node.id not in self.waiting:
            return None
        if next(reversed(self.waiting)) == node.id:
            return len(self.waiting) - 1
        return list(self.waiting).index(node.id)

    def withdraw(self, node: AgentNode) -> bool:
        """Take ``node`` out of the queue (it is closed before it started); ``False`` if it was not waiting."""
        return self.waiting.pop(node.id, None) is not None

    def take(self, node: AgentNode, parent: AgentNode | None = None) -> bool:
        """A restored, unfinished sub-agent holds a slot again; ``False`` (with ``when_full="queue"``): the
        pool is full and ``node`` may wait (background, its ``parent`` a root): :meth:`enqueue` it; a run that
        may not wait takes a slot even over the limit (as with ``"refuse"``)."""
        if node.depth > 0 and not node.holds_slot:
            if (self.when_full == "queue" and self._full() and node.background
                    and (parent is None or parent.depth == 0)):
                return False
            node.holds_slot = True
            self.running += 1  # a foreground run is restored even over the limit (its parent waits for it)
        return True

    def release(self, node: AgentNode) -> Queued | None:
        """An agent ended: its slot (if it held one) is free.  Returns the oldest waiting agent, which now
        holds that slot (the caller starts it), if any; an agent that ends while waiting leaves the queue."""
        if not node.holds_slot:
            self.waiting.pop(node.id, None)
            return None
        node.holds_slot = False
        if self.waiting and self.running <= self.max_threads:
            entry = self.waiting.popitem(last=False)[1]
            nxt: Queued = (entry, entry.task_text, None) if isinstance(entry, AgentNode) else entry
            nxt[0].holds_slot = True
            return nxt
        self.running -= 1
        return None
