"""Steering this runtime's own agents after they started: a message to a running one (``send_input``), more
work for a finished one (``resume``).  (Runs owned by another process or by nobody: :mod:`.steering`.)  The
manager's :meth:`~subagents.runtime.manager.AgentManager.send_input` and
:meth:`~subagents.runtime.manager.AgentManager.resume` are these functions on its parts.

A resume runs the same checks as a spawn, in the same order: the agent must have finished (a running one is steered
with ``send_input``), a slot must be free under ``max_threads`` / ``max_depth`` (:class:`.SlotPool`), and its
limits are carved again from what its parent has left (its new run's, when it is being resumed too) — or, once the
parent ended, from what the budget its tree's root keeps has left (a tree whose budget is used up cannot resume its
agents) — and a cost limit needs a priced model, as for a spawn. Announcements of its own children that it never saw
are handed to it with the message (:meth:`.Announcements.with_followups`); its loop is rebuilt from the stored
transcript if it was let go (:mod:`.dormant`).
"""

from __future__ import annotations

from typing import Protocol

from ..exceptions import LimitExceeded, SpawnError
from ..markup import quote_text
from .delivery import Announcements
from .dormant import budget_above
from .factory import ManagerSettings, check_priced
from .limits import Budget, Limits
from .nicknames import NicknamePool
from .node import AgentNode
from .slots import SlotPool
from .status import Status
from .tree import AgentTree

__all__ = ["ResumeParts", "resume", "send_input"]


class ResumeParts(Protocol):
    """What this module reads of the :class:`~subagents.runtime.manager.AgentManager` (named structurally: the
    manager imports this module)."""

    tree: AgentTree
    nodes: dict[str, AgentNode]
    slots: SlotPool
    nicknames: NicknamePool
    announcements: Announcements
    cfg: ManagerSettings
    closed: bool

    def start(self, node: AgentNode, prompt: str | None) -> None: ...


def send_input(mgr: ResumeParts, ref: str, message: str, sender: str = "user") -> AgentNode:
    """Queue ``message`` for the running agent ``ref``: it reads it before its next model call."""
    node = mgr.tree.require(ref)
    if not message.strip():
        raise SpawnError("the message is empty; say what the agent should do")
    if node.status.is_final():
        raise SpawnError(f"agent {node.nickname} ({node.id}) has already finished (status {node.status}); "
                         "use resume_agent(agent_id, message) to give it more work")
    node.core.inbox.put(f"<message from {sender}>\n{quote_text(message)}\n</message>")  # (no fake frame in it)
    return node


def resume(mgr: ResumeParts, ref: str, message: str, limits: Limits | None = None) -> AgentNode:
    """Start the finished agent ``ref`` again on its own conversation, with ``message`` as the new user turn;
    ``limits`` override its own (then carved from its parent's budget)."""
    node = mgr.tree.require(ref)
    if mgr.closed:
        raise SpawnError("the runtime is closing: no agent is resumed; open a new Runtime on the same store for more "
                         "work")
    if not message.strip() and not node.followups_:  # the queued announcements can be the whole turn
        raise SpawnError("the message is empty; say what the resumed agent should do")
    if not node.status.is_final():
        raise SpawnError(f"agent {node.nickname} ({node.id}) is still {node.status}; "
                         "use send_input to give it more instructions, or wait for it")
    if (up := mgr.tree.closing_from(node.parent_id)) is not None:  # a close under way cancels what ran as it began
        raise SpawnError(f"{up.nickname}, the parent of {node.nickname} or its ancestor, is being closed: "
                         f"{node.nickname} is not resumed under it; wait for the close to end, then resume it")
    parent = mgr.nodes.get(node.parent_id) if node.parent_id else None
    with mgr.slots.reserve(node.depth, parent, resuming=True) as reservation:
        wanted = node.limits if limits is None else node.limits.merged(limits)
        budget_from = budget_above(mgr.nodes, node, parent)
        try:
            carved = budget_from.carve(wanted) if budget_from is not None else wanted
        except LimitExceeded as e:
            raise SpawnError(f"cannot resume: the budget it shares with its parent and their tree is used up ({e}); "
                             "resume the tree's root instead (each run of a root gets its limits anew)") from None
        # a cost limit (given now, or carved from the tree's) on a model with no known price could not be counted
        check_priced(node.core_.model if node.core_ is not None else node.dormant.model if node.dormant is not None
                     else node.core.model, carved, mgr.cfg.prices)
        node.limits = carved
        node.core.limits = carved
        node.core.budget = Budget(carved, parent=budget_from)
        node.holds_slot = reservation.held
        node.closing = False
        reservation.commit()
    mgr.nicknames.hold(node.nickname)
    prompt = mgr.announcements.with_followups(node, message)
    if not node.core.messages:  # closed or interrupted before it ever started: its task comes first (as recovery
        prompt = f"{node.task_text}\n\n{prompt}"  # starts such a run: with the task from its record)
    node.result = None
    node.status = Status.PENDING_INIT
    mgr.start(node, prompt)
    return node
