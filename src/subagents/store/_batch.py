"""The store's operations as the calling thread makes them: plain values, folded and written elsewhere.

The event loop turns a store call into a **plain** operation (:mod:`._fold`'s forms: tuples of values
:mod:`marshal` carries) and appends it to the batch being gathered; the SQLite store's writer process
folds the batch and builds its statements (:mod:`._fold`, loaded there by file path).  The PostgreSQL store
folds on its calling thread with :class:`Plan` (which takes its operations with records and messages and
makes them plain).  Reads turn ``runs`` rows back into records (:func:`record_from_row`).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from dataclasses import fields as dataclass_fields
from typing import Any

from ..messages import Message, TextBlock, ToolUseBlock
from . import _fold
from ._fold import ANN_COLS, TEXT, TOOL_RESULT, TOOL_USE, Recorder
from ._schema import FINAL_SQL, PROMPT_SQL, RUN_COLUMNS, SWEEP_KEY
from .base import AnnouncementRecord, RunRecord

__all__ = ["ANN_COLS", "APPEND", "CALL", "COLS_SQL", "CREATE", "DELETE", "DELIVER", "FINISH", "FLUSH", "RUN_FIELDS",
           "SQL", "STOP", "UPDATE", "Plan", "Recorder", "announcement_values", "message_json", "message_values",
           "plain_op", "record_from_row", "record_values", "sweep_values"]

CREATE, UPDATE, APPEND, FINISH, DELIVER, DELETE, SQL, CALL, FLUSH, STOP = _fold.CODES  # (the operations' codes)
RUN_FIELDS = frozenset(RUN_COLUMNS)
#: What reads select for a run, in ``RUN_COLUMNS`` order: the system prompt comes from ``prompts`` (schema 5;
#: a run written before keeps its own text in ``runs.system_prompt``, with no ``prompt_key``).
COLS_SQL = ", ".join(PROMPT_SQL if c == "system_prompt" else f'"{c}"' for c in RUN_COLUMNS)
#: One step of a sweep (``cleanup_candidates`` with a limit): the next runs due, in ``runs_sweep`` order;
#: its values: ``(lo, now, lo, last, limit)`` (:func:`sweep_values`).
_SWEEP_STEP = (f"SELECT {COLS_SQL} FROM runs INDEXED BY runs_sweep WHERE archived = 0 AND {FINAL_SQL} "
              f"AND {SWEEP_KEY} >= ? AND {SWEEP_KEY} <= ? AND ({SWEEP_KEY} > ? OR run_id > ?) "
              f"ORDER BY {SWEEP_KEY}, run_id LIMIT ?")
#: (Plain ``?`` placeholders, a value given twice: numbered ones, a question mark and a number, bound from a
#: sequence are deprecated in Python 3.12's sqlite3 and refused from 3.14.)


def sweep_values(lo: float, last: str, now: float, limit: int) -> tuple[Any, ...]:
    """The values :data:`_SWEEP_STEP` binds, in order."""
    return (lo, now, lo, last, limit)


_JSON_IDX = tuple(RUN_COLUMNS.index(c) for c in ("limits", "trace", "usage", "worktree"))
_BOOL_IDX = tuple(RUN_COLUMNS.index(c) for c in ("archived", "background", "truncated"))

#: A run's column values, in ``RUN_COLUMNS`` order (the plain form of a record).
record_values = operator.attrgetter(*RUN_COLUMNS)


def message_values(m: Message) -> tuple[str, tuple[tuple[Any, ...], ...]]:
    """The plain form of a message: ``(role, blocks)`` (see :mod:`._fold`)."""
    return (str(m.role), tuple([(TEXT, b.text) if isinstance(b, TextBlock) else
                                (TOOL_USE, b.id, b.name, b.arguments) if isinstance(b, ToolUseBlock) else
                                (TOOL_RESULT, b.tool_use_id, b.content, b.is_error) for b in m.content]))


def announcement_values(a: AnnouncementRecord | None) -> tuple[Any, ...] | None:
    """The plain form of an announcement (a copy: the caller may change its own)."""
    return None if a is None else (a.id, a.parent_id, a.child_id, a.text, a.created_at, a.delivered_at)


def message_json(m: Message) -> str:
    """``json.dumps(message_to_dict(m))`` in compact form, built directly (2-3x faster on the hot path)."""
    return _fold.message_json(message_values(m))


def plain_op(op: tuple[Any, ...]) -> tuple[Any, ...]:
    """An operation with records, announcements and messages as their plain forms."""
    code = op[0]
    if code == CREATE and isinstance(op[1], RunRecord):
        return (CREATE, record_values(op[1]))
    if code == FINISH and isinstance(op[3], AnnouncementRecord):
        return (*op[:3], announcement_values(op[3]))
    if code == APPEND:
        return (*op[:3], tuple([message_values(m) if isinstance(m, Message) else m for m in op[3]]), *op[4:])
    return op


class Plan(_fold.Plan):
    """:class:`._fold.Plan` taking operations with records and messages (the PostgreSQL store's)."""

    __slots__ = ()

    def add(self, op: Sequence[Any]) -> None:
        super().add(plain_op(tuple(op)))


def record_from_row(row: Sequence[Any]) -> RunRecord:
    """The record of a ``runs`` row selected as :data:`COLS_SQL` (positional: the columns are in field order;
    an empty JSON column is not parsed — reads of many rows, a sweep step, stay short)."""
    v = list(row)
    if len(v) != len(RUN_COLUMNS):
        raise ValueError(f"a runs row has {len(RUN_COLUMNS)} columns, got {len(v)}")
    for i in _JSON_IDX:
        x = v[i]
        v[i] = {} if not x or x == "{}" else json.loads(x)
    for i in _BOOL_IDX:
        v[i] = bool(v[i])
    return RunRecord(*v)


if tuple(f.name for f in dataclass_fields(RunRecord)) != RUN_COLUMNS:  # record_from_row and record_values rely on it
    raise ImportError("RunRecord's fields and the runs columns (store/_schema.py RUN_COLUMNS) differ in order")
