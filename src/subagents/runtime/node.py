"""``AgentNode``: the manager's handle on one agent (ids, status, task, waiters, queued follow-ups).

A finished child may let its loop go (:meth:`AgentNode.release`): its :class:`~.loop.AgentCore` — the
conversation, tool context, guard, budget, inbox — is dropped, and rebuilt by the node's ``reviver`` the
next time ``node.core`` is read (a resume reads the stored transcript).  A fan-out of many background
children then keeps a few small objects per finished child instead of ~30 the garbage collector walks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..definitions.model import AgentDefinition
from ..engines.base import RunHandle
from ..models.base import AgentInfo
from ..sandbox.worktree import Worktree
from ..store.base import AnnouncementRecord
from .limits import Limits
from .loop import AgentCore
from .result import RunResult
from .status import Status

__all__ = ["AgentNode", "Reviver"]


class Reviver(Protocol):
    """Rebuilds the loop of a node whose core was released (one per manager, shared by its nodes)."""

    def __call__(self, node: AgentNode) -> AgentCore: ...


@dataclass(slots=True, eq=False)
class AgentNode:
    """One agent of a run tree.  A node holds ids and handles, never its parent object."""

    info: AgentInfo
    definition: AgentDefinition
    core_: AgentCore | None  # ``core``: read it through the property (rebuilt when released)
    root_id: str
    label: str
    task_text: str
    background: bool
    limits: Limits
    model_name: str
    cleanup: str = "keep"
    status: Status = Status.PENDING_INIT
    task: RunHandle[RunResult] | None = None  # from the executor (an asyncio.Task with the local engine)
    result: RunResult | None = None
    children: list[str] = field(default_factory=list)
    children_complete: bool = True  # False for a node re-created from the store: finished children load on demand
    waiters: list[Callable[[AgentNode], None]] = field(default_factory=list)
    followups: list[AnnouncementRecord] = field(default_factory=list)
    holds_slot: bool = False
    closing: bool = False
    runs: int = 0
    mode: str = "default"  # the permission mode it runs in
    narrowed: list[str] = field(default_factory=list)  # what its authority lost against its definition
    worktree: Worktree | None = None  # its own git worktree (isolation: worktree)
    reviver: Reviver | None = None  # rebuilds ``core`` after :meth:`release`
    # what the reviver needs of a released core (kept by :meth:`release`): (model, system, system_prefix,
    # registry, workspace, sandbox) — shared objects and strings, nothing per agent
    dormant: tuple[Any, ...] | None = None

    # copies of ``info``'s (read on every step of the runtime: plain slots, not properties)
    id: str = field(init=False)
    nickname: str = field(init=False)
    depth: int = field(init=False)
    parent_id: str | None = field(init=False)

    def __post_init__(self) -> None:
        i = self.info
        self.id, self.nickname, self.depth, self.parent_id = i.id, i.nickname, i.depth, i.parent_id

    @property
    def core(self) -> AgentCore:
        """The agent's loop (rebuilt by the reviver if it was released)."""
        c = self.core_
        if c is None:
            assert self.reviver is not None, "a released node has a reviver"
            c = self.reviver(self)
        return c

    def release(self, reviver: Reviver, dormant: tuple[Any, ...]) -> None:
        """Drop the loop of this finished agent; ``reviver(self)`` rebuilds it from ``dormant`` and the store."""
        self.reviver, self.dormant, self.core_ = reviver, dormant, None

    def describe(self) -> str:
        return f"{self.nickname} ({self.info.agent_type}, depth {self.depth}, {self.status})"
