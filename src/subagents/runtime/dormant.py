"""An agent's loop exists only while it can run: built as it starts, let go once a child has finished.

A fan-out of 10,000 background children keeps every child's node, result and record (``status``,
``result``, ``list_agents`` and ``resume`` read them).  Its :class:`~.loop.AgentCore` — conversation,
guard, budget, inbox and two sinks, ~15 objects the garbage collector walks on every full collection —
is needed only while the agent runs.  :func:`unborn` gives a new node a :class:`~.node.Recipe` instead of
a core; :class:`CoreReviver` builds the core on the first read of ``node.core`` (as the agent starts;
a queued agent holds no core while it waits).  :func:`release_if_idle` drops a finished agent's core
once its result is recorded and delivered; a resume builds it again from the stored transcript.

A core is released only when nothing in it would be lost: no structured output expected, no message
waiting in its inbox, no tool state or todo list of its own, no worktree, no teams in the runtime (a
team member's context and guard carry its role).  A root keeps its :class:`~.limits.Budget` (its
tree's totals); a child's revived budget starts again under its parent's.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from ..authority.guard import Authority
from ..messages import Message
from ..models.base import Model
from ..store.base import Store
from ..tools.base import ToolRegistry
from .events import EventBus
from .limits import Budget
from .loop import AgentCore
from .node import AgentNode, Recipe
from .recorder import Recorder
from .shared import ManagerParts, todo_store, tool_context
from .status import Status

__all__ = ["CoreReviver", "DormantParts", "budget_above", "release_if_idle", "unborn"]


class DormantParts(ManagerParts, Protocol):
    """What this module reads of the :class:`~subagents.runtime.manager.AgentManager` (structurally: the
    manager imports this module)."""

    store: Store
    bus: EventBus
    nodes: dict[str, AgentNode]
    recorder: Recorder
    authority: Authority | None
    teams: Any
    reviver: CoreReviver


class CoreReviver:
    """Builds the cores of one manager's nodes (held weakly: nodes never keep their manager alive)."""

    __slots__ = ("_mgr", "last")

    def __init__(self, mgr: DormantParts) -> None:
        self._mgr = weakref.ref(mgr)
        self.last: Recipe | None = None  # the last released core's recipe: siblings share an equal one

    def __call__(self, node: AgentNode) -> AgentCore:
        mgr = self._mgr()
        r = node.dormant
        if mgr is None or r is None:
            raise RuntimeError(f"agent {node.nickname} ({node.id}) belongs to a closed runtime; "
                               "open a new Runtime on the same store to resume it")
        info = node.info
        if r.born is not None:  # a new agent, starting: its clock starts now (not at its spawn: time spent queued
            ctx = tool_context(mgr, info, None, node.root_id, workspace=r.workspace, sandbox=r.sandbox,
                               mode=node.mode, team_name=r.team_name)
            messages = list(r.history) if r.history else None
            budget = Budget(node.limits, parent=r.budget_parent)  # for a slot is not its own; its parent's counts)
        else:  # a finished child's, released: the conversation comes back from the store
            ctx = tool_context(mgr, info, None, node.root_id, workspace=r.workspace, sandbox=r.sandbox,
                               mode=node.mode)
            mgr.store.flush()  # everything handed to the store must be in what is read back
            messages = mgr.store.transcript(node.id)
            parent = mgr.nodes.get(node.parent_id) if node.parent_id else None  # (a released one is not rebuilt)
            # what is spawned under it spends from the tree's budget, as a resume of it would
            budget = r.budget if r.budget is not None else Budget(node.limits, parent=budget_above(mgr.nodes, node,
                                                                                                   parent))
        core = AgentCore(info=info, model=r.model, system=r.system, registry=r.registry, ctx=ctx, limits=node.limits,
                         bus=mgr.bus, messages=messages, prices=mgr.cfg.prices)
        core.system_prefix = r.prefix
        core.budget = budget
        if mgr.authority is not None:
            core.guard = mgr.authority.guard(info, node.mode, node.root_id, ctx)
        node.core_, node.reviver, node.dormant = core, None, None
        core.on_message = mgr.recorder.message_sink(node)
        core.inbox.on_deliver = mgr.recorder.delivered_sink(node)
        return core


def unborn(mgr: DormantParts, node: AgentNode, model: Model, system: str, prefix: int, registry: ToolRegistry,
           parent: AgentNode | None, *, workspace: Any, sandbox: Any, history: list[Message] | None) -> AgentNode:
    """``node`` (new, without a core) with the recipe of its core, built when ``node.core`` is first read.

    It is registered in its tree's todo store now (a parent's ``todo_read`` lists it while it waits); its todo list
    and tool context are made as it starts, with the team it inherits from ``parent`` now."""
    todo_store(mgr, node.root_id).register(node.info)
    team = parent.core.ctx.team_name if parent is not None else None
    node.release(mgr.reviver, Recipe(model, system, prefix, registry, workspace=workspace, sandbox=sandbox,
                                     team_name=team, budget_parent=parent.core.budget if parent is not None else None,
                                     history=history, born=time.monotonic()))
    return node


def release_if_idle(mgr: DormantParts, node: AgentNode) -> None:
    """Drop the loop of ``node`` (finished, recorded, delivered) when it can be rebuilt as it was."""
    core = node.core_
    if (core is None or mgr.teams is not None or node.worktree is not None
            or core.output is not None or core.inbox or core.ctx.state or core.ctx.todos):
        return
    ctx, reviver = core.ctx, mgr.reviver
    store = mgr.todos.get(node.root_id)
    if store is not None:  # its list is empty (checked above): a resumed agent opens a new one
        store.close_empty(node.id)
    if node.parent_id is None:  # a root keeps its budget (what its tree spent stays readable; a resume goes on)
        node.release(reviver, Recipe(core.model, core.system, core.system_prefix, core.registry,
                                     workspace=ctx.workspace, sandbox=ctx.sandbox, budget=core.budget))
        return
    r = reviver.last
    if (r is None or r.model is not core.model or r.system is not core.system or r.registry is not core.registry
            or r.workspace is not ctx.workspace or r.sandbox is not ctx.sandbox or r.prefix != core.system_prefix):
        r = reviver.last = Recipe(core.model, core.system, core.system_prefix, core.registry,
                                  workspace=ctx.workspace, sandbox=ctx.sandbox)
    node.release(reviver, r)


def budget_above(nodes: Mapping[str, AgentNode], node: AgentNode, parent: AgentNode | None) -> Budget | None:
    """What the budget of ``node`` (resumed, or rebuilt to spawn under) is carved from: its parent's while the parent
    runs (or is being resumed: its new run's), else the one its tree's root keeps after it ended
    (:func:`release_if_idle`), so a whole tree never spends more than its root's limit, however often its agents are
    resumed or spawned under (``None`` for a root)."""
    if parent is None:
        return None
    if parent.status is Status.RUNNING or (parent.core_ is not None and not parent.status.is_final()):
        return parent.core.budget
    root = nodes.get(node.root_id)
    if root is None or root is node:
        return None
    if root.core_ is not None:
        return root.core_.budget
    return root.dormant.budget if root.dormant is not None else None
