"""In-memory store (tests, and runs that need no durability)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..messages import Message
from .base import AnnouncementRecord, RunRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """A :class:`~subagents.store.base.Store` kept in dicts; nothing survives the process."""

    def __init__(self) -> None:
        self.url = "memory://"
        self.runs: dict[str, RunRecord] = {}
        self.transcripts: dict[str, list[Message]] = {}
        self.announcements: dict[str, AnnouncementRecord] = {}

    def create_run(self, rec: RunRecord) -> None:
        self.runs[rec.run_id] = rec
        self.transcripts.setdefault(rec.run_id, [])

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        rec = self.runs.get(run_id)
        if rec is not None:
            for k, v in fields.items():
                setattr(rec, k, v)

    def append_messages(self, run_id: str, start_seq: int, messages: list[Message]) -> None:
        t = self.transcripts.setdefault(run_id, [])
        del t[start_seq:]
        t.extend(messages)

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        self.update_run(run_id, fields)
        if announcement is not None:
            self.announcements.setdefault(announcement.id, announcement)

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

    def transcript(self, run_id: str) -> list[Message]:
        return list(self.transcripts.get(run_id, []))

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]:
        return sorted((a for a in self.announcements.values()
                       if a.delivered_at is None and (parent_id is None or a.parent_id == parent_id)),
                      key=lambda a: a.created_at)

    def delete_run(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        self.transcripts.pop(run_id, None)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None
