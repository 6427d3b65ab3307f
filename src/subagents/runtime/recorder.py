"""``Recorder``: what the runtime writes and tells — run records, transcripts, status changes, events.

The manager holds one :class:`Recorder`; it is the only part of the runtime that writes run state
to the store and publishes lifecycle events.  Its one rule: a change is handed to the store
*before* the event that announces it, and with a store that commits in the background the event
waits behind a gate until the commit (:meth:`Recorder.commit_point`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ..messages import Message
from ..store.base import AnnouncementRecord, RunRecord, Store
from .events import CURRENT_CALL, Event, EventBus, Gate
from .isolation import worktree_record
from .limits import Limits
from .node import AgentNode
from .result import RunResult
from .status import Status
from .structured import OutputSpec, attach, stored

__all__ = ["Recorder", "final_fields", "limits_dict", "stats"]

_RUNNING, _PENDING = str(Status.RUNNING), str(Status.PENDING_INIT)


class Recorder:
    """Writes agents' runs to the store and publishes their events (see the module docstring)."""

    __slots__ = ("_acks", "_at_once", "_gate", "_gate_batch", "bus", "nodes", "store")

    def __init__(self, store: Store, bus: EventBus, nodes: dict[str, AgentNode]) -> None:
        self.store = store
        self.bus = bus
        self.nodes = nodes
        self._acks: dict[str, list[str]] = {}  # agent id -> announcements it received, not yet recorded
        self._gate: Gate | None = None  # the last gate queued, and the store's batch its callback went with
        self._gate_batch: int | None = None
        self._at_once = store.writes_at_once  # no commit to wait for: no gates

    def created(self, node: AgentNode, *, started: bool = False) -> None:
        """Record a new run (status ``pending_init``), then announce it (``subagent_spawned``).

        ``started``: it is handed to the executor at once, so it is recorded as started (``running``, its first
        run counted) in this one write rather than in a second one as its first step runs; that step then only
        tells it (:meth:`started`).  A crash in between finds an open run either way (recovery treats both
        statuses alike)."""
        i = node.info
        parent = self.nodes.get(i.parent_id) if i.parent_id else None
        now = time.time()
        self.store.create_run(RunRecord(
            run_id=i.id, agent_id=i.id, nickname=i.nickname, agent_type=i.agent_type, task=node.task_text,
            child_session_key=f"agent:{i.agent_type}:subagent:{i.id}",
            requester_session_key=(f"agent:{parent.info.agent_type}:subagent:{parent.id}" if parent else None),
            parent_id=i.parent_id, root_id=node.root_id, depth=i.depth, label=node.label, model=node.model_name,
            cleanup=node.cleanup, background=node.background, created_at=now,
            system_prompt=node.system_prompt, limits=limits_dict(node.limits), permission_mode=node.mode,
            worktree=worktree_record(node.worktree),
            status=_RUNNING if started else _PENDING, started_at=now if started else None,
            runs=node.runs + 1 if started else node.runs,
        ))
        if self.bus.active:  # (the event's fields are built only when someone listens)
            self.commit_point()
            self.emit(node, "subagent_spawned", {"agent_type": i.agent_type, "label": node.label,
                                                 "background": node.background, "model": node.model_name,
                                                 "call_id": CURRENT_CALL.get()})

    def message_sink(self, node: AgentNode) -> Callable[[Message], None]:
        """What ``node``'s loop calls with each message it appends: the message goes to the store."""
        return _MessageSink(self.store, node.core.messages, node.id, self._acks)

    def delivered_sink(self, node: AgentNode) -> Callable[[list[str]], None]:
        """What ``node``'s inbox calls with the keys it delivered: announcements are acknowledged."""
        return _DeliveredSink(self._acks, node.id)  # not the node: no cycle node -> inbox -> sink -> node

    def ack(self, node: AgentNode, ann_id: str) -> None:
        """``ann_id`` reached ``node``: mark it delivered together with the next message ``node`` records."""
        self._acks.setdefault(node.id, []).append(ann_id)

    def owes_acks(self, agent_id: str) -> bool:
        """Whether announcements that reached ``agent_id`` still wait to be recorded as delivered."""
        return agent_id in self._acks

    def commit_point(self) -> None:
        """Hold later events until what the store was given so far is committed (only when someone listens).

        The gate is queued only if the store will call it on commit: with a store that writes at once (the memory
        store) a commit point costs nothing.  With a store that gathers writes into batches committed whole
        (:attr:`SQLiteStore.gathering <subagents.store.sqlite.SQLiteStore.gathering>`), the gate queued last still
        covers this point while its batch is the one being gathered: it opens only once that batch — holding what
        was just written — is committed, and every event after it waits behind it anyway.  So a batch gets one
        gate, not one per status change.
        """
        if self.bus.active and not self._at_once:
            loop = asyncio.get_running_loop()
            batch: int | None = getattr(self.store, "gathering", None)
            g = self._gate
            if g is not None and batch is not None and batch == self._gate_batch and not g.is_open and g.loop is loop:
                return
            gate = Gate(self.bus, loop)
            if self.store.on_commit(gate):  # (its callback joins batch ``batch``, read before: a hand-off it
                self.bus.hold(gate)         # causes makes the next point's batch differ)
                self._gate, self._gate_batch = gate, batch

    def set_status(self, node: AgentNode, status: Status, **fields: Any) -> None:
        node.status = status
        fields["status"] = str(status)
        self.store.update_run(node.id, fields)
        if self.bus.active:
            self.commit_point()
            self.emit(node, "subagent_status_changed", {"status": str(status)})

    def started(self, node: AgentNode) -> None:
        """``node``'s first step runs, its record already saying so (:meth:`created` with ``started``): it is
        ``running`` now, and told as :meth:`set_status` tells it."""
        node.status = Status.RUNNING
        if self.bus.active:
            self.commit_point()
            self.emit(node, "subagent_status_changed", {"status": _RUNNING})

    def update(self, node: AgentNode, fields: dict[str, Any]) -> None:
        """Record other fields of a run (no event)."""
        self.store.update_run(node.id, fields)

    def attach_output(self, node: AgentNode, spec: OutputSpec | None) -> None:
        """Make ``node`` end with a valid ``final_result`` (:func:`.structured.attach`) and keep the schema in its
        record (``limits``), so a run resumed from the store is held to it too (:func:`.structured.restore`)."""
        if spec is not None:
            attach(node.core, spec)
            self.update(node, {"limits": limits_dict(node.limits) | stored(node.core)})

    def finished(self, node: AgentNode, result: RunResult, ann: AnnouncementRecord | None) -> None:
        """Record the end of a run (and the announcement for its parent, atomically), then announce it.

        The events follow even when the store fails (its :class:`StoreError` propagates after them).
        """
        try:
            self.store.finish_run(node.id, final_fields(result), ann)
        finally:
            if self.bus.active:  # (the events' fields are built only when someone listens)
                self.commit_point()
                self.emit(node, "subagent_status_changed", {"status": str(result.status)})
                self.emit(node, "subagent_completed", stats(result))

    def emit(self, node: AgentNode, kind: str, data: dict[str, Any]) -> None:
        """Publish ``kind`` for ``node`` with ``data`` (a fresh dict the event keeps) when someone listens."""
        if self.bus.active:
            i = node.info
            self.bus.publish(Event(kind, i.id, i.parent_id, i.depth, data, time.time(), i.nickname))


class _MessageSink:
    # one small object per agent (a closure would be a function, a tuple and four cells, all kept while
    # the agent is)
    __slots__ = ("acks", "msgs", "run_id", "store")

    def __init__(self, store: Store, msgs: list[Message], run_id: str, acks: dict[str, list[str]]) -> None:
        self.store, self.msgs, self.run_id, self.acks = store, msgs, run_id, acks

    def __call__(self, m: Message) -> None:
        delivered = self.acks.pop(self.run_id, None) if self.acks else None
        if delivered is None:
            self.store.append_messages(self.run_id, len(self.msgs) - 1, (m,))
        else:  # the announcements this message hands over are marked delivered with it, atomically
            self.store.append_messages(self.run_id, len(self.msgs) - 1, (m,), delivered, time.time())


class _DeliveredSink:
    __slots__ = ("acks", "run_id")

    def __init__(self, acks: dict[str, list[str]], run_id: str) -> None:
        self.acks, self.run_id = acks, run_id

    def __call__(self, keys: list[str]) -> None:
        for k in keys:
            if k.startswith("ann:"):
                self.acks.setdefault(self.run_id, []).append(k[4:])


def final_fields(r: RunResult) -> dict[str, Any]:
    """The run-record fields a finished run sets."""
    return {"status": str(r.status), "outcome": str(r.outcome), "ended_at": time.time(),
            "usage": r.usage.to_dict(), "cost_usd": r.cost_usd, "turns": r.turns, "tool_calls": r.tool_calls,
            "truncated": r.truncated, "limit": r.limit, "result_text": r.text, "error": r.error}


def limits_dict(lim: Limits) -> dict[str, Any]:
    return {"max_turns": lim.max_turns, "max_tokens": lim.max_tokens, "timeout_s": lim.timeout_s,
            "max_cost_usd": lim.max_cost_usd}


def stats(r: RunResult) -> dict[str, Any]:
    """The stats of a finished run, as ``subagent_completed`` events carry them."""
    return {"status": str(r.status), "outcome": str(r.outcome), "turns": r.turns, "tool_calls": r.tool_calls,
            "duration_s": r.duration_s, "usage": r.usage.to_dict(), "cost_usd": r.cost_usd,
            "truncated": r.truncated, "limit": r.limit}
