"""The reads the two SQL stores share: the same queries, in each one's placeholder and insertion order.

:class:`~subagents.store.sqlite.SQLiteStore` and :class:`~subagents.store.postgres.PostgresStore` keep the
same tables (``_schema.py``, ``_pg_schema.py``); their reads differ in the parameter placeholder (``?`` or
``%s``) and in the column that orders rows made at the same instant (SQLite's ``rowid``, PostgreSQL's
identity column ``ord``).  :class:`SqlReads` writes each query once with ``{p}`` and ``{ord}`` filled in per
store, on top of the store's own ``_read(sql, params)`` (its connection, its errors, its closed check).

What a row holds is checked before it becomes a record: a SQLite store is a file that may come with a cloned
project, and SQLite keeps any value in any column — text where a time belongs, JSON that does not parse, a message
of a role no model has.  Such a row is a :class:`~subagents.exceptions.StoreError` naming the store, the run and the
column, and saying what to do (never a ``TypeError`` from deep inside a command or a runtime's start).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from ..exceptions import StoreError
from ..messages import Message, message_from_dict
from ._batch import ANN_COLS, COLS_SQL, record_from_row
from ._lease import Lease
from ._schema import FINAL_SQL, RUN_COLUMNS
from .base import FINAL_STATUSES, AnnouncementRecord, AuditRecord, RunRecord, run_spend

__all__ = ["SqlReads"]

_STR, _INT, _NUM = frozenset({str}), frozenset({int, bool}), frozenset({int, float, bool})
_NONE = frozenset({type(None)})
_TYPES: dict[str, frozenset[type]] = {  # what each runs column may hold (the JSON ones: text, parsed below)
    **dict.fromkeys(("run_id", "agent_id", "nickname", "agent_type", "task", "child_session_key", "label", "model",
                     "cleanup", "status", "system_prompt", "owner", "permission_mode", "usage", "limits", "worktree",
                     "trace"), _STR),
    **dict.fromkeys(("requester_session_key", "parent_id", "root_id", "outcome", "limit", "result_text", "error"),
                    _STR | _NONE),
    **dict.fromkeys(("depth", "background", "archived", "turns", "tool_calls", "truncated", "runs"), _INT),
    "created_at": _NUM,
    **dict.fromkeys(("started_at", "ended_at", "archive_at", "cost_usd"), _NUM | _NONE),
}
_COL_TYPES = tuple((i, _TYPES[c]) for i, c in enumerate(RUN_COLUMNS))
_SPEND_COLS = ("run_id", "started_at", "usage", "cost_usd")  # what Store.tree_spend reads of a run
_NUM_NONE = _NUM | _NONE
_decode = json.JSONDecoder().decode  # (json.loads without its per-call checks: a tree's usages, one by one)
_NAMES = {"str": "text", "int": "an integer", "float": "a number", "bytes": "a blob", "NoneType": "NULL"}
_UNPARSED = (ValueError, TypeError, KeyError, AttributeError, RecursionError)  # (a JSON text, a message's dict)


def _number(v: object) -> bool:
    """Whether ``v`` is a finite number a float can hold (an integer of 400 digits is not: no time, no count)."""
    try:
        return type(v) in _NUM and math.isfinite(v)  # type: ignore[arg-type]
    except OverflowError:
        return False


def _bad_json(rec: RunRecord) -> str | None:
    """What is wrong with the JSON columns of a record just read (``None``: nothing)."""
    for col in ("usage", "limits", "worktree", "trace"):
        if type(getattr(rec, col)) is not dict:
            return f"its {col} is not a JSON object"
    if not all(_number(v) for v in rec.usage.values()):
        return "its usage holds a count that is not a number"
    if not all(type(v) is str for v in rec.trace.values()):
        return "its trace holds a value that is not text"
    return None


class SqlReads:
    """Store reads as SQL (a mixin: the store gives ``_read`` and the two dialect strings)."""

    _P: str = "?"
    """The parameter placeholder of the store's driver."""
    _ORD: str = "rowid"
    """The column that keeps insertion order among rows made at the same instant."""

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _unreadable(self, what: str) -> StoreError:
        """The error for a row that is not what subagents writes (``what``: which row, and what is wrong in it)."""
        path = getattr(self, "path", None)
        todo = (f"move the store aside (mv {path} {path}.bad) to start a new one, or restore it from a backup"
                if path is not None else "correct or delete that row")
        return StoreError(f"the run store {path or getattr(self, 'where', '')} holds {what}: subagents did not write "
                          f"it so (it may have come with the project, or been damaged); {todo}")

    def _miscolumned(self, row: Sequence[Any], cols: Sequence[str]) -> StoreError:
        """The error for a ``runs`` row (of the columns ``cols``, ``run_id`` first) with a value of the wrong type."""
        i = next(i for i, c in enumerate(cols) if type(row[i]) not in _TYPES[c])
        got = _NAMES.get(type(row[i]).__name__, type(row[i]).__name__)
        return self._unreadable(f"a run ({row[0]!r}) whose {cols[i]} is {got}")

    def _record(self, row: Sequence[Any]) -> RunRecord:
        """The record of a ``runs`` row (selected as ``COLS_SQL``), once its values are of their columns' types."""
        for i, types in _COL_TYPES:
            if type(row[i]) not in types:
                raise self._miscolumned(row, RUN_COLUMNS)
        try:
            rec = record_from_row(row)
        except _UNPARSED:
            raise self._unreadable(f"a run ({row[0]!r}): one of its JSON columns does not parse") from None
        wrong = _bad_json(rec)
        if wrong is not None:
            raise self._unreadable(f"a run ({row[0]!r}): {wrong}")
        return rec

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(f"SELECT {COLS_SQL} FROM runs WHERE run_id = {self._P}", (run_id,))
        return self._record(rows[0]) if rows else None

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
        return [self._record(r) for r in rows]

    def tree_spend(self, root_id: str, since: float) -> tuple[int, float]:
        p = self._P
        rows = self._read(f"SELECT {', '.join(_SPEND_COLS)} FROM runs WHERE (root_id = {p} OR run_id = {p}) "
                          f"AND (run_id = {p} OR COALESCE(started_at, 0) >= {p})", (root_id, root_id, root_id, since))
        tokens, cost = 0, 0.0
        for row in rows:
            run_id, started, text, paid = row
            if type(run_id) is not str or type(started) not in _NUM_NONE or type(text) is not str \
                    or type(paid) not in _NUM_NONE:
                raise self._miscolumned(row, _SPEND_COLS)
            if run_id != root_id and not (started or 0.0) >= since:  # (a NaN time: as charge_tree compared it)
                continue
            t, c = run_spend(self._usage(run_id, text) if text and text != "{}" else {}, paid)
            tokens += t
            cost += c
        return tokens, cost

    def _usage(self, run_id: str, text: str) -> dict[str, Any]:
        """The usage of a run read alone (:meth:`tree_spend`), checked as :meth:`_record` checks a record's."""
        try:
            usage = _decode(text)
        except _UNPARSED:
            raise self._unreadable(f"a run ({run_id!r}): its usage does not parse") from None
        if type(usage) is not dict:
            raise self._unreadable(f"a run ({run_id!r}): its usage is not a JSON object")
        for v in usage.values():
            if not _number(v):
                raise self._unreadable(f"a run ({run_id!r}): its usage holds a count that is not a number")
        return usage

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
        rows = self._read(f"SELECT message, seq FROM transcript WHERE run_id = {p} AND seq >= {p} ORDER BY seq",
                          (run_id, start))
        out = []
        for text, seq in rows:
            try:
                d = json.loads(text)
                out.append(message_from_dict(d if type(d) is dict else {}))
            except _UNPARSED as e:
                raise self._unreadable(f"a message of run {run_id!r} (number {seq}) that is no message "
                                       f"({str(e)[:200]})") from None
        return out

    def pending_announcements(self, parent_id: str | None = None) -> list[AnnouncementRecord]:
        cond, params = (f" AND parent_id = {self._P}", (parent_id,)) if parent_id is not None else ("", ())
        rows = self._read(f"SELECT {ANN_COLS} FROM announcements WHERE delivered_at IS NULL{cond} "
                          f"ORDER BY created_at, {self._ORD}", params)
        return [self._announcement(r) for r in rows]

    def _announcement(self, r: Sequence[Any]) -> AnnouncementRecord:
        if not (all(type(v) is str for v in r[:4]) and _number(r[4]) and (r[5] is None or _number(r[5]))):
            raise self._unreadable(f"an announcement ({r[0]!r}) whose values are not of its columns' types")
        return AnnouncementRecord(*r)

    def announcements_of(self, child_id: str | None = None, parent_id: str | None = None
                         ) -> list[AnnouncementRecord]:
        given = [(col, v) for col, v in (("child_id", child_id), ("parent_id", parent_id)) if v is not None]
        cond = f" WHERE {' AND '.join(f'{col} = {self._P}' for col, _ in given)}" if given else ""
        rows = self._read(f"SELECT {ANN_COLS} FROM announcements{cond} ORDER BY created_at, {self._ORD}",
                          [v for _, v in given])
        return [self._announcement(r) for r in rows]

    def audit_of(self, run_id: str) -> list[AuditRecord]:
        rows = self._read(f"SELECT run_id, at, kind, data FROM audit WHERE run_id = {self._P} ORDER BY id", (run_id,))
        out = []
        for r in rows:
            try:
                data = json.loads(r[3]) if type(r[3]) is str else None
            except _UNPARSED:
                data = None
            if type(data) is not dict or not _number(r[1]) or type(r[2]) is not str:
                raise self._unreadable(f"an audit entry of run {run_id!r} that is no audit entry")
            out.append(AuditRecord(r[0], r[1], r[2], data))
        return out

    def cleanup_candidates(self, now: float, limit: int | None = None,
                           after: tuple[float, str] | None = None) -> list[RunRecord]:
        if limit is None:
            rows = self._read(f"SELECT {COLS_SQL} FROM runs WHERE archived = 0 AND {FINAL_SQL} AND (cleanup = 'delete' "
                              f"OR archive_at IS NULL OR archive_at <= {self._P}) ORDER BY created_at, {self._ORD}",
                              (now,))
        else:  # one step of a sweep: the next `limit` runs due, in the order of the runs_sweep index
            lo, last = after if after is not None else (float("-inf"), "")
            rows = self._sweep_step(lo, last, now, limit)
        return [self._record(r) for r in rows]

    def _sweep_step(self, lo: float, last: str, now: float, limit: int) -> list[Any]:
        """The rows of the next ``limit`` runs due by ``now`` after ``(lo, last)`` in the sweep order."""
        raise NotImplementedError

    def lease(self, owner: str) -> Lease | None:
        rows = self._read(f"SELECT owner, heartbeat, expires, process FROM owners WHERE owner = {self._P}", (owner,))
        if not rows:
            return None
        o, at, expires, process = rows[0]
        if type(at) not in _NUM or type(expires) not in _NUM or type(process) is not str:  # (inf: a lease for ever)
            raise self._unreadable(f"a lease of {owner!r} whose times are not numbers")
        return Lease(o, float(at), float(expires), process)
