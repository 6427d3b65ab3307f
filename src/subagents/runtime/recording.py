"""What the manager writes and tells: run records, transcripts, status changes and events.

:class:`Recording` is the part of :class:`~subagents.runtime.manager.AgentManager` that talks to the
store and the event bus.  Its one rule: a change is handed to the store *before* the event that
announces it, and with a store that commits in the background the event waits behind a gate
until the commit (:meth:`Recording._commit_point`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..messages import Message
from ..store.base import RunRecord, Store
from .events import Event, EventBus
from .isolation import worktree_record
from .limits import Limits
from .node import AgentNode
from .result import RunResult
from .status import Status

__all__ = ["Recording", "limits_dict", "stats"]


class Recording:
    """Store and event plumbing of the manager (a base class; the manager provides the attributes)."""

    store: Store
    bus: EventBus
    nodes: dict[str, AgentNode]
    _acks: dict[str, list[str]]

    def _record(self, node: AgentNode) -> None:
        i = node.info
        parent = self.nodes.get(i.parent_id) if i.parent_id else None
        self.store.create_run(RunRecord(
            run_id=i.id, agent_id=i.id, nickname=i.nickname, agent_type=i.agent_type, task=node.task_text,
            child_session_key=f"agent:{i.agent_type}:subagent:{i.id}",
            requester_session_key=(f"agent:{parent.info.agent_type}:subagent:{parent.id}" if parent else None),
            parent_id=i.parent_id, root_id=node.root_id, depth=i.depth, label=node.label, model=node.model_name,
            cleanup=node.cleanup, background=node.background, created_at=time.time(),
            system_prompt=node.core.system, limits=limits_dict(node.limits), permission_mode=node.mode,
            worktree=worktree_record(node.worktree),
        ))

    def _message_sink(self, node: AgentNode) -> Callable[[Message], None]:
        store, msgs, run_id, acks = self.store, node.core.messages, node.id, self._acks

        def sink(m: Message) -> None:
            delivered = acks.pop(run_id, None)
            if delivered is None:
                store.append_messages(run_id, len(msgs) - 1, [m])
            else:  # the announcements this message hands over are marked delivered with it, atomically
                store.append_messages(run_id, len(msgs) - 1, [m], delivered, time.time())

        return sink

    def _delivered_sink(self, node: AgentNode) -> Callable[[list[str]], None]:
        acks, run_id = self._acks, node.id  # not the node: no reference cycle node -> inbox -> sink -> node

        def delivered(keys: list[str]) -> None:
            for k in keys:
                if k.startswith("ann:"):
                    acks.setdefault(run_id, []).append(k[4:])

        return delivered

    def _ack(self, node: AgentNode, ann_id: str) -> None:
        """``ann_id`` reached ``node``: mark it delivered together with the next message ``node`` records."""
        self._acks.setdefault(node.id, []).append(ann_id)

    def _commit_point(self) -> None:
        """Hold later events until what the store was given so far is committed (only when someone listens)."""
        if self.bus.active:
            gate = self.bus.gate()
            if not self.store.on_commit(gate.open_threadsafe):
                self.bus.open(gate)

    def _set_status(self, node: AgentNode, status: Status, **fields: Any) -> None:
        node.status = status
        self.store.update_run(node.id, {"status": str(status), **fields})
        self._commit_point()
        self._emit(node, "subagent_status_changed", status=str(status))

    @staticmethod
    def _final_fields(r: RunResult) -> dict[str, Any]:
        return {"status": str(r.status), "outcome": str(r.outcome), "ended_at": time.time(),
                "usage": r.usage.to_dict(), "cost_usd": r.cost_usd, "turns": r.turns, "tool_calls": r.tool_calls,
                "truncated": r.truncated, "limit": r.limit, "result_text": r.text, "error": r.error}

    def _emit(self, node: AgentNode, kind: str, **data: Any) -> None:
        if self.bus.active:
            i = node.info
            self.bus.publish(Event(kind, i.id, i.parent_id, i.depth, data, nickname=i.nickname))


def limits_dict(lim: Limits) -> dict[str, Any]:
    return {"max_turns": lim.max_turns, "max_tokens": lim.max_tokens, "timeout_s": lim.timeout_s,
            "max_cost_usd": lim.max_cost_usd}


def stats(r: RunResult) -> dict[str, Any]:
    """The stats of a finished run, as ``subagent_completed`` events carry them."""
    return {"status": str(r.status), "outcome": str(r.outcome), "turns": r.turns, "tool_calls": r.tool_calls,
            "duration_s": r.duration_s, "usage": r.usage.to_dict(), "cost_usd": r.cost_usd,
            "truncated": r.truncated, "limit": r.limit}
