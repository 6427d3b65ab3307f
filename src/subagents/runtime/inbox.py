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

__all__ = ["Inbox"]

_auto = itertools.count()


class Inbox:
    __slots__ = ("_items", "on_deliver")

    def __init__(self, on_deliver: Callable[[list[str]], None] | None = None) -> None:
        self._items: dict[str, str] = {}
        self.on_deliver = on_deliver  # receives the keys of delivered items

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def put(self, text: str, key: str | None = None) -> None:
        self._items[key if key is not None else f"auto:{next(_auto)}"] = text

    def discard(self, key: str) -> bool:
        return self._items.pop(key, None) is not None

    def keys(self) -> list[str]:
        return list(self._items)

    def drain(self) -> list[str]:
        """Take every waiting message, in arrival order (and report their keys as delivered)."""
        if not self._items:
            return []
        keys, texts = list(self._items), list(self._items.values())
        self._items.clear()
        if self.on_deliver is not None:
            self.on_deliver(keys)
        return texts
