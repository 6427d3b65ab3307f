"""The memory store packs a finished run's transcript into plain values: it reads back whole, and the garbage
collector stops walking it at its first look."""

from __future__ import annotations

import gc

from subagents.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from subagents.store import MemoryStore, RunRecord

MESSAGES = [
    Message.user("go"),
    Message("assistant", [TextBlock("calling"), ToolUseBlock("t1", "read_file", {"path": "a ü", "lines": [1, 2]}),
                          ToolUseBlock("t2", "glob", {})]),
    Message("user", [ToolResultBlock("t1", "boom", is_error=True), ToolResultBlock("t2", "a.py"), TextBlock("note")]),
    Message.assistant("done"),
]


def finished(store: MemoryStore, rid: str) -> None:
    store.create_run(RunRecord(run_id=rid, agent_id=rid, nickname=rid, agent_type="explore", task="t",
                               status="running"))
    store.append_messages(rid, 0, MESSAGES)
    store.finish_run(rid, {"status": "completed", "ended_at": 1.0}, None)


def test_a_finished_transcript_reads_back_whole_and_from_any_message() -> None:
    store = MemoryStore()
    finished(store, "r1")
    assert store.transcript("r1") == MESSAGES
    assert store.transcript("r1", 2) == MESSAGES[2:]
    assert store.transcript("r1", 9) == []
    got = store.transcript("r1")
    got[1].content[1].arguments["path"] = "changed"  # a reader's copy: the store's stays
    assert store.transcript("r1") == MESSAGES


def test_a_finished_transcript_goes_on_when_the_run_is_resumed() -> None:
    store = MemoryStore()
    finished(store, "r1")
    store.append_messages("r1", 4, [Message.user("more"), Message.assistant("again")])
    assert store.transcript("r1") == [*MESSAGES, Message.user("more"), Message.assistant("again")]


def test_a_packed_transcript_of_plain_values_is_untracked_after_one_collection() -> None:
    store = MemoryStore()
    store.create_run(RunRecord(run_id="r1", agent_id="r1", nickname="r1", agent_type="explore", task="t",
                               status="running"))
    store.append_messages("r1", 0, [Message.user("go"), Message.assistant("done")])
    store.finish_run("r1", {"status": "completed", "ended_at": 1.0}, None)
    gc.collect()
    assert not gc.is_tracked(store.transcripts["r1"])


def test_a_finished_record_and_transcript_with_tool_calls_are_untracked_after_one_young_collection() -> None:
    """Dict fields and tool arguments are kept flat: a nested tuple took the collector a look per level (the
    outer tuple stayed tracked through two more collections, walked by each gen-1 collection)."""
    store = MemoryStore()
    store.create_run(RunRecord(run_id="r1", agent_id="r1", nickname="r1", agent_type="explore", task="t",
                               status="running", limits={"max_turns": 5, "timeout_s": None}))
    store.append_messages("r1", 0, [Message.user("go"), Message("assistant", [
        ToolUseBlock("t1", "read_file", {"path": "a", "offset": 3}), ToolUseBlock("t2", "glob", {})])])
    usage = {"input_tokens": 7, "output_tokens": 3, "cache_read_tokens": 0, "cache_write_tokens": 0}
    store.finish_run("r1", {"status": "completed", "ended_at": 1.0, "usage": usage}, None)
    gc.collect(0)
    assert not gc.is_tracked(store.runs["r1"])
    assert not gc.is_tracked(store.transcripts["r1"])
    rec = store.get_run("r1")
    assert rec is not None
    assert rec.usage == usage
    assert rec.limits == {"max_turns": 5, "timeout_s": None}
    assert rec.status == "completed"
    assert store.transcript("r1")[1].content[0] == ToolUseBlock("t1", "read_file", {"path": "a", "offset": 3})
    store.update_run("r1", {"label": "x", "usage": {"input_tokens": 1}})  # a final run's record changes whole
    rec = store.get_run("r1")
    assert rec is not None
    assert (rec.label, rec.usage, rec.limits) == ("x", {"input_tokens": 1}, {"max_turns": 5, "timeout_s": None})
