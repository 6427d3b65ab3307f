"""How the PostgreSQL store writes a batch: the net effect of its ops (:class:`~subagents.store._batch.Plan`,
shared with SQLite) as PostgreSQL statements.

The rows are built on the calling thread, as for SQLite (:func:`record_row` is SQLite's row codec: the
tables have the same columns); the writer thread runs the recorded statements in one transaction,
each ``executemany`` in psycopg's pipeline mode (one round trip for many rows).  ``INSERT OR REPLACE``
becomes ``INSERT ... ON CONFLICT DO UPDATE``, ``INSERT OR IGNORE`` becomes ``ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

import functools
from typing import Any

from ._batch import ANN_COLS, Plan, Recorder, message_json
from ._batch import _col_value as col_value
from ._batch import _record_row as record_row
from ._schema import RUN_COLUMNS

__all__ = ["INSERT_RUN", "apply_plan", "col_value"]

_INSERT_COLS = (*RUN_COLUMNS, "prompt_key")
#: Insert a run, or replace every column of the one with its id (``ord`` kept: its place in the order).
_QUOTED = [f'"{c}"' for c in _INSERT_COLS]
INSERT_RUN = (f"INSERT INTO runs ({', '.join(_QUOTED)}) VALUES ({', '.join(['%s'] * len(_QUOTED))}) "
              "ON CONFLICT (run_id) DO UPDATE SET " + ", ".join(f"{q} = excluded.{q}" for q in _QUOTED[1:]))
_ADD_PROMPTS = ("INSERT INTO prompts (key, text, refs) VALUES (%s, %s, %s) "
                "ON CONFLICT (key) DO UPDATE SET refs = prompts.refs + excluded.refs")
_DROP_PROMPTS = ("UPDATE prompts p SET refs = p.refs - d.n FROM (SELECT prompt_key, count(*) AS n FROM runs "
                 "WHERE run_id = ANY(%s) AND prompt_key IS NOT NULL GROUP BY prompt_key) d WHERE p.key = d.prompt_key")
_PUT_MESSAGE = ("INSERT INTO transcript (run_id, seq, message) VALUES (%s, %s, %s) "
                "ON CONFLICT (run_id, seq) DO UPDATE SET message = excluded.message")


@functools.lru_cache(maxsize=64)
def _update_sql(keys: tuple[str, ...]) -> str:
    sets = ", ".join(f'"{k}" = %s' for k in keys)
    return f"UPDATE runs SET {sets} WHERE run_id = %s"


def apply_plan(plan: Plan, c: Recorder, tails: dict[str, int]) -> None:
    """Record the statements that write ``plan`` on ``c`` (see :meth:`Plan.apply`, its SQLite twin).

    ``tails`` (run id -> next transcript seq known written) spares the ``DELETE`` of plain appends."""
    _runs(plan, c, tails)
    if plan.trans:
        _transcript(plan, c, tails)
    if plan.anns:
        c.executemany(f"INSERT INTO announcements ({ANN_COLS}) VALUES (%s, %s, %s, %s, %s, %s) "
                      "ON CONFLICT (id) DO NOTHING",
                      [(a.id, a.parent_id, a.child_id, a.text, a.created_at, a.delivered_at)
                       for a in plan.anns.values()])
    if plan.delivered:
        c.executemany("UPDATE announcements SET delivered_at = %s WHERE id = %s AND delivered_at IS NULL",
                      [(at, i) for i, at in plan.delivered.items()])
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
            c.executemany(_ADD_PROMPTS, [(k, t, n) for k, (t, n) in prompts.items()])
        c.executemany(INSERT_RUN, rows)
        for r in plan.inserts:  # a new run has no transcript yet: its first appends need no cut
            tails.setdefault(r, 0)
    by_keys: dict[tuple[str, ...], list[list[Any]]] = {}
    for run_id, fields in plan.updates.items():
        values = [col_value(k, v) for k, v in fields.items()]
        keys = tuple(fields)
        if "system_prompt" in fields:  # the text set here is the prompt from now on
            keys, values = (*keys, "prompt_key"), [*values, None]
        by_keys.setdefault(keys, []).append([*values, run_id])
    for keys, rows in by_keys.items():
        c.executemany(_update_sql(keys), rows)


def _transcript(plan: Plan, c: Recorder, tails: dict[str, int]) -> None:
    cut = [(r, t[0]) for r, t in plan.trans.items()
           if r not in plan.inserts and (r not in tails or t[0] < tails[r])]
    if cut:
        c.executemany("DELETE FROM transcript WHERE run_id = %s AND seq >= %s", cut)
    c.executemany(_PUT_MESSAGE, [(r, seq, message_json(m)) for r, t in plan.trans.items() for seq, m in t[2].items()])
    if len(tails) > 50_000:
        tails.clear()
    for r, t in plan.trans.items():
        tails[r] = t[1]
