"""The reads the two SQL stores share: the same queries, in each one's placeholder and insertion order.

:class:`~subagents.store.sqlite.SQLiteStore` and :class:`~subagents.store.postgres.PostgresStore` keep the
same tables (``_schema.py``, ``_pg_schema.py``); their reads differ in the parameter placeholder (``?`` or
``%s``) and in the column that orders rows made at the same instant (SQLite's ``rowid``, PostgreSQL's
identity column ``ord``).  :class:`SqlReads` writes each query once with ``{p}`` and ``{ord}`` filled in per
store, on top of the store's own ``_read(sql, params)`` (its connection, its errors, its closed check).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..messages import Message, message_from_dict
from ._batch import ANN_COLS, COLS_SQL, record_from_row
from ._lease import Lease
from ._schema import FINAL_SQL
from .base import FINAL_STATUSES, AnnouncementRecord, AuditRecord, RunRecord

__all__ = ["SqlReads"]


class SqlReads:
    """Store reads as SQL (a mixin: the store gives ``_read`` and the two dialect strings)."""

    _P: str = "?"
    """The parameter placeholder of the store's driver."""
    _ORD: str = "rowid"
    """The column that keeps insertion order among rows made at the same instant."""

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(f"SELECT {COLS_SQL} FROM runs WHERE run_id = {self._P}", (run_id,))
        return record_from_row(rows[0]) if rows else None

    def list_runs(self, *, include_archived: bool = False, status: str | None = None,
                  root_id: str | None = None) -> list[RunRecord]:
        p = self._P
        where, params = [], []
        if not include_archived:
            where.append("archived = 0")
        if status is not None:  # an open status: also the condition of the partial index runs_open
            where.append(f"status = {p}" if status in FINAL_STATUSES else f"status = {p} AND NOT {FINAL_SQL}")
            params.append(status)
        if root_id is not None:
            where.append(f"(root_id = {p} OR run_id = {p})")
            params += [root_id, root_id]
        cond = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._read(f"SELECT {COLS_SQL} FROM runs{cond} ORDER BY created_at, {self._ORD}", params)
        return [record_from_row(r) for r in rows]

    def child_ids(self, parent_id: str) -> list[str]:
        rows = self._read(f"SELECT run_id FROM runs WHERE parent_id = {self._P} ORDER BY created_at, {self._ORD}",
                          (parent_id,))
        return [r[0] for r in rows]

    def root_nicknames(self, agent_type: str) -> set[str]:
        rows = self._read(f"SELECT nickname FROM runs WHERE parent_id IS NULL AND agent_type = {self._P}",
                          (agent_type,))
        return {r[0] for r in rows}

    def transcript(self, run_id: str, start: int = 0) -> list[Message]:
        p = self._P
        rows = self._read(f"SELECT message FROM transcript WHERE run_id = {p} AND seq >= {p} ORDER BY seq",
                          (run_id, start))
        return [message_from_dict(json.loads(r[0])) for r in rows]

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]:
        cond, params = (f" AND parent_id = {self._P}", (parent_id,)) if parent_id is not None else ("", ())
        rows = self._read(f"SELECT {ANN_COLS} FROM announcements WHERE delivered_at IS NULL{cond} "
                          f"ORDER BY created_at, {self._ORD}", params)
        return [AnnouncementRecord(*r) for r in rows]

    def announcements_of(self, child_id: str | None = None, parent_id: str | None = None
                         ) -> list[AnnouncementRecord]:
        given = [(col, v) for col, v in (("child_id", child_id), ("parent_id", parent_id)) if v is not None]
        cond = f" WHERE {' AND '.join(f'{col} = {self._P}' for col, _ in given)}" if given else ""
        rows = self._read(f"SELECT {ANN_COLS} FROM announcements{cond} ORDER BY created_at, {self._ORD}",
                          [v for _, v in given])
        return [AnnouncementRecord(*r) for r in rows]

    def audit_of(self, run_id: str) -> list[AuditRecord]:
        rows = self._read(f"SELECT run_id, at, kind, data FROM audit WHERE run_id = {self._P} ORDER BY id", (run_id,))
        return [AuditRecord(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    def cleanup_candidates(self, now: float, limit: int | None = None,
                           after: tuple[float, str] | None = None) -> list[RunRecord]:
        if limit is None:
            rows = self._read(f"SELECT {COLS_SQL} FROM runs WHERE archived = 0 AND {FINAL_SQL} AND (cleanup = 'delete' "
                              f"OR archive_at IS NULL OR archive_at <= {self._P}) ORDER BY created_at, {self._ORD}",
                              (now,))
        else:  # one step of a sweep: the next `limit` runs due, in the order of the runs_sweep index
            lo, last = after if after is not None else (float("-inf"), "")
            rows = self._sweep_step(lo, last, now, limit)
        return [record_from_row(r) for r in rows]

    def _sweep_step(self, lo: float, last: str, now: float, limit: int) -> list[Any]:
        """The rows of the next ``limit`` runs due by ``now`` after ``(lo, last)`` in the sweep order."""
        raise NotImplementedError

    def lease(self, owner: str) -> Lease | None:
        rows = self._read(f"SELECT owner, heartbeat, expires, process FROM owners WHERE owner = {self._P}", (owner,))
        return Lease(rows[0][0], float(rows[0][1]), float(rows[0][2]), rows[0][3]) if rows else None
