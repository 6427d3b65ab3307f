"""The ``Store`` protocol: where run records, transcripts and announcements live.

All methods are synchronous and cheap to call: an implementation may queue writes and commit
them in groups (the SQLite store does), but it must apply them in call order, and
:meth:`Store.flush` returns only when everything queued before it is durable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

from ..exceptions import StoreError
from ..messages import Message
from ._lease import Lease

__all__ = ["FINAL_STATUSES", "AnnouncementRecord", "AuditRecord", "Lease", "Request", "RunRecord", "Store",
           "check_run_fields", "run_spend", "stamp_archive_at", "sweep_key"]

#: Statuses after which a run does not change on its own (``Status.is_final`` in the runtime).
FINAL_STATUSES = frozenset({"completed", "errored", "shutdown"})


@dataclass(slots=True)
class RunRecord:
    """One agent run (one record per agent; ``resume`` reopens the same record)."""

    run_id: str
    agent_id: str
    nickname: str
    agent_type: str
    task: str
    child_session_key: str = ""
    requester_session_key: str | None = None
    parent_id: str | None = None
    root_id: str | None = None
    depth: int = 0
    label: str = ""
    model: str = ""
    cleanup: str = "keep"
    background: bool = False
    status: str = "pending_init"
    outcome: str | None = None
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    archive_at: float | None = None
    archived: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    turns: int = 0
    tool_calls: int = 0
    truncated: bool = False
    limit: str | None = None
    result_text: str | None = None
    error: str | None = None
    system_prompt: str = ""
    limits: dict[str, Any] = field(default_factory=dict)
    runs: int = 0          # how many times the agent was started (announcement ids are "<run_id>:<runs>")
    owner: str = ""        # "<host>:<pid>:<token>" of the store instance (runtime) that drives it
    permission_mode: str = ""  # the permission mode it runs in ("" in stores written before v3)
    worktree: dict[str, Any] = field(default_factory=dict)  # its git worktree (isolation: worktree), if any
    trace: dict[str, str] = field(default_factory=dict)  # W3C trace context ({"traceparent": ...}) of its spans' parent

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_RUN_FIELDS = frozenset(f.name for f in fields(RunRecord)) - {"run_id"}


def check_run_fields(values: dict[str, Any]) -> None:
    """Refuse an update that names a field a run record does not have (or its ``run_id``)."""
    if _RUN_FIELDS.issuperset(values):  # (the usual case: one set operation)
        return
    for k in values:
        if k not in _RUN_FIELDS:
            raise StoreError(f"unknown run record field {k!r}; the fields are those of RunRecord")


def run_spend(usage: Mapping[str, Any], cost: Any) -> tuple[int, float]:
    """The tokens (input + output) and cost one run spent, as :meth:`Store.tree_spend` counts them: tokens ``0``
    unless both counts (a missing one is ``0``) are non-negative integers, cost ``0`` unless a finite non-negative
    number — what a store holds is never trusted to hand a tree budget back (a negative count) or to be a number."""
    i, o = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    tokens = i + o if type(i) is int and type(o) is int and i >= 0 and o >= 0 else 0
    ok = type(cost) in (int, float) and 0 <= cost < math.inf  # (NaN compares false)
    return tokens, float(cost) if ok else 0.0


def sweep_key(rec: RunRecord) -> tuple[float, str]:
    """Where a final run stands in the sweeper's order (``Store.cleanup_candidates`` with a ``limit``):
    ``archive_at`` for a kept run that has one, else when it ended (``0`` if unknown); then its id."""
    if rec.cleanup != "delete" and rec.archive_at is not None:
        return rec.archive_at, rec.run_id
    return rec.ended_at or 0.0, rec.run_id


def stamp_archive_at(fields: dict[str, Any], archive_after_s: float | None, now: float) -> dict[str, Any]:
    """``fields`` of a final status write, with ``archive_at`` (end + ``archive_after_s``) added when the
    store knows the policy (``archive_after_s`` not ``None``) and the write does not set it itself."""
    if archive_after_s is None or "archive_at" in fields or fields.get("status") not in FINAL_STATUSES:
        return fields
    return {**fields, "archive_at": (fields.get("ended_at") or now) + archive_after_s}


@dataclass(slots=True)
class AnnouncementRecord:
    """A background child's result waiting to reach its parent (the durable outbox)."""

    id: str                # idempotency key: "<child run id>:<n>"
    parent_id: str
    child_id: str
    text: str
    created_at: float
    delivered_at: float | None = None


@dataclass(slots=True)
class Request:
    """A request from another process (``subagents runs cancel|resume``) to the run's owning runtime."""

    id: int
    run_id: str
    kind: str              # "cancel" | "resume"
    message: str
    created_at: float
    done_at: float | None = None


@dataclass(slots=True)
class AuditRecord:
    """Who allowed what: an approval decision, a call denied by a rule, a hook that blocked or failed."""

    run_id: str
    at: float
    kind: str              # "approval" | "denied" | "hook_blocked" | "hook_error"
    data: dict[str, Any]


@runtime_checkable
class Store(Protocol):
    url: str
    owner: str  # this process's owner id, stamped on the runs it creates or adopts
    writes_at_once: bool  # every write is done when made: :meth:`on_commit` never calls back (no need to ask it)
    #: The ``keep`` policy's delay in seconds, when known (the sweeper sets it): :meth:`finish_run` then stamps
    #: ``archive_at = ended_at + archive_after_s`` on the final write, so the sweeper need not write it later.
    archive_after_s: float | None

    def create_run(self, rec: RunRecord) -> None:
        """Record a new run; the store takes ``rec`` over (the caller must not change it afterwards)."""
        ...

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None: ...

    def append_messages(self, run_id: str, start_seq: int, messages: Sequence[Message],
                        delivered: Sequence[str] = (), at: float = 0.0) -> None:
        """Store ``messages`` as transcript entries ``start_seq, start_seq+1, ...`` of ``run_id``.

        ``delivered`` names announcements these messages hand to the agent: they are marked
        delivered (at ``at``) in the same transaction, so a crash can never leave an announcement
        marked delivered that the agent's transcript does not hold.
        """
        ...

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        """Final status and (atomically with it) the announcement for the parent, if any (and ``archive_at``,
        see :attr:`archive_after_s`)."""
        ...

    def mark_delivered(self, announcement_id: str, at: float) -> None: ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def list_runs(self, *, include_archived: bool = False, status: str | None = None,
                  root_id: str | None = None) -> list[RunRecord]: ...

    def child_ids(self, parent_id: str) -> list[str]:
        """The ids of ``parent_id``'s children, oldest first (archived ones included)."""
        ...

    def tree_spend(self, root_id: str, since: float) -> tuple[int, float]:
        """What the tree of ``root_id`` spent: its tokens (input + output) and cost in USD, summed over the root run
        and every run of its tree (archived ones included) that started at or after ``since`` (one never started:
        at ``0``) — what a restored root's budget is charged with (:func:`~subagents.runtime.limits.charge_tree`).

        Reads only those columns, never whole records.  A count that is not a non-negative integer makes that run's
        tokens ``0``, a cost that is not a finite non-negative number its cost (:func:`run_spend`); a row the
        record reads refuse (a usage that is not a JSON object of numbers, a time or cost of the wrong type) is the
        same :class:`~subagents.exceptions.StoreError` as from :meth:`list_runs`."""
        ...

    def root_nicknames(self, agent_type: str) -> set[str]:
        """The nicknames of every root run (no parent) of ``agent_type``, archived ones included — one
        indexed read of one column, where ``list_runs`` would build every record."""
        ...

    def transcript(self, run_id: str, start: int = 0) -> list[Message]:
        """The transcript of ``run_id`` from entry ``start`` on (``seq >= start``); ``[]`` for an unknown run."""
        ...

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]: ...

    def announcements_of(self, child_id: str | None = None, parent_id: str | None = None
                         ) -> list[AnnouncementRecord]:
        """Every announcement (delivered or not) of a child and/or to a parent, oldest first."""
        ...

    def delete_run(self, run_id: str) -> None:
        """Remove the record, its transcript, its audit entries and its delivered announcements."""
        ...

    def add_audit(self, run_id: str, kind: str, data: dict[str, Any], at: float) -> None:
        """Record a permission decision or hook event of ``run_id`` (``data``: JSON-serializable)."""
        ...

    def audit_of(self, run_id: str) -> list[AuditRecord]:
        """The audit entries of a run, oldest first."""
        ...

    def cleanup_candidates(self, now: float, limit: int | None = None,
                           after: tuple[float, str] | None = None) -> list[RunRecord]:
        """Final, unarchived runs the sweeper must look at: ``cleanup="delete"``, no ``archive_at`` yet,
        or ``archive_at`` reached (committed state), oldest first.

        With ``limit``: at most ``limit`` of them, in sweep order (:func:`sweep_key`), the first ones
        whose key is past ``after`` (the key of the last run of the previous batch; ``None``: from the
        start) and not past ``now`` — one bounded, indexed step of a sweep.  (A run that ended "in the
        future", by another machine's clock, waits until then.)"""
        ...

    def renew_lease(self, owner: str, at: float, expires_at: float, process: str = "") -> None:
        """Record that ``owner`` is alive at ``at`` and holds its runs until ``expires_at`` (its owner lease;
        ``process``: its :func:`~subagents.store._lease.process_identity`).  A store renews its own lease."""
        ...

    def release_lease(self, owner: str) -> None:
        """Drop ``owner``'s lease: its unfinished runs are orphaned at once (a store releases its own on close)."""
        ...

    def lease(self, owner: str) -> Lease | None:
        """``owner``'s lease as committed (``None``: it holds none); expired leases included."""
        ...

    def claim_runs(self, expected: Mapping[str, str]) -> set[str]:
        """Atomically take over the runs of ``expected`` (run id -> the owner they must still have):
        those still owned so become this store's (with its lease, in the same transaction); returns
        their ids.  Two processes claiming one orphan: exactly one gets it."""
        ...

    async def room(self) -> None:
        """Back-pressure: return once the store can take more writes (at once when it is not behind)."""
        ...

    def add_request(self, run_id: str, kind: str, message: str, at: float) -> None: ...

    def take_requests(self, owner: str, at: float) -> list[Request]:
        """Open requests for runs owned by ``owner``, marked done (each is handed out once)."""
        ...

    def on_commit(self, callback: Callable[[], None]) -> bool:
        """Call ``callback`` (from any thread) once everything written so far is committed.

        Returns ``False`` without calling it when everything is already durable (nothing to wait for).
        """
        ...

    def hurry(self) -> None:
        """Hand what is being gathered to the writer now instead of after the batching delay."""
        ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
