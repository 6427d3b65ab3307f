"""How the PostgreSQL store writes a batch: the net effect of its ops (:class:`~subagents.store._batch.Plan`,
shared with SQLite) as PostgreSQL statements.

The rows are built on the calling thread (:func:`record_row` is SQLite's row codec, :mod:`._fold`: the
tables have the same columns); the writer thread runs the recorded statements in one transaction, in one
pipeline.  Set-based, so the server runs a few statements per batch, not one per row: the rows of a
statement travel as one JSON array, read back by ``json_populate_recordset(NULL::table, ...)``, which types
each field by the table's own column (SQLite's ``json_each`` twin).  ``INSERT OR REPLACE`` becomes
``ON CONFLICT DO UPDATE``, ``INSERT OR IGNORE`` ``ON CONFLICT DO NOTHING``.  (Measured on a fan-out of
1,000 children: a multi-row ``VALUES`` insert of 1,000 runs took ~500 ms, ``executemany`` ~80 ms, this
~40 ms including the encoding.)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from ._batch import Plan
from ._fold import ANN_COLS, Recorder, col_value, encode, message_json, record_row
from ._pg_support import clean
from ._schema import RUN_COLUMNS

__all__ = ["apply_plan", "col_value", "rows_json", "upsert_sql"]

_RUN_COLS = (*RUN_COLUMNS, "prompt_key")
_ANN_COLS = tuple(ANN_COLS.split(", "))
_ADD_PROMPTS = ("INSERT INTO prompts (key, text, refs) SELECT key, text, refs FROM "
                "json_populate_recordset(NULL::prompts, %s::json) ON CONFLICT (key) DO UPDATE SET refs = prompts.refs "
                "+ excluded.refs")
_DROP_PROMPTS = ("UPDATE prompts p SET refs = p.refs - d.n FROM (SELECT prompt_key, count(*) AS n FROM runs "
                 "WHERE run_id = ANY(%s) AND prompt_key IS NOT NULL GROUP BY prompt_key) d WHERE p.key = d.prompt_key")


def upsert_sql(table: str, cols: tuple[str, ...], conflict: str) -> str:
    """Insert the rows of a JSON array of objects (one parameter) into ``table``, typed by its own columns
    (``json_populate_recordset``); ``conflict``: the ``ON CONFLICT`` clause."""
    names = ", ".join(f'"{c}"' for c in cols)
    return (f"INSERT INTO {table} ({names}) SELECT {names} FROM json_populate_recordset(NULL::{table}, %s::json) "
            f"{conflict}")


def _replace_all(key: str, cols: tuple[str, ...]) -> str:
    return f"ON CONFLICT ({key}) DO UPDATE SET " + ", ".join(f'"{c}" = excluded."{c}"' for c in cols if c != key)


#: Insert runs, or replace every column of one with the same id (its ``ord``, its place in the order, kept).
_INSERT_RUNS = upsert_sql("runs", _RUN_COLS, _replace_all("run_id", _RUN_COLS))
_PUT_MESSAGES = upsert_sql("transcript", ("run_id", "seq", "message"),
                           "ON CONFLICT (run_id, seq) DO UPDATE SET message = excluded.message")
_ADD_ANNOUNCEMENTS = upsert_sql("announcements", _ANN_COLS, "ON CONFLICT (id) DO NOTHING")


def _clean(v: Any) -> Any:
    return clean(v) if isinstance(v, str) else v


def rows_json(cols: tuple[str, ...], rows: Iterable[Sequence[Any]]) -> str:
    """The rows as a JSON array of objects.  PostgreSQL text cannot hold NUL: a NUL in a value (binary tool
    output, say) becomes U+FFFD instead of failing the whole batch."""
    objs = [dict(zip(cols, row, strict=True)) for row in rows]
    text = encode(objs)
    if "\\u0000" not in text:
        return text
    return encode([{k: _clean(v) for k, v in o.items()} for o in objs])


@functools.lru_cache(maxsize=64)
def _update_sql(keys: tuple[str, ...]) -> str:
    """Set ``keys`` of the runs listed in a JSON array of objects (``run_id`` and ``keys``)."""
    sets = ", ".join(f'"{k}" = x."{k}"' for k in keys)
    return (f"UPDATE runs SET {sets} FROM json_populate_recordset(NULL::runs, %s::json) AS x "
            "WHERE runs.run_id = x.run_id")


def apply_plan(plan: Plan, c: Recorder, tails: dict[str, int]) -> None:
    """Record the statements that write ``plan`` on ``c`` (see :meth:`Plan.apply`, its SQLite twin).

    ``tails`` (run id -> next transcript seq known written) spares the ``DELETE`` of plain appends."""
    _runs(plan, c, tails)
    if plan.trans:
        _transcript(plan, c, tails)
    if plan.anns:
        c.execute(_ADD_ANNOUNCEMENTS, (rows_json(_ANN_COLS, plan.anns.values()),))
    if plan.delivered:
        c.execute("UPDATE announcements a SET delivered_at = x.at FROM unnest(%s::text[], %s::float8[]) AS x(id, at) "
                  "WHERE a.id = x.id AND a.delivered_at IS NULL",
                  (list(plan.delivered), [float(at) for at in plan.delivered.values()]))
    for op in plan.sql:
        if len(op) > 3:
            c.executemany(op[1], op[2])
        else:
            c.execute(op[1], op[2])


def _runs(plan: Plan, c: Recorder, tails: dict[str, int]) -> None:
    """Deleted, new and updated runs (and their prompts)."""
    if plan.delete:
        ids = list(plan.delete)
        c.execute(_DROP_PROMPTS, (ids,))
        c.execute("DELETE FROM prompts WHERE refs <= 0", ())
        for table, col in (("runs", "run_id"), ("transcript", "run_id"), ("audit", "run_id")):
            c.execute(f"DELETE FROM {table} WHERE {col} = ANY(%s)", (ids,))
        c.execute("DELETE FROM announcements WHERE child_id = ANY(%s) AND delivered_at IS NOT NULL", (ids,))
        for r in ids:
            tails.pop(r, None)
    if plan.inserts:
        prompts: dict[str, list[Any]] = {}
        rows = [record_row(r, prompts) for r in plan.inserts.values()]
        if prompts:
            c.execute(_ADD_PROMPTS, (rows_json(("key", "text", "refs"), [(k, t, n) for k, (t, n) in prompts.items()]),))
        c.execute(_INSERT_RUNS, (rows_json(_RUN_COLS, rows),))
        for r in plan.inserts:  # a new run has no transcript yet: its first appends need no cut
            tails.setdefault(r, 0)
    by_keys: dict[tuple[str, ...], list[list[Any]]] = {}
    for run_id, fields in plan.updates.items():
        keys = tuple(fields)
        row = [col_value(k, v) for k, v in fields.items()]
        if "system_prompt" in fields:  # the text set here is the prompt from now on
            keys, row = (*keys, "prompt_key"), [*row, None]
        by_keys.setdefault(keys, []).append([*row, run_id])
    for keys, rows in by_keys.items():
        c.execute(_update_sql(keys), (rows_json((*keys, "run_id"), rows),))


def _transcript(plan: Plan, c: Recorder, tails: dict[str, int]) -> None:
    cut = [(r, t[0]) for r, t in plan.trans.items()
           if r not in plan.inserts and (r not in tails or t[0] < tails[r])]
    if cut:
        c.executemany("DELETE FROM transcript WHERE run_id = %s AND seq >= %s", cut)
    c.execute(_PUT_MESSAGES, (rows_json(("run_id", "seq", "message"), [
        (r, seq, message_json(m)) for r, t in plan.trans.items() for seq, m in t[2].items()]),))
    if len(tails) > 50_000:
        tails.clear()
    for r, t in plan.trans.items():
        tails[r] = t[1]
