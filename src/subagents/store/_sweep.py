"""``SweepOrder``: the memory store's sweep index — its final, unarchived runs in the sweeper's order.

Each run is kept under its current :func:`~subagents.store.base.sweep_key`; a run that changes its key,
is archived or deleted leaves its old place at once (a sorted list in blocks: ``O(log n)`` a change), so
a page (:meth:`SweepOrder.page`) walks only what it returns.  (A plain sorted list left the old keys
behind to be skipped when read: the first step after a sweep that archived 3,000 of 100,000 runs
walked all 3,000 of them, 4-5 ms on the event loop.)
"""

from __future__ import annotations

from sortedcontainers import SortedList

__all__ = ["SweepOrder"]

_SHRINK_FLOOR = 1024
"""Runs the index held at least before it rebuilds its dict once under a quarter of that (as the store's)."""


class SweepOrder:
    """Run ids in sweep-key order; see the module docstring."""

    __slots__ = ("_keys", "_of", "_peak")

    def __init__(self) -> None:
        self._keys: SortedList[tuple[float, str]] = SortedList()
        self._of: dict[str, tuple[float, str]] = {}  # run id -> its key in _keys
        self._peak = 0  # the most runs _of held since it was last rebuilt

    def __len__(self) -> int:
        return len(self._of)

    def set(self, run_id: str, key: tuple[float, str] | None) -> None:
        """Keep ``run_id`` under ``key`` (its sweep key), or drop it (``None``: not a candidate)."""
        old = self._of.get(run_id)
        if old == key:
            return
        of = self._of
        if old is not None:
            self._keys.remove(old)
            del of[run_id]
            if self._peak >= _SHRINK_FLOOR and len(of) < self._peak // 4:  # its memory goes back
                self._of = dict(of.items())
                self._peak = len(of)
        if key is not None:
            self._keys.add(key)
            self._of[run_id] = key
            self._peak = max(self._peak, len(self._of))

    def page(self, now: float, limit: int, after: tuple[float, str] | None = None) -> list[str]:
        """The next ``limit`` run ids past ``after`` whose key is due (``<= now``), in order."""
        out: list[str] = []
        for key in self._keys.irange(after, (now, "\U0010ffff"), inclusive=(after is None, True)):
            out.append(key[1])
            if len(out) >= limit:
                break
        return out

    def ids(self) -> list[str]:
        """Every run id kept (in no particular order)."""
        return list(self._of)
