"""A finished child lets its loop go: what the manager keeps of it, and how the loop comes back.

A fan-out of 10,000 background children keeps every child's node, result and record (``status``,
``result``, ``list_agents`` and ``resume`` read them).  Its :class:`~.loop.AgentCore` — conversation,
tool context, guard, budget, inbox and two sinks, ~20 objects the garbage collector walks on every
full collection — is needed again only if the child is resumed.  :func:`release_if_idle` drops it once
the result is recorded and delivered; :class:`CoreReviver` rebuilds it on the next read of
``node.core``, from the node, the manager's parts and the stored transcript.

A core is released only when nothing in it would be lost: no structured output expected, no message
waiting in its inbox, no tool state or todo list of its own, no worktree, no teams in the runtime (a
team member's context and guard carry its role), and it is a child (a root's loop stays).
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

from ..authority.guard import Authority
from ..store.base import Store
from .events import EventBus
from .limits import Budget
from .loop import AgentCore
from .node import AgentNode
from .recorder import Recorder
from .shared import ManagerParts, tool_context

__all__ = ["CoreReviver", "release_if_idle"]


class DormantParts(ManagerParts, Protocol):
    """What this module reads of the :class:`~subagents.runtime.manager.AgentManager` (structurally: the
    manager imports this module)."""

    store: Store
    bus: EventBus
    nodes: dict[str, AgentNode]
    recorder: Recorder
    authority: Authority | None
    teams: Any
    reviver: CoreReviver | None


class CoreReviver:
    """Rebuilds released cores for one manager (held weakly: nodes never keep their manager alive)."""

    __slots__ = ("_mgr",)

    def __init__(self, mgr: DormantParts) -> None:
        self._mgr = weakref.ref(mgr)

    def __call__(self, node: AgentNode) -> AgentCore:
        mgr = self._mgr()
        if mgr is None or node.dormant is None:
            raise RuntimeError(f"agent {node.nickname} ({node.id}) belongs to a closed runtime; "
                               "open a new Runtime on the same store to resume it")
        model, system, prefix, registry, workspace, sandbox = node.dormant
        info = node.info
        ctx = tool_context(mgr, info, None, node.root_id, workspace=workspace, sandbox=sandbox, mode=node.mode)
        mgr.store.flush()  # the transcript is read back: everything handed to the store must be in it
        core = AgentCore(info=info, model=model, system=system, registry=registry, ctx=ctx, limits=node.limits,
                         bus=mgr.bus, messages=mgr.store.transcript(node.id), prices=mgr.cfg.prices)
        core.system_prefix = prefix
        if mgr.authority is not None:
            core.guard = mgr.authority.guard(info, node.mode, node.root_id, ctx)
        parent = mgr.nodes.get(node.parent_id) if node.parent_id else None
        held = parent.core_ if parent is not None else None  # (a released parent is not revived for this)
        core.budget = Budget(node.limits, parent=held.budget if held is not None else None)
        node.core_, node.reviver, node.dormant = core, None, None
        core.on_message = mgr.recorder.message_sink(node)
        core.inbox.on_deliver = mgr.recorder.delivered_sink(node)
        return core


def release_if_idle(mgr: DormantParts, node: AgentNode) -> None:
    """Drop the loop of ``node`` (finished, recorded, delivered) when it can be rebuilt as it was."""
    core = node.core_
    if (core is None or node.parent_id is None or mgr.teams is not None or node.worktree is not None
            or core.output is not None or core.inbox or core.ctx.state or core.ctx.todos):
        return
    reviver = mgr.reviver
    if reviver is None:
        reviver = mgr.reviver = CoreReviver(mgr)
    ws = core.ctx.workspace
    node.release(reviver, (core.model, core.system, core.system_prefix, core.registry, ws, core.ctx.sandbox))
