"""The memory store gives memory back once the sweeper deleted its runs."""

from __future__ import annotations

import gc
import tracemalloc

from subagents.messages import Message
from subagents.runtime.sweeper import Sweeper
from subagents.store import AnnouncementRecord, MemoryStore, RunRecord


def churn(store: MemoryStore, n: int, tag: str) -> None:
    """``n`` runs created, given a transcript, finished (with a delivered announcement) and swept away."""
    for i in range(n):
        rid = f"{tag}{i}"
        store.create_run(RunRecord(run_id=rid, agent_id=rid, nickname=rid, agent_type="explore", task="t",
                                   cleanup="delete", background=True, parent_id="p", status="running"))
        store.append_messages(rid, 0, [Message.user("go"), Message.assistant("done")])
        store.add_audit(rid, "approval", {"tool": "bash"}, 1.0)
        store.finish_run(rid, {"status": "completed", "ended_at": 1.0},
                         AnnouncementRecord(f"{rid}:1", "p", rid, "done", 1.0))
        store.mark_delivered(f"{rid}:1", 2.0)
    report = Sweeper(store, clock=lambda: 10.0).sweep()
    assert len(report.deleted) == n


def test_the_memory_store_returns_to_its_baseline_after_a_sweep() -> None:
    store = MemoryStore()
    churn(store, 50, "warm")  # the first allocations of every structure
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        churn(store, 10_000, "r")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert store.runs == {}
    assert store.transcripts == {}
    assert store.announcements == {}
    assert after - base < 64 * 1024, f"{after - base} bytes kept after every run was deleted"


def test_shrinking_keeps_what_is_left() -> None:
    store = MemoryStore()
    for i in range(5_000):
        rid = f"r{i}"
        store.create_run(RunRecord(run_id=rid, agent_id=rid, nickname=rid, agent_type="explore", task="t"))
        store.append_messages(rid, 0, [Message.user(rid)])
    for i in range(5_000):
        if i % 100:
            store.delete_run(f"r{i}")
    assert sorted(store.runs) == sorted(f"r{i}" for i in range(0, 5_000, 100))
    assert [store.transcript(f"r{i}")[0].text for i in range(0, 5_000, 100)] == [f"r{i}" for i in range(0, 5_000, 100)]
