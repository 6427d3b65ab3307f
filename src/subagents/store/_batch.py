"""How the SQLite store turns a batch of store calls into a few statements (see :mod:`.sqlite`).

:class:`Plan` folds the ops of one batch into their net effect; :meth:`Plan.apply` records the
statements on a :class:`Recorder` (multi-row ``VALUES`` inserts, grouped ``UPDATE ... FROM json_each``)
that the writer thread then executes in one transaction.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import fields as dataclass_fields
from typing import Any

from ..messages import Message, TextBlock, ToolUseBlock
from ._schema import FINAL_SQL, PROMPT_SQL, RUN_COLUMNS, SWEEP_KEY
from .base import AnnouncementRecord, RunRecord

__all__ = ["ANN_COLS", "COLS_SQL", "RUN_FIELDS", "Plan", "Recorder", "message_json", "record_from_row"]

# queue op codes
CREATE, UPDATE, APPEND, FINISH, DELIVER, DELETE, SQL, CALL, FLUSH, STOP = range(10)

_JSON_COLS = frozenset({"usage", "limits", "worktree", "trace"})
_BOOL_COLS = frozenset({"background", "archived", "truncated"})
RUN_FIELDS = frozenset(RUN_COLUMNS)
_PROMPT_AT = RUN_COLUMNS.index("system_prompt")
#: What reads select for a run, in ``RUN_COLUMNS`` order: the system prompt comes from ``prompts`` (schema 5;
#: a run written before keeps its own text in ``runs.system_prompt``, with no ``prompt_key``).
COLS_SQL = ", ".join(PROMPT_SQL if c == "system_prompt" else f'"{c}"' for c in RUN_COLUMNS)
_INSERT_COLS = ", ".join(f'"{c}"' for c in (*RUN_COLUMNS, "prompt_key"))
_ADD_PROMPTS = " ON CONFLICT (key) DO UPDATE SET refs = refs + excluded.refs"  # after the VALUES rows
_MAX_PARAMS = 32_000  # bound parameters per statement (SQLite's limit: 32,766)
# Deleting runs, one statement each per chunk of ids (``d``: the ids as a VALUES list): each run gives back
# its use of its system prompt, then the runs, their transcripts, delivered announcements and audit go.
_DELETE_SQL = tuple(f"WITH d(id) AS (VALUES {{ids}}) {sql}" for sql in (
    "UPDATE prompts SET refs = refs - (SELECT count(*) FROM runs JOIN d ON runs.run_id = d.id "
    "WHERE runs.prompt_key = prompts.key) "
    "WHERE key IN (SELECT runs.prompt_key FROM runs JOIN d ON runs.run_id = d.id)",
    "DELETE FROM runs WHERE run_id IN (SELECT id FROM d)",
    "DELETE FROM transcript WHERE run_id IN (SELECT id FROM d)",
    "DELETE FROM announcements WHERE child_id IN (SELECT id FROM d) AND delivered_at IS NOT NULL",
    "DELETE FROM audit WHERE run_id IN (SELECT id FROM d)",
))
_DELIVER_SQL = ("UPDATE announcements SET delivered_at = v.column2 FROM (VALUES {rows}) AS v "
                "WHERE announcements.id = v.column1 AND announcements.delivered_at IS NULL")
_PROMPT_KEYS: dict[str, str] = {}  # prompt text -> key (the runtime reuses one str per distinct prompt)
ANN_COLS = "id, parent_id, child_id, text, created_at, delivered_at"
#: One step of a sweep (``cleanup_candidates`` with a limit): the next runs due, in ``runs_sweep`` order.
_SWEEP_STEP = (f"SELECT {COLS_SQL} FROM runs INDEXED BY runs_sweep WHERE archived = 0 AND {FINAL_SQL} "
              f"AND {SWEEP_KEY} >= ?1 AND {SWEEP_KEY} <= ?2 AND ({SWEEP_KEY} > ?1 OR run_id > ?3) "
              f"ORDER BY {SWEEP_KEY}, run_id LIMIT ?4")
_JSON_SEEN: dict[tuple[tuple[str, type, Any], ...], str] = {}



def _json_col(v: Any, seen: bool = True) -> str:
    """A JSON column's text: ``{}`` at once, and (``seen``) the few distinct small dicts — the limits of
    each agent type, worktree records — encoded once.  Usage differs from run to run: not cached."""
    if not v:
        return "{}"
    if not seen:
        return _encode(v)
    try:
        key = tuple([(k, type(x), x) for k, x in v.items()])
        text = _JSON_SEEN.get(key)
    except (TypeError, AttributeError):  # unhashable values (lists, dicts): encode every time
        return _encode(v)
    if text is None:
        if len(_JSON_SEEN) >= 256:
            _JSON_SEEN.clear()
        text = _JSON_SEEN[key] = _encode(v)
    return text


def _col_value(name: str, v: Any) -> Any:
    if name in _JSON_COLS:
        return _json_col(v, name != "usage")
    if name in _BOOL_COLS:
        return int(bool(v))
    return v


_get_row = operator.attrgetter(*RUN_COLUMNS)
_USAGE_AT = RUN_COLUMNS.index("usage")
_JSON_IDX = tuple(RUN_COLUMNS.index(c) for c in sorted(_JSON_COLS))
_BOOL_IDX = tuple(RUN_COLUMNS.index(c) for c in sorted(_BOOL_COLS))
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_esc: Callable[[str], str] = json.encoder.encode_basestring
_encode_strict = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False,
                                  allow_nan=False).encode  # (SQLite's JSON has no NaN or Infinity)


def message_json(m: Message) -> str:
    """``json.dumps(message_to_dict(m))`` in compact form, built directly (2-3x faster on the hot path)."""
    parts = []
    for b in m.content:
        if isinstance(b, TextBlock):
            parts.append('{"kind":"text","text":' + _esc(b.text) + "}")
        elif isinstance(b, ToolUseBlock):
            parts.append('{"kind":"tool_use","id":' + _esc(b.id) + ',"name":' + _esc(b.name)
                         + ',"arguments":' + _encode(b.arguments) + "}")
        else:
            parts.append('{"kind":"tool_result","tool_use_id":' + _esc(b.tool_use_id) + ',"content":'
                         + _esc(b.content) + (',"is_error":true}' if b.is_error else "}"))
    return '{"role":' + _esc(m.role) + ',"content":[' + ",".join(parts) + "]}"


_INSERT_RUN_PREFIX = f"INSERT OR REPLACE INTO runs ({_INSERT_COLS}) VALUES "


def _insert_rows(c: Recorder, prefix: str, ncols: int, rows: Sequence[Sequence[Any]], suffix: str = "") -> None:
    """Run ``prefix VALUES-rows suffix`` with one multi-row ``VALUES`` list per chunk: one GIL release per
    chunk instead of one per row (``executemany`` steps row by row, and each step re-takes the GIL from
    the event loop: up to a switch interval when the loop is busy)."""
    per = max(1, _MAX_PARAMS // ncols)
    one = "(" + ", ".join("?" * ncols) + ")"
    for i in range(0, len(rows), per):
        chunk = rows[i:i + per]
        c.execute(prefix + ", ".join([one] * len(chunk)) + suffix, [v for row in chunk for v in row])


def _for_ids(c: Recorder, sql: str, ids: Sequence[str]) -> None:
    """Run ``sql`` (its ``{ids}`` a ``VALUES`` list of the ids, named ``d(id)``) once per chunk of ``ids``."""
    for i in range(0, len(ids), _MAX_PARAMS):
        chunk = ids[i:i + _MAX_PARAMS]
        c.execute(sql.format(ids=", ".join(["(?)"] * len(chunk))), list(chunk))


@functools.lru_cache(maxsize=64)
def _update_sql(keys: tuple[str, ...]) -> str:
    sets = ", ".join(f'"{k}" = {_from_json(i + 1, k)}' for i, k in enumerate(keys))
    return (f"UPDATE runs SET {sets} FROM (SELECT value FROM json_each(?)) AS j "
            "WHERE runs.run_id = json_extract(j.value, '$[0]')")


def _from_json(i: int, col: str) -> str:
    v = f"json_extract(value, '$[{i}]')"
    return f"json({v})" if col in _JSON_COLS else v


_BOUND = frozenset({str, int, float, type(None), bytes})  # bound as they are; others as their JSON text


def _as_bound(v: Any) -> Any:
    return v if type(v) in _BOUND else int(v) if type(v) is bool else _encode(v)


@functools.lru_cache(maxsize=64)
def _update_plan(keys: tuple[str, ...]) -> tuple[str, str, tuple[Callable[[Any], Any], ...]]:
    """``UPDATE runs ... FROM (VALUES (run_id, *values), ...)``: the statement around the rows, and how each value
    is bound (a JSON column as its text, a flag as 0/1) — for rows JSON cannot carry (``inf``, ``nan``)."""
    sets = ", ".join(f'"{k}" = v.column{i + 2}' for i, k in enumerate(keys))
    convs = tuple(functools.partial(_json_col, seen=k != "usage") if k in _JSON_COLS else
                  (lambda x: int(bool(x))) if k in _BOOL_COLS else _as_bound for k in keys)
    return f"UPDATE runs SET {sets} FROM (VALUES ", ") AS v WHERE runs.run_id = v.column1", convs


def prompt_key(text: str) -> str:
    """The key a system prompt is stored under in ``prompts`` (stored once, however many runs share it)."""
    key = _PROMPT_KEYS.get(text)
    if key is None:
        if len(_PROMPT_KEYS) >= 256:
            _PROMPT_KEYS.clear()
        key = _PROMPT_KEYS[text] = hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                                   digest_size=16).hexdigest()
    return key


def _record_row(rec: RunRecord, prompts: dict[str, list[Any]]) -> list[Any]:
    """The ``runs`` row of ``rec`` (its system prompt replaced by its key; ``prompts``: key -> [text, uses])."""
    row: list[Any] = list(_get_row(rec))
    for i in _JSON_IDX:
        row[i] = _json_col(row[i], i != _USAGE_AT)
    for i in _BOOL_IDX:
        row[i] = int(bool(row[i]))
    text = row[_PROMPT_AT]
    if text:
        key = prompt_key(text)
        row[_PROMPT_AT] = ""
        p = prompts.get(key)
        if p is None:
            prompts[key] = [text, 1]
        else:
            p[1] += 1
        row.append(key)
    else:
        row.append(None)
    return row


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


if tuple(f.name for f in dataclass_fields(RunRecord)) != RUN_COLUMNS:  # record_from_row and _record_row rely on it
    raise ImportError("RunRecord's fields and the runs columns (store/_schema.py RUN_COLUMNS) differ in order")



class Recorder:
    """Stands in for a connection while a batch is prepared: records the statements for the writer."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, bool]] = []

    def execute(self, sql: str, params: Any = ()) -> None:
        self.calls.append((sql, params, False))

    def executemany(self, sql: str, params: Any) -> None:
        self.calls.append((sql, params, True))


class Plan:
    """The net effect of one batch, applied in a fixed order that gives the same result as the ops in order."""

    __slots__ = ("anns", "delete", "delivered", "inserts", "sql", "trans", "updates")

    def __init__(self) -> None:
        self.delete: list[str] = []
        self.inserts: dict[str, RunRecord] = {}
        self.updates: dict[str, dict[str, Any]] = {}
        self.trans: dict[str, list[Any]] = {}  # run id -> [lowest seq written, next seq, {seq: message}]
        self.anns: dict[str, AnnouncementRecord] = {}
        self.delivered: dict[str, float] = {}
        self.sql: list[tuple[Any, ...]] = []

    def empty(self) -> bool:
        return not (self.delete or self.inserts or self.updates or self.trans or self.anns or self.delivered
                    or self.sql)

    def add(self, op: tuple[Any, ...]) -> None:
        code = op[0]
        if code == CREATE:
            rec: RunRecord = op[1]
            self.inserts[rec.run_id] = rec
            self.updates.pop(rec.run_id, None)
        elif code in (UPDATE, FINISH):
            self._update(op[1], op[2])
            if code == FINISH and op[3] is not None:
                ann: AnnouncementRecord = op[3]
                self.anns.setdefault(ann.id, ann)
        elif code == APPEND:
            _, run_id, start, msgs, delivered, at = op
            self._append(run_id, start, msgs)
            for ann_id in delivered:
                self._deliver(ann_id, at)
        elif code == DELIVER:
            self._deliver(op[1], op[2])
        elif code == DELETE:
            run_id = op[1]
            self.inserts.pop(run_id, None)
            self.updates.pop(run_id, None)
            self.trans.pop(run_id, None)
            for a in [a for a in self.anns.values() if a.child_id == run_id and a.delivered_at is not None]:
                del self.anns[a.id]
            self.delete.append(run_id)
        elif code == SQL:
            self.sql.append(op)

    def _append(self, run_id: str, start: int, msgs: tuple[Message, ...]) -> None:
        t = self.trans.get(run_id)
        if t is None:
            t = self.trans[run_id] = [start, start, {}]
        tail: dict[int, Message] = t[2]
        if start < t[1]:  # rewriting the tail (rare): drop what it replaces
            for k in [k for k in tail if k >= start]:
                del tail[k]
            t[0] = min(t[0], start)
        for i, m in enumerate(msgs):
            tail[start + i] = m
        t[1] = start + len(msgs)

    def _update(self, run_id: str, fields: dict[str, Any]) -> None:
        if not fields:
            return
        rec = self.inserts.get(run_id)
        if rec is not None:
            for k, v in fields.items():
                setattr(rec, k, v)
        else:
            self.updates.setdefault(run_id, {}).update(fields)

    def _deliver(self, ann_id: str, at: float) -> None:
        ann = self.anns.get(ann_id)
        if ann is not None:
            if ann.delivered_at is None:
                ann.delivered_at = at
        else:
            self.delivered.setdefault(ann_id, at)

    def apply(self, c: Recorder, tails: dict[str, int]) -> None:
        """Write the batch with a handful of statements: many rows per statement (multi-row ``VALUES``, or one
        JSON array for ``json_each``), so the writer holds the GIL briefly and releases it a few times per batch.

        ``tails`` (run id -> next transcript seq known committed) spares the ``DELETE`` of plain appends.
        """
        if self.delete:
            ids = list(dict.fromkeys(self.delete))  # (a run deleted twice in a batch gives its prompt back once)
            _for_ids(c, _DELETE_SQL[0], ids)
            c.execute("DELETE FROM prompts WHERE refs <= 0", ())  # (the prompts_unused index)
            for sql in _DELETE_SQL[1:]:
                _for_ids(c, sql, ids)
            for r in self.delete:
                tails.pop(r, None)
        if self.inserts:
            prompts: dict[str, list[Any]] = {}
            rows = [_record_row(r, prompts) for r in self.inserts.values()]
            if prompts:
                _insert_rows(c, "INSERT INTO prompts (key, text, refs) VALUES ", 3,
                             [(k, t, n) for k, (t, n) in prompts.items()], _ADD_PROMPTS)
            _insert_rows(c, _INSERT_RUN_PREFIX, len(RUN_COLUMNS) + 1, rows)
            for r in self.inserts:  # a new run has no transcript yet: its first appends need no cut
                tails.setdefault(r, 0)
        by_keys: dict[tuple[str, ...], list[list[Any]]] = {}
        for run_id, fields in self.updates.items():
            if "system_prompt" in fields:  # the text set here is the prompt from now on
                fields = {**fields, "prompt_key": None}
            by_keys.setdefault(tuple(fields), []).append([run_id, *fields.values()])
        for keys, rows in by_keys.items():
            try:  # one JSON array: encoded in C, the fastest way on this (the event loop's) thread
                c.execute(_update_sql(keys), (_encode_strict(rows),))
            except ValueError:  # a float JSON cannot spell: these rows go bound, as they are
                prefix, suffix, convs = _update_plan(keys)
                _insert_rows(c, prefix, len(keys) + 1,
                             [[r[0], *[f(v) for f, v in zip(convs, r[1:], strict=True)]] for r in rows], suffix)
        if self.trans:
            self._apply_transcript(c, tails)
        self._apply_announcements(c)

    def _apply_transcript(self, c: Recorder, tails: dict[str, int]) -> None:
        cut = [(r, t[0]) for r, t in self.trans.items()
               if r not in self.inserts and (r not in tails or t[0] < tails[r])]
        if cut:
            c.executemany("DELETE FROM transcript WHERE run_id = ? AND seq >= ?", cut)
        _insert_rows(c, "INSERT OR REPLACE INTO transcript (run_id, seq, message) VALUES ", 3,
                     [(r, seq, message_json(m)) for r, t in self.trans.items() for seq, m in t[2].items()])
        if len(tails) > 50_000:
            tails.clear()
        for r, t in self.trans.items():
            tails[r] = t[1]

    def _apply_announcements(self, c: Recorder) -> None:
        if self.anns:
            _insert_rows(c, f"INSERT OR IGNORE INTO announcements ({ANN_COLS}) VALUES ", 6,
                         [(a.id, a.parent_id, a.child_id, a.text, a.created_at, a.delivered_at)
                          for a in self.anns.values()])
        if self.delivered:
            rows = list(self.delivered.items())
            per = _MAX_PARAMS // 2
            for i in range(0, len(rows), per):
                chunk = rows[i:i + per]
                c.execute(_DELIVER_SQL.format(rows=", ".join(["(?, ?)"] * len(chunk))),
                          [v for row in chunk for v in row])
        for op in self.sql:
            if len(op) > 3:
                c.executemany(op[1], op[2])
            else:
                c.execute(op[1], op[2])


