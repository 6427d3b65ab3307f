"""Steering runs recorded in a store from outside their process (``subagents runs cancel`` / ``resume``).

A run whose owner is alive is steered through the store: a request that the owner's sweeper carries
out within a few seconds.  A run whose owner is gone (see :func:`~.recovery.is_orphaned`) has no one
to ask: :func:`cancel_stored` ends it and its unfinished descendants in the store directly, and a
resume is done by the caller taking the tree over (:meth:`subagents.Runtime.resume`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..store.base import RunRecord, Store
from .recovery import is_orphaned
from .status import Outcome, Status

__all__ = ["CancelOutcome", "cancel_stored", "request_resume"]

CANCELLED_OFFLINE = "cancelled with 'subagents runs cancel' while no process ran it"


@dataclass(slots=True)
class CancelOutcome:
    requested: bool
    """``True``: the owner is alive and was asked; ``False``: the store was updated directly."""
    cancelled: list[str] = field(default_factory=list)
    """The runs ended directly (the run and its unfinished descendants), when nobody owned them."""


def cancel_stored(store: Store, rec: RunRecord, now: float | None = None) -> CancelOutcome:
    """Cancel the unfinished run ``rec`` and its descendants: through its live owner, else in the store."""
    now = time.time() if now is None else now
    if not is_orphaned(store, rec, now):
        store.add_request(rec.run_id, "cancel", "", now)
        return CancelOutcome(requested=True)
    victims = [r for r in store.list_runs(include_archived=True, root_id=rec.root_id or rec.run_id)
               if not r.is_final and _under(store, r, rec.run_id)]
    for r in victims:
        store.finish_run(r.run_id, {"status": str(Status.SHUTDOWN), "outcome": str(Outcome.CANCELLED),
                                    "ended_at": now, "error": CANCELLED_OFFLINE}, None)
    return CancelOutcome(requested=False, cancelled=[r.run_id for r in victims])


def request_resume(store: Store, rec: RunRecord, message: str, now: float | None = None) -> bool:
    """Ask ``rec``'s live owner to resume it with ``message``; ``False`` (nothing asked) if its owner is gone."""
    now = time.time() if now is None else now
    if is_orphaned(store, rec, now):
        return False
    store.add_request(rec.run_id, "resume", message, now)
    return True


def _under(store: Store, r: RunRecord, top: str) -> bool:
    cur: RunRecord | None = r
    while cur is not None:
        if cur.run_id == top:
            return True
        cur = store.get_run(cur.parent_id) if cur.parent_id else None
    return False
