"""``TodoStore``: the todo lists of one agent tree — one store, a list per agent (seed 001's ``todo_store``).

The manager makes one store per tree and opens each agent's list in it as the agent is built; the
agent's :attr:`~subagents.tools.base.ToolContext.todos` *is* that list, so ``todo_write`` of a child
never touches its parent's list.  The store also remembers who is whose parent, so ``todo_read`` can
let an agent read the lists of its descendants (and nobody else's).

>>> from subagents.models.base import AgentInfo
>>> store = TodoStore()
>>> mine = store.open(AgentInfo("a1", "gp-ada", "general-purpose"))
>>> child = store.open(AgentInfo("b2", "explore-bob", "explore", 1, "a1"))
>>> child.append({"id": "1", "content": "read", "status": "pending"})
>>> mine, store.find("explore-bob").id, store.is_descendant("b2", of="a1"), store.is_descendant("a1", of="b2")
([], 'b2', True, False)
"""

from __future__ import annotations

from typing import Any

from ..models.base import AgentInfo

__all__ = ["TodoStore"]

MIN_PREFIX = 4
"""The shortest id prefix :meth:`TodoStore.find` accepts."""


class TodoStore:
    """The todo lists of one agent tree, by agent id, and who is whose parent."""

    __slots__ = ("_agents", "_lists")

    def __init__(self) -> None:
        self._lists: dict[str, list[dict[str, Any]]] = {}
        self._agents: dict[str, AgentInfo] = {}

    def open(self, agent: AgentInfo) -> list[dict[str, Any]]:
        """``agent``'s own list (made empty on first use; the same list object on every later call)."""
        self._agents[agent.id] = agent
        return self._lists.setdefault(agent.id, [])

    def register(self, agent: AgentInfo) -> None:
        """Make ``agent`` known to :meth:`find` and :meth:`descendants` without a list (one is made when it opens)."""
        self._agents[agent.id] = agent

    def close_empty(self, agent_id: str) -> None:
        """Forget ``agent_id``'s list if it is empty (the agent stays known; :meth:`open` makes a new one)."""
        if not self._lists.get(agent_id, True):
            del self._lists[agent_id]

    def list_of(self, agent_id: str) -> list[dict[str, Any]]:
        """The list of ``agent_id`` (empty, and not kept, if it never opened one)."""
        return self._lists.get(agent_id, [])

    def find(self, ref: str) -> AgentInfo | None:
        """An agent of the tree by id, nickname or unique id prefix (at least 4 characters)."""
        ref = ref.strip()
        hit = self._agents.get(ref)
        if hit is not None:
            return hit
        for a in self._agents.values():
            if a.nickname == ref:
                return a
        if len(ref) >= MIN_PREFIX:
            matches = [a for a in self._agents.values() if a.id.startswith(ref)]
            if len(matches) == 1:
                return matches[0]
        return None

    def is_descendant(self, agent_id: str, *, of: str) -> bool:
        """Whether ``agent_id`` is a child, grandchild... of ``of`` (an agent is not its own descendant)."""
        seen: set[str] = set()
        cur = self._agents.get(agent_id)
        while cur is not None and cur.parent_id is not None and cur.id not in seen:
            if cur.parent_id == of:
                return True
            seen.add(cur.id)
            cur = self._agents.get(cur.parent_id)
        return False

    def descendants(self, agent_id: str) -> list[AgentInfo]:
        """Every descendant of ``agent_id`` in the order they were opened."""
        return [a for a in self._agents.values() if self.is_descendant(a.id, of=agent_id)]

    def __len__(self) -> int:
        return len(self._agents)
