"""Schema 6: the team tables; a v5 store is migrated in place and keeps its runs; the team queries use
their partial indexes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from subagents.store._schema import _MIGRATIONS, SCHEMA_VERSION, _statements
from subagents.store.base import RunRecord
from subagents.store.sqlite import SQLiteStore
from subagents.teams._sql import _CLAIM
from subagents.teams.sqlite import SQLiteTeamStore

TEAM_TABLES = {"teams", "team_members", "tasks", "task_deps", "team_mail"}
TEAM_INDEXES = {"tasks_claimable", "tasks_owned", "team_mail_unread"}


def v5_store(path: Path) -> None:
    """A store as subagents with schema 5 wrote it: one finished run with a shared prompt and a transcript."""
    conn = sqlite3.connect(path, isolation_level=None)
    for v in range(5):
        for stmt in _statements(_MIGRATIONS[v]):
            conn.execute(stmt)
    conn.execute("INSERT INTO prompts (key, text, refs) VALUES ('k', 'the prompt', 1)")
    conn.execute("INSERT INTO runs (run_id, agent_id, nickname, agent_type, task, status, created_at, prompt_key)"
                 " VALUES ('old', 'old', 'old', 'explore', 't', 'completed', 1.0, 'k')")
    conn.execute("INSERT INTO transcript VALUES ('old', 0, ?)",
                 ('{"role":"user","content":[{"kind":"text","text":"hi"}]}',))
    conn.close()


def names(path: Path, kind: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))}
    finally:
        conn.close()


def test_a_v5_store_is_migrated_to_v6_and_keeps_its_runs(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    v5_store(db)
    assert not TEAM_TABLES & names(db, "table")
    s = SQLiteStore(db)
    try:
        assert (s.migrated_from, SCHEMA_VERSION) == (5, 7)
        old = s.get_run("old")
        assert old is not None
        assert (old.status, old.system_prompt) == ("completed", "the prompt")
        assert [m.text for m in s.transcript("old")] == ["hi"]
    finally:
        s.close()
    assert names(db, "table") >= TEAM_TABLES
    assert names(db, "index") >= TEAM_INDEXES


@pytest.mark.parametrize("version", [1, 5])
def test_the_team_store_opens_an_older_store_itself(tmp_path: Path, version: int) -> None:
    """Opened first (before any run store), the team store migrates the file too."""
    db = tmp_path / "state.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for v in range(version):
        for stmt in _statements(_MIGRATIONS[v]):
            conn.execute(stmt)
    conn.close()
    ts = SQLiteTeamStore(db)
    try:
        ts.create_team("t", "", 1.0)
        assert ts.create_task("t", "one").id == 1
    finally:
        ts.close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_the_team_queries_use_their_indexes(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    SQLiteStore(db).close()
    conn = sqlite3.connect(db)

    def plan(sql: str, *params: object) -> str:
        return " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))

    try:
        next_plan = plan(SQLiteTeamStore.CLAIM_NEXT, "a", 1.0, "t", "t")
        assert "INDEX tasks_claimable" in next_plan  # only pending, unowned tasks are looked at
        assert "SEARCH d USING PRIMARY KEY (team=? AND task=?)" in next_plan  # a task's blockers, by key
        assert "SCAN" not in next_plan
        assert "SCAN" not in plan(_CLAIM, "a", 1.0, "t", 1)
        assert "INDEX team_mail_unread" in plan("SELECT seq FROM team_mail INDEXED BY team_mail_unread "
                                                "WHERE team = ? AND recipient = ? AND read = 0 ORDER BY seq", "t", "a")
        assert "INDEX tasks_owned" in plan("SELECT id FROM tasks INDEXED BY tasks_owned WHERE team = ? AND owner = ? "
                                           "AND status = 'in_progress'", "t", "a")
    finally:
        conn.close()


def test_a_v6_store_gets_the_trace_column_and_keeps_its_runs(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    s.create_run(RunRecord("old", "old", "n", "general-purpose", "t"))
    s.close()
    conn = sqlite3.connect(db)  # make it a v6 file again: no trace column
    conn.execute("ALTER TABLE runs DROP COLUMN trace")
    conn.execute("PRAGMA user_version = 6")
    conn.commit()
    conn.close()
    s = SQLiteStore(db)
    try:
        assert s.migrated_from == 6
        old = s.get_run("old")
        assert old is not None
        assert old.trace == {}
        s.update_run("old", {"trace": {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}})
        s.flush()
        again = s.get_run("old")
        assert again is not None
        assert again.trace["traceparent"].startswith("00-aaa")
    finally:
        s.close()
