"""``Announcements``: how a background child's result reaches its parent (seed 003's announce flow).

When a background child ends, the manager records an announcement (with the child's final status,
atomically; its text is seed 003's trigger message, :func:`~.result.trigger_message`) and hands it here:

- the parent is running (or starting: resumed, its run not under way yet) and ``[announce] steer`` is on (the
  default) -> injected into its inbox, delivered at its next tool boundary ("steer");
- the parent is running and steering is off -> queued in its inbox as a follow-up: it waits for the
  end of the parent's turn and is then given as one more user turn ("followup");
- the parent is not running -> kept as a follow-up, delivered first when the parent is resumed;
- the parent was ending its run when it arrived (in a Stop hook, leaving its worktree): it stays in the inbox
  and is delivered first when the parent is resumed, like a follow-up (:meth:`Announcements.with_followups`).

The parent may answer a follow-up with ``NO_REPLY``; such a reply is silent (:attr:`.RunResult.silent`).

An announcement counts as delivered when the message that carries it is recorded (the
:class:`~.recorder.Recorder` acks it with that message), so a crash never loses or repeats one.
``wait`` may hand the parent the child's result directly: the announcement is then withdrawn.
"""

from __future__ import annotations

from typing import Any

from ..store.base import AnnouncementRecord
from .node import AgentNode
from .notices import fitted
from .recorder import Recorder
from .status import Status

__all__ = ["Announcements"]


class Announcements:
    """Hands background children's announcements to their parents (see the module docstring)."""

    __slots__ = ("nodes", "recorder", "settings")

    def __init__(self, nodes: dict[str, AgentNode], recorder: Recorder, settings: Any = None) -> None:
        self.nodes = nodes
        self.recorder = recorder
        self.settings = settings  # the manager's settings: ``announce_steer`` is read at each delivery

    @property
    def steer(self) -> bool:
        """``[announce] steer``: inject into a running parent at its next tool boundary (else a follow-up)."""
        return bool(getattr(self.settings, "announce_steer", True))

    def deliver(self, parent: AgentNode, ann: AnnouncementRecord) -> None:
        """Steer a running parent (next tool boundary), else queue as a follow-up turn (see the module docstring)."""
        steer = False
        # running, or starting: resumed (its status says so once its run is under way), its first message already
        # made: a follow-up would wait for the resume after this one
        starting = parent.status is Status.PENDING_INIT and parent.task is not None and parent.core_ is not None
        if parent.status is Status.RUNNING or starting:
            steer = self.steer
            if steer:
                parent.core.inbox.put(ann.text, key=f"ann:{ann.id}")
            else:
                parent.core.inbox.put(ann.text, key=f"ann:{ann.id}", steer=False)
        else:
            parent.followups.append(ann)
        self.recorder.emit(parent, "announcement", {"child_id": ann.child_id, "mode": "steer" if steer else "followup"})

    def withdraw(self, parent: AgentNode, child_id: str) -> None:
        """``wait`` handed the parent this child's result: its announcement is delivered by that."""
        child = self.nodes.get(child_id)
        if child is None:
            return
        ann_id = f"{child_id}:{child.runs}"
        queued = parent.followups_ or ()
        if parent.core.inbox.discard(f"ann:{ann_id}") or any(a.id == ann_id for a in queued):
            parent.followups_ = [a for a in queued if a.id != ann_id] or None
            self.recorder.ack(parent, ann_id)

    def with_followups(self, node: AgentNode, message: str) -> str:
        """``message`` preceded by the follow-ups queued for ``node`` (which count as delivered with it), then by
        what was left in its inbox: messages that reached it while it was ending its run (seed 003: an injection
        that did not reach the agent is a follow-up)."""
        queued = node.followups_ or ()
        if not queued and not node.core.inbox:
            return message
        texts = [a.text for a in queued]
        for a in queued:
            self.recorder.ack(node, a.id)
        node.followups_ = None
        texts.extend(node.core.inbox.drain(fit=False))  # acknowledged with the message that carries them, as at a
        texts = fitted(texts)  # boundary; many background results at once: one line each (.notices)
        return "\n\n".join([*texts, message] if message.strip() else texts)
