"""In-memory store (tests, and runs that need no durability)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..messages import Message
from ._lease import Lease, new_owner_id
from .base import AnnouncementRecord, AuditRecord, Request, RunRecord, check_run_fields

__all__ = ["MemoryStore", "new_owner_id"]


class MemoryStore:
    """A :class:`~subagents.store.base.Store` kept in dicts; nothing survives the process."""

    def __init__(self) -> None:
        self.url = "memory://"
        self.runs: dict[str, RunRecord] = {}
        self.transcripts: dict[str, list[Message]] = {}
        self.announcements: dict[str, AnnouncementRecord] = {}
        self.owner = new_owner_id()
        self.leases: dict[str, Lease] = {}
        self.requests: list[Request] = []
        self.audit: dict[str, list[AuditRecord]] = {}

    def create_run(self, rec: RunRecord) -> None:
        if not rec.owner:
            rec.owner = self.owner
        self.runs[rec.run_id] = rec
        self.transcripts.setdefault(rec.run_id, [])

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        check_run_fields(fields)
        rec = self.runs.get(run_id)
        if rec is not None:
            for k, v in fields.items():
                setattr(rec, k, v)

    def append_messages(self, run_id: str, start_seq: int, messages: Sequence[Message],
                        delivered: Sequence[str] = (), at: float = 0.0) -> None:
        t = self.transcripts.setdefault(run_id, [])
        del t[start_seq:]
        t.extend(messages)
        for ann_id in delivered:
            self.mark_delivered(ann_id, at)

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        self.update_run(run_id, fields)
        if announcement is not None:
            self.announcements.setdefault(announcement.id, dataclasses.replace(announcement))

    def mark_delivered(self, announcement_id: str, at: float) -> None:
        a = self.announcements.get(announcement_id)
        if a is not None and a.delivered_at is None:
            a.delivered_at = at

    def get_run(self, run_id: str) -> RunRecord | None:
        rec = self.runs.get(run_id)
        return None if rec is None else dataclasses.replace(rec)

    def list_runs(self, *, include_archived: bool = False, status: str | None = None,
                  root_id: str | None = None) -> list[RunRecord]:
        out = [dataclasses.replace(r) for r in self.runs.values()
               if (include_archived or not r.archived) and (status is None or r.status == status)
               and (root_id is None or r.root_id == root_id or r.run_id == root_id)]
        out.sort(key=lambda r: r.created_at)
        return out

    def child_ids(self, parent_id: str) -> list[str]:
        kids = sorted((r for r in self.runs.values() if r.parent_id == parent_id), key=lambda r: r.created_at)
        return [r.run_id for r in kids]

    def transcript(self, run_id: str) -> list[Message]:
        return list(self.transcripts.get(run_id, []))

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]:
        return sorted((dataclasses.replace(a) for a in self.announcements.values()
                       if a.delivered_at is None and (parent_id is None or a.parent_id == parent_id)),
                      key=lambda a: a.created_at)

    def announcements_of(self, child_id: str | None = None, parent_id: str | None = None
                         ) -> list[AnnouncementRecord]:
        return sorted((dataclasses.replace(a) for a in self.announcements.values()
                       if (child_id is None or a.child_id == child_id)
                       and (parent_id is None or a.parent_id == parent_id)), key=lambda a: a.created_at)

    def delete_run(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        self.transcripts.pop(run_id, None)
        self.audit.pop(run_id, None)
        for k in [k for k, a in self.announcements.items() if a.child_id == run_id and a.delivered_at is not None]:
            del self.announcements[k]

    def cleanup_candidates(self, now: float) -> list[RunRecord]:
        return [r for r in self.list_runs() if r.is_final
                and (r.cleanup == "delete" or r.archive_at is None or r.archive_at <= now)]

    def renew_lease(self, owner: str, at: float, expires_at: float, process: str = "") -> None:
        self.leases[owner] = Lease(owner, at, expires_at, process)

    def claim_runs(self, expected: Mapping[str, str]) -> set[str]:
        got = {rid for rid, old in expected.items() if (r := self.runs.get(rid)) is not None and r.owner == old}
        for rid in got:
            self.runs[rid].owner = self.owner
        return got

    def release_lease(self, owner: str) -> None:
        self.leases.pop(owner, None)

    def lease(self, owner: str) -> Lease | None:
        return self.leases.get(owner)

    async def room(self) -> None:
        return None  # nothing to wait for: every write is done when the call returns

    def add_request(self, run_id: str, kind: str, message: str, at: float) -> None:
        self.requests.append(Request(len(self.requests) + 1, run_id, kind, message, at))

    def take_requests(self, owner: str, at: float) -> list[Request]:
        out = []
        for r in self.requests:
            rec = self.runs.get(r.run_id)
            if r.done_at is None and rec is not None and rec.owner == owner:
                r.done_at = at
                out.append(dataclasses.replace(r))
        return out

    def add_audit(self, run_id: str, kind: str, data: dict[str, Any], at: float) -> None:
        self.audit.setdefault(run_id, []).append(AuditRecord(run_id, at, kind, dict(data)))

    def audit_of(self, run_id: str) -> list[AuditRecord]:
        return list(self.audit.get(run_id, ()))

    def on_commit(self, callback: Callable[[], None]) -> bool:
        return False

    def hurry(self) -> None:
        """Nothing waits: every write is done when made."""

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None
