"""The writer process folds the batches: the runtime's process only hands over plain operations."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import StoreError
from subagents.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from subagents.runtime.status import Status
from subagents.store import AnnouncementRecord, RunRecord
from subagents.store.sqlite import SQLiteStore


def rec(run_id: str, **kw: Any) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=run_id, agent_type="explore", task="t", **kw)


def test_no_batch_is_folded_or_encoded_in_the_calling_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from subagents.store import _fold

    def refuse(*_: Any) -> Any:
        raise AssertionError("a SQLite batch was prepared in the calling process")

    monkeypatch.setattr(_fold.Plan, "apply", refuse)
    monkeypatch.setattr(_fold, "prepare", refuse)
    monkeypatch.setattr(_fold, "message_json", refuse)
    s = SQLiteStore(tmp_path / "state.db")
    try:
        s.create_run(rec("p", system_prompt="be brief", usage={"input_tokens": 3}, limits={"max_turns": 4}))
        s.create_run(rec("c", parent_id="p", background=True))
        s.update_run("c", {"status": Status.RUNNING, "turns": 1})  # (a str enum goes as its plain value)
        s.append_messages("c", 0, [Message.user("hi"),
                                   Message("assistant", [TextBlock("t"), ToolUseBlock("u1", "grep", {"q": [1, None]})]),
                                   Message("user", [ToolResultBlock("u1", "bad", is_error=True)])])
        s.finish_run("c", {"status": "completed", "result_text": "done"},
                      AnnouncementRecord("a1", "p", "c", "done", 1.0))
        s.flush()
        c = s.get_run("c")
        assert c is not None
        assert (c.status, c.turns, c.result_text, c.background) == ("completed", 1, "done", True)
        p = s.get_run("p")
        assert p is not None
        assert (p.system_prompt, p.usage, p.limits) == ("be brief", {"input_tokens": 3}, {"max_turns": 4})
        t = s.transcript("c")
        assert [m.role for m in t] == ["user", "assistant", "user"]
        assert t[1].content[1] == ToolUseBlock("u1", "grep", {"q": [1, None]})
        assert t[2].content[0] == ToolResultBlock("u1", "bad", is_error=True)
        assert [a.id for a in s.pending_announcements("p")] == ["a1"]
    finally:
        s.close()


def test_a_value_json_cannot_encode_fails_the_store_and_keeps_the_batches_before_it(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    s = SQLiteStore(db)
    try:
        s.create_run(rec("kept"))
        s.hurry()  # its own batch
        s.update_run("kept", {"usage": {"input_tokens": {1, 2}}})  # a set: no JSON for it
        with pytest.raises(StoreError) as e:
            s.flush()
        assert "preparing a write" in str(e.value)
        assert "TypeError" in str(e.value)
        assert "set" in str(e.value)
        with pytest.raises(StoreError):
            s.create_run(rec("later"))
    finally:
        with pytest.raises(StoreError):
            s.close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT run_id, usage FROM runs").fetchall() == [("kept", "{}")]
    finally:
        conn.close()
