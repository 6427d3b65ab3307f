"""Readable nicknames ("explore-ada"), unique among live agents."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NAMES", "NicknamePool"]

NAMES = (
    "ada", "grace", "alan", "edsger", "barbara", "donald", "ken", "dennis", "frances", "margaret",
    "john", "tony", "niklaus", "leslie", "radia", "hedy", "kathleen", "annie", "evelyn", "jean",
    "claude", "marvin", "seymour", "fran", "lynn", "sophie", "karen", "shafi", "silvio", "whitfield",
    "ivan", "butler", "robin", "peter", "judea", "yoshua", "geoff", "fei", "daphne", "andrew",
)


class NicknamePool:
    __slots__ = ("_live", "_next")

    def __init__(self) -> None:
        self._live: set[str] = set()
        self._next: dict[str, int] = {}

    def take(self, agent_type: str, candidates: Sequence[str] = ()) -> str:
        """A nickname for a new agent of ``agent_type`` not held by any live agent."""
        for c in candidates:
            if c not in self._live:
                self._live.add(c)
                return c
        n = self._next.get(agent_type, 0)
        while True:
            base = NAMES[n % len(NAMES)]
            lap = n // len(NAMES)
            name = f"{agent_type}-{base}" if lap == 0 else f"{agent_type}-{base}-{lap + 1}"
            n += 1
            if name not in self._live:
                self._next[agent_type] = n
                self._live.add(name)
                return name

    def release(self, nickname: str) -> None:
        self._live.discard(nickname)

    def hold(self, nickname: str) -> None:
        self._live.add(nickname)

    def __contains__(self, nickname: object) -> bool:
        return nickname in self._live
