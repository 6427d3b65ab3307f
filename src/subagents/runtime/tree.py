"""``AgentTree``: the agents of one runtime by id, and the questions asked about their tree.

Lookup by id, nickname or a unique id prefix or suffix; an agent's ancestors (who asks, in an approval); its subtree
(what ``close`` cancels); the agents holding thread slots; and the clocks held while a person decides.
"""

from __future__ import annotations

from ..exceptions import SpawnError
from ..ids import MIN_REF, id_matches
from ..models.base import AgentInfo
from .nicknames import NicknamePool
from .node import AgentNode
from .status import Status

__all__ = ["AgentTree"]


class AgentTree:
    """The live (in-memory) agents of a runtime; ``nodes`` maps id -> node."""

    __slots__ = ("__weakref__", "nicknames", "nodes")  # weakly referable: see Authority (authority/guard.py)

    def __init__(self, nicknames: NicknamePool) -> None:
        self.nodes: dict[str, AgentNode] = {}
        self.nicknames = nicknames

    def find(self, ref: str) -> AgentNode | None:
        """An agent by id, nickname (a live one first) or a unique prefix or suffix of its id (>= 4 characters)."""
        n = self.nodes.get(ref)
        if n is not None:
            return n
        by_nick = [x for x in self.nodes.values() if x.nickname == ref]
        if by_nick:
            return max(by_nick, key=lambda x: x.nickname in self.nicknames)
        if len(ref) >= MIN_REF:
            hits = [x for k, x in self.nodes.items() if id_matches(k, ref)]
            if len(hits) == 1:
                return hits[0]
        return None

    def require(self, ref: str) -> AgentNode:
        node = self.find(ref)
        if node is None:
            raise SpawnError(f"no agent with id or nickname {ref!r}; list_agents shows the agents of this tree")
        return node

    def status(self, ref: str) -> Status:
        n = self.find(ref)
        return Status.NOT_FOUND if n is None else n.status

    def chain(self, agent_id: str) -> tuple[AgentInfo, ...]:
        """The ancestors of an agent, root first."""
        out: list[AgentInfo] = []
        node = self.nodes.get(agent_id)
        while node is not None and node.parent_id is not None:
            node = self.nodes.get(node.parent_id)
            if node is not None:
                out.append(node.info)
        return tuple(reversed(out))

    def subtree(self, node: AgentNode) -> list[AgentNode]:
        """``node`` and every descendant in memory (parents before their children)."""
        out, stack = [], [node]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(self.nodes[c] for c in n.children_ or () if c in self.nodes)
        return out

    def closing_from(self, agent_id: str | None) -> AgentNode | None:
        """The first of ``agent_id`` and its ancestors that is being closed (and still running), if any: a close
        cancels what ran when it began, so nothing is to start under it meanwhile."""
        node = self.nodes.get(agent_id) if agent_id else None
        while node is not None:
            if node.closing and not node.status.is_final():
                return node
            node = self.nodes.get(node.parent_id) if node.parent_id else None
        return None

    def slot_holders(self) -> list[AgentNode]:
        return [n for n in self.nodes.values() if n.holds_slot]

    def hold_clock(self, agent_id: str, hold: bool) -> None:
        """Stop (``hold``) or restart the clocks of an agent and its parents: time a person spends deciding an
        approval does not count against their timeouts."""
        node = self.nodes.get(agent_id)
        while node is not None:
            core = node.core_  # a finished agent that let its loop go has no clock running: not rebuilt for this
            if core is not None and hold:
                core.hold_clock()
            elif core is not None:
                core.release_clock()
            node = self.nodes.get(node.parent_id) if node.parent_id else None
