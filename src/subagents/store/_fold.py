"""How a batch of store operations becomes a few statements — standard library only.

The SQLite store's writer process (:mod:`._writer_main`, ``python -I -S``) loads it by its file path and does
the work here on **plain** operations (tuples of values :mod:`marshal` carries); the PostgreSQL store uses the
same :class:`Plan` (:mod:`._batch`, :mod:`._pg_batch`).  Its imports are what the writer's start waits for.

Plain operations (``op[0]`` one of the codes below):

- ``(CREATE, values)`` — a run's column values in :data:`RUN_COLUMNS` order;
- ``(UPDATE, run_id, fields)`` and ``(FINISH, run_id, fields, announcement | None)``, an announcement as
  ``(id, parent_id, child_id, text, created_at, delivered_at)``;
- ``(APPEND, run_id, start_seq, messages, delivered_ids, at)``, a message as ``(role, blocks)`` and a block as
  ``(TEXT, text)``, ``(TOOL_USE, id, name, arguments)`` or ``(TOOL_RESULT, tool_use_id, content, is_error)``;
- ``(DELIVER, announcement_id, at)``, ``(DELETE, run_id)``, ``(SQL, sql, params[, many])``.

:class:`Plan` folds the operations of a batch into their net effect; :meth:`Plan.apply` records the statements
(multi-row ``VALUES`` inserts, grouped ``UPDATE ... FROM json_each``) on anything with ``execute`` and
``executemany`` — a :class:`Recorder`, or a connection.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import os
import sys
from _blake2 import blake2b  # the C parts of hashlib and json: the writer process starts ~30 ms sooner
from _json import encode_basestring as _esc  # without json, re, pathlib, typing (see _writer_main)
from _json import make_encoder as _c_encoder
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Protocol

    class Executor(Protocol):
        def execute(self, sql: str, params: Any = ..., /) -> Any: ...

        def executemany(self, sql: str, params: Any, /) -> Any: ...

__all__ = ["ANN_COLS", "RUN_COLUMNS", "Plan", "Recorder", "col_value", "encode", "message_json", "record_row",
           "sibling"]

CODES = CREATE, UPDATE, APPEND, FINISH, DELIVER, DELETE, SQL, CALL, FLUSH, STOP = tuple(range(10))  # operations
TEXT, TOOL_USE, TOOL_RESULT = range(3)  # the kinds of a plain message's blocks


def sibling(name: str) -> ModuleType:
    """The module ``name`` of this folder: imported from the package, or (loaded by file path, in the writer
    process) loaded by its file path too — it must be standard library only as well."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    full = f"_subagents{name}"
    mod = sys.modules.get(full)
    if mod is None:
        path = os.path.join(os.path.dirname(__file__), f"{name}.py")
        mod = sys.modules[full] = ModuleType(full)
        mod.__file__ = path
        importlib.machinery.SourceFileLoader(full, path).exec_module(mod)  # (its bytecode cached)
    return mod


RUN_COLUMNS: tuple[str, ...] = sibling("_schema").RUN_COLUMNS
ANN_COLS = "id, parent_id, child_id, text, created_at, delivered_at"
_COL_AT = {c: i for i, c in enumerate(RUN_COLUMNS)}
_JSON_COLS = frozenset({"usage", "limits", "worktree", "trace"})
_BOOL_COLS = frozenset({"background", "archived", "truncated"})
_PROMPT_AT = RUN_COLUMNS.index("system_prompt")
_USAGE_AT = RUN_COLUMNS.index("usage")
_JSON_IDX = tuple(RUN_COLUMNS.index(c) for c in sorted(_JSON_COLS))
_BOOL_IDX = tuple(RUN_COLUMNS.index(c) for c in sorted(_BOOL_COLS))
_INSERT_RUN_PREFIX = "INSERT OR REPLACE INTO runs ({}) VALUES ".format(
    ", ".join(f'"{c}"' for c in (*RUN_COLUMNS, "prompt_key")))
_ADD_PROMPTS = " ON CONFLICT (key) DO UPDATE SET text = excluded.text, refs = max(refs, 0) + excluded.refs"
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
_PROMPT_KEYS: dict[str, str] = {}  # prompt text -> key
_JSON_SEEN: dict[tuple[tuple[str, type, Any], ...], str] = {}


def _not_json(o: Any) -> Any:  # (JSONEncoder.default)
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _encoder(allow_nan: bool) -> Callable[[Any], str]:
    """``JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode``, its C encoder made
    once (``encode`` makes one per call: most of the cost of a small dict, a run's usage: ~4 -> ~1.6 µs)."""
    enc = _c_encoder(None, _not_json, _esc, None, ":", ",", False, False, allow_nan)
    return lambda o: "".join(enc(o, 0))


encode = _encoder(True)
_encode_strict = _encoder(False)  # (SQLite's JSON has no NaN or Infinity)
_BOUND = frozenset({str, int, float, type(None), bytes})  # bound as they are; others as their JSON text


def _json_col(v: Any, seen: bool = True) -> str:
    """A JSON column's text: ``{}`` at once, and (``seen``) the few distinct small dicts — the limits of
    each agent type, worktree records — encoded once.  Usage differs from run to run: not cached."""
    if not v:
        return "{}"
    if not seen:
        return encode(v)
    try:
        key = tuple([(k, type(x), x) for k, x in v.items()])
        text = _JSON_SEEN.get(key)
    except (TypeError, AttributeError):  # unhashable values (lists, dicts): encode every time
        return encode(v)
    if text is None:
        if len(_JSON_SEEN) >= 256:
            _JSON_SEEN.clear()
        text = _JSON_SEEN[key] = encode(v)
    return text


def col_value(name: str, v: Any) -> Any:
    """A run column's value as stored: a JSON column as its text, a flag as 0/1."""
    if name in _JSON_COLS:
        return _json_col(v, name != "usage")
    if name in _BOOL_COLS:
        return int(bool(v))
    return v


def message_json(m: Sequence[Any]) -> str:
    """The JSON of a plain message (``message_to_dict``'s, compact), built directly (2-3x faster)."""
    parts = []
    for b in m[1]:
        k = b[0]
        if k == TEXT:
            parts.append('{"kind":"text","text":' + _esc(b[1]) + "}")
        elif k == TOOL_USE:
            parts.append('{"kind":"tool_use","id":' + _esc(b[1]) + ',"name":' + _esc(b[2])
                         + ',"arguments":' + encode(b[3]) + "}")
        else:
            parts.append('{"kind":"tool_result","tool_use_id":' + _esc(b[1]) + ',"content":'
                         + _esc(b[2]) + (',"is_error":true}' if b[3] else "}"))
    return '{"role":' + _esc(m[0]) + ',"content":[' + ",".join(parts) + "]}"


def _insert_rows(c: Executor, prefix: str, ncols: int, rows: Sequence[Sequence[Any]], suffix: str = "") -> None:
    """Run ``prefix VALUES-rows suffix`` with one multi-row ``VALUES`` list per chunk (one statement per chunk,
    not one step per row as ``executemany``)."""
    per = max(1, _MAX_PARAMS // ncols)
    one = "(" + ", ".join("?" * ncols) + ")"
    for i in range(0, len(rows), per):
        chunk = rows[i:i + per]
        c.execute(prefix + ", ".join([one] * len(chunk)) + suffix, [v for row in chunk for v in row])


def _for_ids(c: Executor, sql: str, ids: Sequence[str]) -> None:
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


def _as_bound(v: Any) -> Any:
    return v if type(v) in _BOUND else int(v) if type(v) is bool else encode(v)


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
        key = _PROMPT_KEYS[text] = blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return key


def record_row(row: list[Any], prompts: dict[str, list[Any]]) -> list[Any]:
    """The ``runs`` row of a run's values (changed in place: its system prompt replaced by its key, then the key
    appended; ``prompts``: key -> [text, uses])."""
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


class Recorder:
    """Stands in for a connection while a batch is prepared: records the statements to run later."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, bool]] = []

    def execute(self, sql: str, params: Any = ()) -> None:
        self.calls.append((sql, params, False))

    def executemany(self, sql: str, params: Any) -> None:
        self.calls.append((sql, params, True))


class Plan:
    """The net effect of one batch of plain operations, applied in a fixed order that gives the same result as
    the operations in order."""

    __slots__ = ("anns", "delete", "delivered", "inserts", "sql", "trans", "updates")

    def __init__(self) -> None:
        self.delete: list[str] = []
        self.inserts: dict[str, list[Any]] = {}  # run id -> its column values
        self.updates: dict[str, dict[str, Any]] = {}
        self.trans: dict[str, list[Any]] = {}  # run id -> [lowest seq written, next seq, {seq: message}]
        self.anns: dict[str, list[Any]] = {}  # id -> (id, parent_id, child_id, text, created_at, delivered_at)
        self.delivered: dict[str, float] = {}
        self.sql: list[tuple[Any, ...]] = []

    def empty(self) -> bool:
        return not (self.delete or self.inserts or self.updates or self.trans or self.anns or self.delivered
                    or self.sql)

    def add(self, op: Sequence[Any]) -> None:
        code = op[0]
        if code == CREATE:
            row = list(op[1])
            if len(row) != len(RUN_COLUMNS):
                raise ValueError(f"a new run has {len(RUN_COLUMNS)} values, got {len(row)}")
            self.inserts[row[0]] = row
            self.updates.pop(row[0], None)
        elif code in (UPDATE, FINISH):
            self._update(op[1], op[2])
            if code == FINISH and op[3] is not None:
                self.anns.setdefault(op[3][0], list(op[3]))
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
            for a in [a for a in self.anns.values() if a[2] == run_id and a[5] is not None]:
                del self.anns[a[0]]
            self.delete.append(run_id)
        elif code == SQL:
            self.sql.append(tuple(op))

    def _append(self, run_id: str, start: int, msgs: Sequence[Any]) -> None:
        t = self.trans.get(run_id)
        if t is None:
            t = self.trans[run_id] = [start, start, {}]
        tail: dict[int, Any] = t[2]
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
        row = self.inserts.get(run_id)
        if row is not None:
            for k, v in fields.items():
                row[_COL_AT[k]] = v
        else:
            self.updates.setdefault(run_id, {}).update(fields)

    def _deliver(self, ann_id: str, at: float) -> None:
        ann = self.anns.get(ann_id)
        if ann is not None:
            if ann[5] is None:
                ann[5] = at
        else:
            self.delivered.setdefault(ann_id, at)

    def apply(self, c: Executor, tails: dict[str, int]) -> None:
        """Write the batch with a handful of statements (many rows per statement: multi-row ``VALUES``, or one
        JSON array for ``json_each``).  ``tails`` (run id -> next transcript seq known written) spares the
        ``DELETE`` of plain appends."""
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
            rows = [record_row(r, prompts) for r in self.inserts.values()]
            if prompts:  # (a key already there takes this text: a shipped store may hold others under our keys)
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
            try:  # one JSON array, encoded in C
                c.execute(_update_sql(keys), (_encode_strict(rows),))
            except ValueError:  # a float JSON cannot spell: these rows go bound, as they are
                prefix, suffix, convs = _update_plan(keys)
                _insert_rows(c, prefix, len(keys) + 1,
                             [[r[0], *[f(v) for f, v in zip(convs, r[1:], strict=True)]] for r in rows], suffix)
        if self.trans:
            self._apply_transcript(c, tails)
        self._apply_announcements(c)

    def _apply_transcript(self, c: Executor, tails: dict[str, int]) -> None:
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

    def _apply_announcements(self, c: Executor) -> None:
        if self.anns:
            _insert_rows(c, f"INSERT OR IGNORE INTO announcements ({ANN_COLS}) VALUES ", 6, list(self.anns.values()))
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


def prepare(ops: Sequence[Sequence[Any]], tails: dict[str, int]) -> list[tuple[str, Any, bool]]:
    """The statements ``(sql, params, many)`` that write a batch of plain operations (signals are skipped)."""
    plan = Plan()
    for op in ops:
        plan.add(op)
    stmts = Recorder()
    if not plan.empty():
        plan.apply(stmts, tails)
    return stmts.calls
