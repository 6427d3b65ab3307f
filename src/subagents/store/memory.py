"""In-memory store (tests, and runs that need no durability).

It gives memory back: the dicts that hold runs, transcripts, announcements and audit entries are
rebuilt once deletions leave them under a quarter of their peak (a CPython dict never shrinks on its
own), so a long-lived runtime whose sweeper deletes runs returns to its baseline footprint.  The
sweeper's candidates are kept in a sorted list of sweep keys (:func:`~subagents.store.base.sweep_key`),
so a bounded sweep step reads only what is due.

It keeps few objects per finished run, as the garbage collector walks every live one on each full
collection: a finished run's record is kept as a tuple of its fields (plain values: the collector stops
tracking it) and its (small) transcript packed into tuples of plain values — both unpacked when read or resumed
(readers get copies, as from the durable stores) — and a child's announcement ids are a tuple of strings.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ._lease import Lease, new_owner_id
from ._sweep import SweepOrder
from .base import (
    FINAL_STATUSES,
    AnnouncementRecord,
    AuditRecord,
    Request,
    RunRecord,
    check_run_fields,
    run_spend,
    stamp_archive_at,
    sweep_key,
)

__all__ = ["MemoryStore", "new_owner_id"]

Packed = tuple[Any, ...]
"""A packed transcript: one flat tuple — per message its role and its number of blocks, then per block ``"t",
text``, ``"u", id, name, n`` and the arguments' ``n`` keys and values (key, value, ...), or ``"r", tool_use_id,
content, is_error``.  Plain values in one tuple: the garbage collector stops tracking it at its first look
(nested tuples take a look per level)."""
_Ann = tuple[str, str, str, str, float, float | None]  # an AnnouncementRecord's fields, in order (untracked)

_SHRINK_FLOOR = 64  # dicts under this many entries at their peak are never rebuilt
_SWEEP_FIELDS = frozenset({"status", "archive_at", "archived", "cleanup", "ended_at"})
_FIELDS = operator.attrgetter(*(f.name for f in dataclasses.fields(RunRecord)))  # a record -> its fields' tuple
# the dict fields (usage, limits, ...) are kept flat after the fields (_flat): the collector keeps tracking a
# tuple that holds a dict (even an untracked one) or, until its next look, a tuple it still tracks
_NAMES = frozenset(f.name for f in dataclasses.fields(RunRecord)) - {"run_id"}  # what an update may set
_DICTS = tuple(i for i, f in enumerate(dataclasses.fields(RunRecord)) if f.default_factory is dict)
_POS = {f.name: i for i, f in enumerate(dataclasses.fields(RunRecord))}  # field name -> its place in the tuple
_NF = len(_POS)  # a final run's tuple: its fields, then its dict fields' items (see _flat)
_ARCHIVED, _CLEANUP, _ARCHIVE_AT, _ENDED_AT = _POS["archived"], _POS["cleanup"], _POS["archive_at"], _POS["ended_at"]
_ROOT_ID, _STARTED_AT, _USAGE, _COST = _POS["root_id"], _POS["started_at"], _POS["usage"], _POS["cost_usd"]
_USAGE_TAIL = tuple(i for i in _DICTS if i < _USAGE)  # the dict fields whose items come before usage's (_flat)
_PACK_MAX = 64  # a finished transcript of up to this many messages and blocks is packed (see _pack)
_SHRUNK = ("runs", "transcripts", "announcements", "audit", "_anns_of")


class MemoryStore:
    """A :class:`~subagents.store.base.Store` kept in dicts; nothing survives the process."""

    writes_at_once = True

    def __init__(self) -> None:
        self.url = "memory://"
        self.runs: dict[str, RunRecord | tuple[Any, ...]] = {}  # a final run's: its fields (see _rec)
        self.transcripts: dict[str, list[Message] | Packed] = {}  # a finished run's: packed
        # announcements as tuples of their fields (plain values: the collector does not track them)
        self.announcements: dict[str, _Ann] = {}
        self._anns_of: dict[str, tuple[str, ...]] = {}  # child id -> ids of its announcements
        self.owner = new_owner_id(tagged=False)  # (a memory store's runs never outlive the process: no key needed)
        self.leases: dict[str, Lease] = {}
        self.requests: list[Request] = []
        self.audit: dict[str, list[AuditRecord]] = {}
        self.archive_after_s: float | None = None
        self._sweep = SweepOrder()  # the candidates (final, unarchived runs) in sweep order
        self._peak: dict[str, int] = dict.fromkeys(_SHRUNK, 0)

    def create_run(self, rec: RunRecord) -> None:
        if not rec.owner:
            rec.owner = self.owner
        self.runs[rec.run_id] = rec
        self._index(rec)

    def update_run(self, run_id: str, fields: dict[str, Any]) -> None:
        if not _NAMES.issuperset(fields):  # (one set operation; the check names the bad field)
            check_run_fields(fields)
        rec = self._rec(run_id)
        if rec is not None:
            for k, v in fields.items():
                setattr(rec, k, v)
            self._put(rec)
            if not _SWEEP_FIELDS.isdisjoint(fields):
                self._index(rec)

    def _rec(self, run_id: str) -> RunRecord | None:
        """The record of ``run_id`` (a new object for a final run's: change it, then :meth:`_put` it back)."""
        r = self.runs.get(run_id)
        return _unpack_rec(r) if isinstance(r, tuple) else r

    def _put(self, rec: RunRecord) -> None:
        self.runs[rec.run_id] = _pack_rec(rec) if rec.status in FINAL_STATUSES else rec

    def _all(self) -> list[RunRecord]:
        """Every record, as objects (the final runs' are new)."""
        return [_unpack_rec(r) if isinstance(r, tuple) else r for r in self.runs.values()]

    def _index(self, rec: RunRecord) -> None:
        """Keep ``rec`` in the sweep order if it is a candidate (final, unarchived) under its current key."""
        self._sweep.set(rec.run_id, None if rec.status not in FINAL_STATUSES or rec.archived else sweep_key(rec))

    def append_messages(self, run_id: str, start_seq: int, messages: Sequence[Message],
                        delivered: Sequence[str] = (), at: float = 0.0) -> None:
        t = self.transcripts.get(run_id)
        if t is None:
            t = self.transcripts[run_id] = []
        elif type(t) is tuple:  # a finished run's, packed: it goes on (resumed)
            t = self.transcripts[run_id] = _unpack(t)
        assert type(t) is list
        del t[start_seq:]
        t.extend(messages)
        for ann_id in delivered:
            self.mark_delivered(ann_id, at)

    def finish_run(self, run_id: str, fields: dict[str, Any], announcement: AnnouncementRecord | None) -> None:
        fields = stamp_archive_at(fields, self.archive_after_s, time.time())
        rec = self.runs.get(run_id)
        if type(rec) is RunRecord and fields.get("status") in FINAL_STATUSES and _NAMES.issuperset(fields):
            # a live run ends: its fields go straight into the tuple it is kept as (no update, then pack)
            values = list(_FIELDS(rec))
            for k, v in fields.items():
                values[_POS[k]] = v
            self._sweep.set(run_id, None if values[_ARCHIVED] else _sweep_key(values))
            self.runs[run_id] = _flat(values)
        else:
            self.update_run(run_id, fields)
        t = self.transcripts.get(run_id)
        if type(t) is list:  # packed: tuples of strings instead of a list, its messages and their blocks
            if not t:
                del self.transcripts[run_id]
            elif len(t) <= _PACK_MAX and sum(len(m.content) for m in t) <= _PACK_MAX:  # (a big one stays: one
                self.transcripts[run_id] = _pack(t)  # object per block is little beside its size)
        if announcement is not None and announcement.id not in self.announcements:
            a = announcement
            self.announcements[a.id] = (a.id, a.parent_id, a.child_id, a.text, a.created_at, a.delivered_at)
            self._anns_of[a.child_id] = (*self._anns_of.get(a.child_id, ()), a.id)

    def mark_delivered(self, announcement_id: str, at: float) -> None:
        a = self.announcements.get(announcement_id)
        if a is not None and a[5] is None:
            self.announcements[announcement_id] = (*a[:5], at)

    def get_run(self, run_id: str) -> RunRecord | None:
        rec = self.runs.get(run_id)
        return None if rec is None else _copy(rec)

    def list_runs(self, *, include_archived: bool = False, status: str | None = None,
                  root_id: str | None = None) -> list[RunRecord]:
        out = [dataclasses.replace(r) for r in self._all()
               if (include_archived or not r.archived) and (status is None or r.status == status)
               and (root_id is None or r.root_id == root_id or r.run_id == root_id)]
        out.sort(key=lambda r: r.created_at)
        return out

    def child_ids(self, parent_id: str) -> list[str]:
        kids = sorted((r for r in self._all() if r.parent_id == parent_id), key=lambda r: r.created_at)
        return [r.run_id for r in kids]

    def tree_spend(self, root_id: str, since: float) -> tuple[int, float]:
        tokens, cost = 0, 0.0
        for r in self.runs.values():
            if isinstance(r, tuple):  # a final run's fields: read in place, no record built (see _flat)
                if r[0] != root_id and (r[_ROOT_ID] != root_id or not (r[_STARTED_AT] or 0.0) >= since):
                    continue
                at = _NF + 2 * sum(r[i] for i in _USAGE_TAIL) if _USAGE_TAIL else _NF  # (usage: the first dict)
                end = at + 2 * r[_USAGE]
                t, c = run_spend(dict(zip(r[at:end:2], r[at + 1:end:2], strict=True)), r[_COST])
            elif r.run_id == root_id or (r.root_id == root_id and (r.started_at or 0.0) >= since):
                t, c = run_spend(r.usage, r.cost_usd)
            else:
                continue
            tokens, cost = tokens + t, cost + c
        return tokens, cost

    def root_nicknames(self, agent_type: str) -> set[str]:
        return {r.nickname for r in self._all() if r.parent_id is None and r.agent_type == agent_type}

    def transcript(self, run_id: str, start: int = 0) -> list[Message]:
        t = self.transcripts.get(run_id)
        if t is None:
            return []
        return _unpack(t)[start:] if isinstance(t, tuple) else list(t[start:])

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]:
        return sorted((AnnouncementRecord(*a) for a in self.announcements.values()
                       if a[5] is None and (parent_id is None or a[1] == parent_id)),
                      key=lambda a: a.created_at)

    def announcements_of(self, child_id: str | None = None, parent_id: str | None = None
                         ) -> list[AnnouncementRecord]:
        anns = self.announcements
        some = anns.values() if child_id is None else [anns[k] for k in self._anns_of.get(child_id, ())]
        return sorted((AnnouncementRecord(*a) for a in some
                       if (child_id is None or a[2] == child_id)
                       and (parent_id is None or a[1] == parent_id)), key=lambda a: a.created_at)

    def delete_run(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        self.transcripts.pop(run_id, None)
        self.audit.pop(run_id, None)
        ids = self._anns_of.pop(run_id, ())
        kept = tuple(k for k in ids if self.announcements[k][5] is None)
        for k in ids:
            if self.announcements[k][5] is not None:
                del self.announcements[k]
        if kept:
            self._anns_of[run_id] = kept
        self._sweep.set(run_id, None)
        self._shrink()

    def _shrink(self) -> None:
        """Rebuild the dicts that deletions left under a quarter of their peak: their memory goes back."""
        peak = self._peak
        for name in _SHRUNK:
            d: dict[str, Any] = getattr(self, name)
            n = len(d)
            if n > peak[name]:
                peak[name] = n
            elif peak[name] >= _SHRINK_FLOOR and n < peak[name] // 4:
                setattr(self, name, {k: v for k, v in d.items()})  # built from empty: sized for what is left
                peak[name] = n

    def cleanup_candidates(self, now: float, limit: int | None = None,
                           after: tuple[float, str] | None = None) -> list[RunRecord]:
        if limit is None:
            due = [r for rid in self._sweep.ids() if (r := _copy(self.runs[rid])).cleanup == "delete"
                   or r.archive_at is None or r.archive_at <= now]
            return sorted(due, key=lambda r: r.created_at)
        return [_copy(self.runs[rid]) for rid in self._sweep.page(now, limit, after)]

    def renew_lease(self, owner: str, at: float, expires_at: float, process: str = "") -> None:
        self.leases[owner] = Lease(owner, at, expires_at, process)

    def claim_runs(self, expected: Mapping[str, str]) -> set[str]:
        got = {rid for rid, old in expected.items() if (r := self._rec(rid)) is not None and r.owner == old}
        for rid in got:
            rec = self._rec(rid)
            assert rec is not None
            rec.owner = self.owner
            self._put(rec)
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
            rec = self._rec(r.run_id)
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


def _copy(r: RunRecord | tuple[Any, ...]) -> RunRecord:
    """A new record object with the fields of ``r`` (a record, or a final run's tuple of fields)."""
    return _unpack_rec(r) if isinstance(r, tuple) else dataclasses.replace(r)


def _sweep_key(values: list[Any]) -> tuple[float, str]:
    """:func:`~subagents.store.base.sweep_key` of a record given as its fields' values, in order."""
    if values[_CLEANUP] != "delete" and values[_ARCHIVE_AT] is not None:
        return values[_ARCHIVE_AT], values[0]
    return values[_ENDED_AT] or 0.0, values[0]


def _pack_rec(rec: RunRecord) -> tuple[Any, ...]:
    return _flat(list(_FIELDS(rec)))


def _flat(values: list[Any]) -> tuple[Any, ...]:
    """A record's field values (changed in place) as one flat tuple: in a dict field's place its size, its items
    after the last field (key, value, key, value...).  Plain values in one tuple: the collector stops tracking it
    at its first look; with a tuple of items in it, it took two more looks (gen-1 collections, which walked it
    and its ~40 fields every time: the memory store's finished runs were ~40% of what a gen-1 collection walked)."""
    tail: list[Any] = []
    for i in _DICTS:
        d = values[i]
        values[i] = len(d)
        for kv in d.items():
            tail += kv
    return (*values, *tail)


def _unpack_rec(packed: tuple[Any, ...]) -> RunRecord:
    values = list(packed[:_NF])
    at = _NF
    for i in _DICTS:
        end = at + 2 * values[i]
        values[i] = dict(zip(packed[at:end:2], packed[at + 1:end:2], strict=True))
        at = end
    return RunRecord(*values)



def _pack(messages: list[Message]) -> Packed:
    out: list[Any] = []
    for m in messages:
        out += (m.role, len(m.content))
        for b in m.content:
            if type(b) is TextBlock:
                out += ("t", b.text)
            elif type(b) is ToolUseBlock:
                out += ("u", b.id, b.name, len(b.arguments))
                for kv in b.arguments.items():
                    out += kv
            else:
                assert type(b) is ToolResultBlock
                out += ("r", b.tool_use_id, b.content, b.is_error)
    return tuple(out)


def _unpack(packed: Packed) -> list[Message]:
    """New message objects (a tool call's arguments copied: a reader may change what it gets)."""
    out: list[Message] = []
    i, end = 0, len(packed)
    while i < end:
        role, n = packed[i], packed[i + 1]
        i += 2
        blocks: list[Block] = []
        for _ in range(n):
            kind = packed[i]
            if kind == "t":
                blocks.append(TextBlock(packed[i + 1]))
                i += 2
            elif kind == "u":
                stop = i + 4 + 2 * packed[i + 3]
                blocks.append(ToolUseBlock(packed[i + 1], packed[i + 2],
                                           dict(zip(packed[i + 4:stop:2], packed[i + 5:stop:2], strict=True))))
                i = stop
            else:
                blocks.append(ToolResultBlock(packed[i + 1], packed[i + 2], packed[i + 3]))
                i += 4
        out.append(Message(role, blocks))
    return out
