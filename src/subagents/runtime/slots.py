"""``SlotPool``: the one place that counts running sub-agents (``max_threads``) and checks ``max_depth``.

A spawn reserves a slot first (a refusal costs nothing), then commits it when the child is built,
or the slot returns on its own if building failed; a child gives its slot back when it ends.  Root
agents take no slot.  Everything runs on the event loop thread, so the check-and-reserve cannot race.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..exceptions import SpawnError
from .node import AgentNode

__all__ = ["Reservation", "SlotPool"]


class Reservation:
    """A slot held for a spawn in progress (a context manager): ``commit()`` once the child exists, else the
    slot returns to the pool when the ``with`` block ends."""

    __slots__ = ("committed", "held", "pool")

    def __init__(self, pool: SlotPool, *, held: bool) -> None:
        self.pool = pool
        self.held = held
        self.committed = False

    def commit(self) -> None:
        self.committed = True

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.held and not self.committed:
            self.pool.running -= 1


class SlotPool:
    """Thread slots and the depth limit (see the module docstring)."""

    __slots__ = ("holders", "max_depth", "max_threads", "running")

    def __init__(self, max_threads: int, max_depth: int, holders: Callable[[], Iterable[AgentNode]]) -> None:
        self.max_threads = max_threads
        self.max_depth = max_depth
        self.running = 0
        self.holders = holders  # the live agents holding a slot, to name them in a refusal

    def reserve(self, depth: int, parent: AgentNode | None) -> Reservation:
        """Reserve a slot for an agent at ``depth`` (none for a root), as a context manager (``with``);
        :class:`SpawnError` when refused."""
        if depth > self.max_depth:
            who = f"agent {parent.nickname!r} at depth {parent.depth}" if parent else "this agent"
            raise SpawnError(
                f"max_depth={self.max_depth} reached: {who} cannot spawn a sub-agent (it would be at depth "
                f"{depth}); do the work directly, or raise [agents] max_depth / Runtime(max_depth=...)")
        r = Reservation(self, held=depth > 0)
        if r.held:
            if self.running >= self.max_threads:
                names = ", ".join(n.describe() for n in list(self.holders())[:8])
                raise SpawnError(
                    f"max_threads={self.max_threads} reached: {self.running} sub-agents are running "
                    f"({names}); wait for one to finish (wait) or close one (close_agent), "
                    "or raise [agents] max_threads / Runtime(max_threads=...)")
            self.running += 1
        return r

    def take(self, node: AgentNode) -> None:
        """A restored, unfinished sub-agent holds a slot again."""
        if node.depth > 0 and not node.holds_slot:
            node.holds_slot = True
            self.running += 1

    def release(self, node: AgentNode) -> None:
        """An agent ended: its slot (if it held one) is free."""
        if node.holds_slot:
            node.holds_slot = False
            self.running -= 1
