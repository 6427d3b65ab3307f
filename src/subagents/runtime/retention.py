"""``Retention``: keep a long-lived runtime's memory bounded by evicting old finished agent trees.

The store holds the facts; the manager's nodes are handles.  Once a root agent and all of its
descendants are final, the tree is a candidate; the ``keep_trees`` most recent finished trees
stay in memory (``rt.agents()``, ``wait`` and ``resume`` use them directly), older ones are
dropped.  ``rt.result(id)`` and ``rt.status(id)`` fall back to the store, and ``rt.resume(id)``
re-creates an evicted tree from the store (:func:`~subagents.runtime.recovery.adopt_tree`).
"""

from __future__ import annotations

import collections
import weakref
from typing import TYPE_CHECKING

from .node import AgentNode

if TYPE_CHECKING:
    from .manager import AgentManager

__all__ = ["Retention"]


class Retention:
    __slots__ = ("_done", "keep_trees", "mgr")

    def __init__(self, mgr: AgentManager, keep_trees: int = 256) -> None:
        self.mgr = weakref.proxy(mgr)  # the manager owns this: no reference cycle between them
        self.keep_trees = keep_trees
        self._done: collections.OrderedDict[str, None] = collections.OrderedDict()

    def root_finished(self, root: AgentNode) -> None:
        """A root agent ended: remember its tree, evict the oldest trees past ``keep_trees``."""
        self._done[root.id] = None
        self._done.move_to_end(root.id)
        tries = len(self._done) - self.keep_trees
        while tries > 0:
            tries -= 1
            oldest = next(iter(self._done))
            if self.evict(oldest):
                del self._done[oldest]
            else:  # still busy (a background child runs, follow-ups wait): look again later
                self._done.move_to_end(oldest)

    def evict(self, root_id: str) -> bool:
        """Drop a finished tree from memory; ``False`` (and nothing dropped) if any of it is live."""
        mgr = self.mgr
        root = mgr.nodes.get(root_id)
        if root is None:
            return True
        tree = mgr.tree.subtree(root)
        if any(self.busy(n) for n in tree):
            return False
        for n in tree:
            del mgr.nodes[n.id]
            mgr.nicknames.release(n.nickname)
        mgr.todos.pop(root_id, None)
        if mgr.authority is not None:  # its "allow always" answers were for its runs (a long-lived serve kept them all)
            mgr.authority.permissions.forget(root_id)
        return True

    def busy(self, node: AgentNode) -> bool:
        """Whether ``node`` still needs its in-memory state: unfinished, follow-ups, waiters or unrecorded acks."""
        return (not node.status.is_final() or bool(node.followups_) or bool(node.waiters)
                or self.mgr.recorder.owes_acks(node.id))
