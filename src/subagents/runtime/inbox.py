"""An agent's inbox: messages for it that wait for its next tool boundary.

Items carry a key (an announcement's id, a ``send_input`` sequence number) so a message that
reached the agent another way (``wait`` returned the same child's result) can be withdrawn
before delivery — each item is delivered exactly once.

>>> box = Inbox()
>>> box.put("hello", key="m1"); box.put("child done", key="ann:c1")
>>> box.discard("ann:c1")
True
>>> box.drain()
['hello']
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from .notices import fitted

__all__ = ["Inbox"]

_auto = itertools.count()


class Inbox:
    __slots__ = ("_items", "_later", "on_deliver")

    def __init__(self, on_deliver: Callable[[list[str]], None] | None = None) -> None:
        self._items: dict[str, str] = {}
        # follow-ups: delivered when the agent ends its turn, not at a tool boundary (a set once there is one)
        self._later: set[str] | None = None
        self.on_deliver = on_deliver  # receives the keys of delivered items

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def put(self, text: str, key: str | None = None, *, steer: bool = True) -> None:
        k = key if key is not None else f"auto:{next(_auto)}"
        self._items[k] = text
        if not steer:
            if self._later is None:
                self._later = set()
            self._later.add(k)

    def discard(self, key: str) -> bool:
        if self._later:
            self._later.discard(key)
        return self._items.pop(key, None) is not None

    def steering(self) -> bool:
        """Whether a message waits that may be delivered at a tool boundary (not only follow-ups)."""
        return len(self._items) > len(self._later) if self._later else bool(self._items)

    def keys(self) -> list[str]:
        return list(self._items)

    def drain(self, *, followups: bool = True, fit: bool = True) -> list[str]:
        """Take the waiting messages in arrival order (``followups=False``: leave the follow-ups), report their keys.

        Many background results at once come as one line each (:func:`.notices.fitted`; ``fit=False``: as they
        are, for a caller that fits them together with more)."""
        if not self._items:
            return []
        later = self._later
        keys = list(self._items) if followups or not later else [k for k in self._items if k not in later]
        if not keys:
            return []
        texts = [self._items.pop(k) for k in keys]
        if later:
            later.difference_update(keys)
        if self.on_deliver is not None:
            self.on_deliver(keys)
        return fitted(texts) if fit and len(texts) > 1 else texts
