"""``AgentNode``: the manager's handle on one agent (ids, status, task, waiters, queued follow-ups).

A node's :class:`~.loop.AgentCore` — conversation, guard, budget, inbox — is built when it is first read
(``node.core``: as the agent starts), from the node's :class:`Recipe`: a burst of spawns, or a queue of
agents waiting for a slot, holds a few small objects per agent.  A finished child may let its loop go
again (:meth:`AgentNode.release`), to be rebuilt the same way if it is resumed (from the stored
transcript).  The garbage collector walks every live object on each full collection: a fan-out of many
background children then keeps ~10 objects per child instead of ~30 (see runtime/dormant.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..definitions.model import AgentDefinition
from ..engines.base import RunHandle
from ..messages import Message
from ..models.base import AgentInfo, Model
from ..sandbox.worktree import Worktree
from ..store.base import AnnouncementRecord
from ..tools.base import ToolRegistry
from .limits import Budget, Limits
from .loop import AgentCore
from .result import RunResult
from .status import Status

__all__ = ["AgentNode", "Recipe", "Reviver"]


class Recipe:
    """What building an agent's core takes besides the node: shared objects and strings, nothing big.

    ``born`` (a ``time.monotonic()``: its spawn) is set for a new agent, whose budget's clock starts as its core is
    built (its first step: time queued for a slot counts against its parent's limits, not its own);
    ``team_name`` is the team it inherited from its parent at spawn, ``history`` its first messages; its tool
    context is made as it starts (its todo list was opened at spawn).  A released core's recipe has ``born``
    ``None``: its conversation comes back from the store, its context is made anew (siblings share an equal
    one); a released root's keeps its ``budget`` (the tree's totals).  Never changed once made."""

    __slots__ = ("born", "budget", "budget_parent", "history", "model", "prefix", "registry", "sandbox", "system",
                 "team_name", "workspace")

    def __init__(self, model: Model, system: str, prefix: int, registry: ToolRegistry, *, workspace: Any = None,
                 sandbox: Any = None, team_name: str | None = None, budget_parent: Budget | None = None,
                 history: list[Message] | None = None, born: float | None = None, budget: Budget | None = None
                 ) -> None:
        self.model, self.system, self.prefix, self.registry = model, system, prefix, registry
        self.budget = budget
        self.workspace, self.sandbox, self.team_name = workspace, sandbox, team_name
        self.budget_parent, self.history, self.born = budget_parent, history, born


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
    children_: list[str] | None = None  # ``children``: made on first use (most agents never spawn)
    children_complete: bool = True  # False for a node re-created from the store: finished children load on demand
    waiters: list[Callable[[AgentNode], None]] | None = None  # called when it ends (a list once there is one)
    followups_: list[AnnouncementRecord] | None = None  # ``followups``: made on first use
    holds_slot: bool = False
    closing: bool = False
    runs: int = 0
    mode: str = "default"  # the permission mode it runs in
    narrowed: tuple[str, ...] = ()  # what its authority lost against its definition
    worktree: Worktree | None = None  # its own git worktree (isolation: worktree)
    reviver: Reviver | None = None  # rebuilds ``core`` after :meth:`release`
    dormant: Recipe | None = None  # how the reviver builds ``core`` while it is ``None``

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

    @property
    def children(self) -> list[str]:
        """The ids of the agents it spawned, oldest first (the list is made on first read)."""
        c = self.children_
        if c is None:
            c = self.children_ = []
        return c

    @property
    def followups(self) -> list[AnnouncementRecord]:
        """Announcements queued for its next turn (it was not running when they came; made on first read)."""
        f = self.followups_
        if f is None:
            f = self.followups_ = []
        return f

    @followups.setter
    def followups(self, value: list[AnnouncementRecord]) -> None:
        self.followups_ = value

    def add_waiter(self, fn: Callable[[AgentNode], None]) -> None:
        """Call ``fn(self)`` when this agent ends (see :func:`.waiting.wait_all`)."""
        if self.waiters is None:
            self.waiters = [fn]
        else:
            self.waiters.append(fn)

    def remove_waiter(self, fn: Callable[[AgentNode], None]) -> None:
        if self.waiters is not None and fn in self.waiters:
            self.waiters.remove(fn)

    @property
    def system_prompt(self) -> str:
        """Its system prompt (without building its core)."""
        if self.core_ is not None or self.dormant is None:
            return self.core.system
        return self.dormant.system

    def release(self, reviver: Reviver, recipe: Recipe) -> None:
        """Drop the loop of this agent; ``reviver(self)`` builds it again from ``recipe`` when it is read."""
        self.reviver, self.dormant, self.core_ = reviver, recipe, None

    def describe(self) -> str:
        return f"{self.nickname} ({self.info.agent_type}, depth {self.depth}, {self.status})"
