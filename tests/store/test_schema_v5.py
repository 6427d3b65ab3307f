"""Schema 5: system prompts stored once, a v4 store migrated in place, the indexes the queries use."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from subagents.store import RunRecord
from subagents.store._schema import _MIGRATIONS, SCHEMA_VERSION, _statements
from subagents.store.sqlite import SQLiteStore

PROMPT = "You are a careful sub-agent. " * 30


def rec(run_id: str, **kw: object) -> RunRecord:
    d: dict[str, object] = {"nickname": run_id, "agent_type": "explore", "task": "t", "status": "running",
                            "system_prompt": PROMPT, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, **d)  # type: ignore[arg-type]


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def v4_store(path: Path) -> None:
    """A store as subagents with schema 4 wrote it: one run with its prompt in runs.system_prompt."""
    conn = sqlite3.connect(path, isolation_level=None)
    for v in range(4):
        for stmt in _statements(_MIGRATIONS[v]):
            conn.execute(stmt)
    conn.execute("INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, created_at, system_prompt)"
                 " VALUES ('old', 'old', 'old', 'explore', 't', 'completed', 1.0, 'the old prompt')")
    conn.close()


def test_a_prompt_shared_by_many_runs_is_stored_once_and_read_back_whole(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    try:
        for i in range(50):
            s.create_run(rec(f"r{i}"))
        s.create_run(rec("other", system_prompt="another prompt"))
        s.create_run(rec("none", system_prompt=""))
        s.flush()
        assert rows(db, "SELECT count(*), sum(refs) FROM prompts") == [(2, 51)]
        assert rows(db, "SELECT count(*) FROM runs WHERE system_prompt <> ''") == [(0,)]
        got = s.get_run("r7")
        assert got is not None
        assert got.system_prompt == PROMPT
        assert [r.system_prompt for r in s.list_runs() if r.run_id in ("other", "none")] == ["another prompt", ""]
    finally:
        s.close()


def test_deleting_the_last_run_of_a_prompt_deletes_the_prompt(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    try:
        for rid in ("a", "b"):
            s.create_run(rec(rid))
        s.flush()
        s.delete_run("a")
        s.flush()
        assert rows(db, "SELECT refs FROM prompts") == [(1,)]
        b = s.get_run("b")
        assert b is not None
        assert b.system_prompt == PROMPT
        s.delete_run("b")
        s.flush()
        assert rows(db, "SELECT count(*) FROM prompts") == [(0,)]
    finally:
        s.close()


def test_setting_a_runs_system_prompt_later_replaces_the_shared_one(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    try:
        s.create_run(rec("a"))
        s.flush()
        s.update_run("a", {"system_prompt": "changed"})
        s.flush()
        a = s.get_run("a")
        assert a is not None
        assert a.system_prompt == "changed"
    finally:
        s.close()


def test_a_v4_store_is_migrated_and_keeps_its_prompts(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    v4_store(db)
    s = SQLiteStore(db)
    try:
        assert (s.migrated_from, SCHEMA_VERSION) == (4, 7)  # v5 -> v6 adds the team tables, v7 runs.trace
        old = s.get_run("old")
        assert old is not None
        assert old.system_prompt == "the old prompt"
        s.create_run(rec("new"))
        s.flush()
        assert {r.run_id: r.system_prompt for r in s.list_runs()} == {"old": "the old prompt", "new": PROMPT}
        s.delete_run("old")  # a run without a prompt key: nothing to release in prompts
        s.flush()
        assert rows(db, "SELECT refs FROM prompts") == [(1,)]
    finally:
        s.close()
    names = {r[0] for r in rows(db, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"runs_open", "runs_sweep", "prompts_unused"} <= names
    assert not {"runs_status", "runs_owner"} & names


def test_the_queries_on_hot_columns_use_an_index(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    SQLiteStore(db).close()
    conn = sqlite3.connect(db)

    def plan(sql: str, *params: object) -> str:
        return " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))

    try:
        from subagents.store._schema import FINAL_SQL

        assert "INDEX runs_open" in plan(f"SELECT run_id FROM runs WHERE status = ? AND NOT {FINAL_SQL}", "running")
        assert "INDEX runs_parent" in plan("SELECT run_id FROM runs WHERE parent_id = ?", "p")
        assert "INDEX runs_root" in plan("SELECT run_id FROM runs WHERE archived = 0 AND (root_id = ? OR run_id = ?)",
                                         "r", "r")
        assert "SCAN runs" not in plan("SELECT q.id FROM requests q JOIN runs r ON r.run_id = q.run_id "
                                       "WHERE q.done_at IS NULL AND r.owner = ?", "o")
        assert "INDEX prompts_unused" in plan("DELETE FROM prompts WHERE refs <= 0")
        assert "INDEX runs_parent" in plan("SELECT nickname FROM runs WHERE parent_id IS NULL AND agent_type = ?", "x")
    finally:
        conn.close()


def test_listing_open_runs_by_status_still_works(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    try:
        s.create_run(rec("a"))
        s.create_run(rec("b", status="pending_init"))
        s.create_run(rec("c", status="completed"))
        s.flush()
        assert [r.run_id for r in s.list_runs(status="running")] == ["a"]
        assert [r.run_id for r in s.list_runs(status="pending_init")] == ["b"]
        assert [r.run_id for r in s.list_runs(status="completed")] == ["c"]
    finally:
        s.close()
