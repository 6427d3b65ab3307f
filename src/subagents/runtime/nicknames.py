"""Readable nicknames ("explore-ada"), unique among the agents a runtime holds."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from ..exceptions import StoreError

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = ["NAMES", "NicknamePool"]

NAMES = (
    "ada", "grace", "alan", "edsger", "barbara", "donald", "ken", "dennis", "frances", "margaret",
    "john", "tony", "niklaus", "leslie", "radia", "hedy", "kathleen", "annie", "evelyn", "jean",
    "claude", "marvin", "seymour", "fran", "lynn", "sophie", "karen", "shafi", "silvio", "whitfield",
    "ivan", "butler", "robin", "peter", "judea", "yoshua", "geoff", "fei", "daphne", "andrew",
)


class NicknamePool:
    """Nicknames held by the agents a runtime keeps (running, or finished and still resumable).

    A name is held from spawn until its agent leaves memory (evicted or deleted), not merely until it
    finishes: a finished agent can be resumed, and must never come back under a name another live
    agent took meanwhile (``send_input`` by nickname would reach the wrong one).  ``avoid`` names
    (the earlier runs' root names in the store) are skipped too, so successive runs' roots differ.
    """

    __slots__ = ("_live", "_next", "_stored")

    def __init__(self) -> None:
        self._live: set[str] = set()
        self._next: dict[str, int] = {}
        self._stored: dict[str, set[str]] = {}  # agent type -> root names in the store (read once)

    def take_root(self, agent_type: str, candidates: Sequence[str], store: Store) -> str:
        """A nickname for a root agent that no earlier root of its type in ``store`` had."""
        avoid = self._stored.get(agent_type)
        if avoid is None:
            avoid = self._stored[agent_type] = _stored_root_names(store, agent_type)
        name = self.take(agent_type, candidates, avoid)
        avoid.add(name)
        return name

    def take(self, agent_type: str, candidates: Sequence[str] = (), avoid: Collection[str] = ()) -> str:
        """A nickname for a new agent of ``agent_type`` not held by any agent (nor in ``avoid``)."""
        for c in candidates:
            if c not in self._live and c not in avoid:
                self._live.add(c)
                return c
        n = self._next.get(agent_type, 0)
        while True:
            base = NAMES[n % len(NAMES)]
            lap = n // len(NAMES)
            name = f"{agent_type}-{base}" if lap == 0 else f"{agent_type}-{base}-{lap + 1}"
            n += 1
            if name not in self._live and name not in avoid:
                self._next[agent_type] = n
                self._live.add(name)
                return name

    def adopt(self, nickname: str, agent_type: str) -> str:
        """Hold ``nickname`` for an agent re-created from the store, or a fresh one if it is taken."""
        if nickname in self._live:
            return self.take(agent_type)
        self._live.add(nickname)
        return nickname

    def release(self, nickname: str) -> None:
        self._live.discard(nickname)

    def hold(self, nickname: str) -> None:
        self._live.add(nickname)

    def __contains__(self, nickname: object) -> bool:
        return nickname in self._live


def _stored_root_names(store: Store, agent_type: str) -> set[str]:
    try:
        return store.root_nicknames(agent_type)  # one indexed read of one column, not every record
    except StoreError:  # an unreadable store is reported where it matters; names only need to be distinct
        return set()
