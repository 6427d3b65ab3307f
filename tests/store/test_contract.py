"""The Store contract, checked against MemoryStore and SQLiteStore alike."""

from __future__ import annotations

import threading

import pytest

from subagents.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from subagents.store import AnnouncementRecord, RunRecord, Store


def rec(run_id: str, **kw: object) -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"nick-{run_id}", agent_type="explore",
                     task=f"task {run_id}", **kw)  # type: ignore[arg-type]


def test_a_created_run_reads_back_whole(store: Store) -> None:
    r = rec("r1", parent_id="p", root_id="p", depth=1, label="scan", usage={"input_tokens": 3},
            limits={"max_turns": 5}, background=True, created_at=10.0, system_prompt="sys ü")
    store.create_run(r)
    store.flush()
    got = store.get_run("r1")
    assert got == rec("r1", parent_id="p", root_id="p", depth=1, label="scan", usage={"input_tokens": 3},
                      limits={"max_turns": 5}, background=True, created_at=10.0, system_prompt="sys ü",
                      owner=store.owner)
    assert store.get_run("nope") is None


def test_updates_apply_in_call_order(store: Store) -> None:
    store.create_run(rec("r1"))
    store.update_run("r1", {"status": "running", "started_at": 1.0})
    store.update_run("r1", {"status": "completed", "truncated": True, "usage": {"output_tokens": 2}})
    store.update_run("missing", {"status": "running"})  # no record: nothing happens
    store.flush()
    got = store.get_run("r1")
    assert got is not None
    assert (got.status, got.started_at, got.truncated, got.usage) == ("completed", 1.0, True, {"output_tokens": 2})
    assert store.get_run("missing") is None


def test_transcript_appends_message_by_message_and_rewrites_a_tail(store: Store) -> None:
    store.create_run(rec("r1"))
    m0 = Message.user("hello")
    m1 = Message("assistant", [TextBlock("calling"), ToolUseBlock("t1", "read_file", {"path": "a ü"})])
    m2 = Message("user", [ToolResultBlock("t1", "boom", is_error=True)])
    store.append_messages("r1", 0, [m0])
    store.append_messages("r1", 1, [m1, m2])
    store.flush()
    assert store.transcript("r1") == [m0, m1, m2]
    store.append_messages("r1", 1, [Message.assistant("again")])
    store.flush()
    assert store.transcript("r1") == [m0, Message.assistant("again")]
    assert store.transcript("other") == []


def test_finish_writes_the_announcement_with_the_status_and_is_idempotent(store: Store) -> None:
    store.create_run(rec("c1", parent_id="p1", background=True))
    ann = AnnouncementRecord("c1:1", "p1", "c1", "child done", 5.0)
    store.finish_run("c1", {"status": "completed", "outcome": "ok", "result_text": "done"}, ann)
    store.finish_run("c1", {"status": "completed"}, AnnouncementRecord("c1:1", "p1", "c1", "dup", 6.0))
    store.flush()
    got = store.get_run("c1")
    assert got is not None
    assert (got.status, got.outcome, got.result_text) == ("completed", "ok", "done")
    assert store.pending_announcements() == [AnnouncementRecord("c1:1", "p1", "c1", "child done", 5.0)]
    assert store.pending_announcements("p1") == store.pending_announcements()
    assert store.pending_announcements("p2") == []


def test_mark_delivered_is_idempotent_by_id(store: Store) -> None:
    store.create_run(rec("c1", parent_id="p1", background=True))
    store.finish_run("c1", {"status": "completed"}, AnnouncementRecord("c1:1", "p1", "c1", "t", 5.0))
    store.mark_delivered("c1:1", 7.0)
    store.mark_delivered("c1:1", 9.0)
    store.mark_delivered("unknown:1", 9.0)
    store.flush()
    assert store.pending_announcements() == []
    assert store.announcements_of(child_id="c1") == [AnnouncementRecord("c1:1", "p1", "c1", "t", 5.0, 7.0)]


def test_an_append_can_carry_the_delivery_of_announcements(store: Store) -> None:
    store.create_run(rec("p1"))
    store.create_run(rec("c1", parent_id="p1", background=True))
    store.finish_run("c1", {"status": "completed"}, AnnouncementRecord("c1:1", "p1", "c1", "t", 5.0))
    store.flush()
    store.append_messages("p1", 0, [Message.user("t")], ["c1:1"], 8.0)
    store.flush()
    assert store.announcements_of(parent_id="p1")[0].delivered_at == 8.0
    assert store.transcript("p1") == [Message.user("t")]


def test_list_filters_by_status_root_and_archive(store: Store) -> None:
    store.create_run(rec("a", root_id="a", created_at=1.0))
    store.create_run(rec("b", root_id="a", parent_id="a", created_at=2.0, status="running"))
    store.create_run(rec("c", root_id="c", created_at=3.0, archived=True))
    store.flush()
    assert [r.run_id for r in store.list_runs()] == ["a", "b"]
    assert [r.run_id for r in store.list_runs(include_archived=True)] == ["a", "b", "c"]
    assert [r.run_id for r in store.list_runs(status="running")] == ["b"]
    assert [r.run_id for r in store.list_runs(include_archived=True, root_id="a")] == ["a", "b"]


def test_transcript_from_an_entry_on(store: Store) -> None:
    store.create_run(rec("r1"))
    msgs = [Message.user("task"), Message.assistant("one"), Message.assistant("two")]
    store.append_messages("r1", 0, msgs)
    store.flush()
    assert store.transcript("r1", 1) == msgs[1:]
    assert store.transcript("r1", start=3) == []
    assert store.transcript("other", 1) == []
    store.finish_run("r1", {"status": "completed"}, None)  # a finished run's transcript may be kept packed
    store.flush()
    assert store.transcript("r1", 2) == msgs[2:]
    assert store.transcript("r1") == msgs


def test_delete_removes_record_transcript_and_delivered_announcements(store: Store) -> None:
    store.create_run(rec("c1", parent_id="p1", background=True))
    store.append_messages("c1", 0, [Message.user("x")])
    store.finish_run("c1", {"status": "completed"}, AnnouncementRecord("c1:1", "p1", "c1", "t", 5.0))
    store.mark_delivered("c1:1", 6.0)
    store.delete_run("c1")
    store.flush()
    assert (store.get_run("c1"), store.transcript("c1"), store.announcements_of(child_id="c1")) == (None, [], [])


def test_cleanup_candidates(store: Store) -> None:
    store.create_run(rec("run", status="running"))
    store.create_run(rec("new", status="completed"))
    store.create_run(rec("due", status="completed", archive_at=5.0))
    store.create_run(rec("later", status="completed", archive_at=50.0))
    store.create_run(rec("gone", status="errored", cleanup="delete", archive_at=50.0))
    store.create_run(rec("old", status="completed", archived=True))
    store.flush()
    assert [r.run_id for r in store.cleanup_candidates(10.0)] == ["new", "due", "gone"]


def test_requests_go_to_the_owner_once(store: Store) -> None:
    store.create_run(rec("r1", status="running"))
    store.create_run(rec("r2", status="running", owner="someone-else"))
    store.flush()
    store.add_request("r1", "cancel", "", 1.0)
    store.add_request("r2", "cancel", "", 1.0)
    store.flush()
    got = store.take_requests(store.owner, 2.0)
    assert [(q.run_id, q.kind, q.message) for q in got] == [("r1", "cancel", "")]
    store.flush()
    assert store.take_requests(store.owner, 3.0) == []


def test_leases(store: Store) -> None:
    assert store.lease("x") is None
    store.renew_lease("x", 4.0, 34.0, "proc")
    store.renew_lease("x", 5.0, 35.0, "proc")
    store.flush()
    got = store.lease("x")
    assert got is not None
    assert (got.owner, got.renewed_at, got.expires_at, got.process) == ("x", 5.0, 35.0, "proc")
    store.release_lease("x")
    store.flush()
    assert store.lease("x") is None


async def test_room_returns_at_once_when_the_store_is_not_behind(store: Store) -> None:
    store.create_run(rec("r1"))
    await store.room()


def test_on_commit_runs_after_the_writes_before_it(store: Store) -> None:
    seen: list[str | None] = []
    done = threading.Event()
    store.create_run(rec("r1", status="running"))

    def committed() -> None:
        r = store.get_run("r1")
        seen.append(None if r is None else r.status)
        done.set()

    if store.on_commit(committed):
        assert done.wait(5)
        assert seen == ["running"]
    else:
        assert seen == []  # nothing to wait for: the memory store is "durable" at once


@pytest.mark.parametrize("field", ["run_id", "nope"])
def test_unknown_fields_are_refused(store: Store, field: str) -> None:
    from subagents.exceptions import StoreError

    with pytest.raises(StoreError) as e:
        store.update_run("r1", {field: 1})
    assert str(e.value) == f"unknown run record field {field!r}; the fields are those of RunRecord"


def test_audit_entries_read_back_in_order_and_go_with_a_deleted_run(store: Store) -> None:
    store.create_run(rec("r1", permission_mode="plan"))
    store.create_run(rec("r2"))
    store.add_audit("r1", "approval", {"tool": "bash", "decision": "allowed once", "by": "approver"}, 1.0)
    store.add_audit("r1", "hook_error", {"event": "PreToolUse", "message": "exit 127"}, 2.0)
    store.add_audit("r2", "denied", {"tool": "write_file", "reason": "plan"}, 3.0)
    store.flush()
    assert [(a.kind, a.at, a.data) for a in store.audit_of("r1")] == [
        ("approval", 1.0, {"tool": "bash", "decision": "allowed once", "by": "approver"}),
        ("hook_error", 2.0, {"event": "PreToolUse", "message": "exit 127"})]
    assert store.get_run("r1").permission_mode == "plan"  # type: ignore[union-attr]
    store.delete_run("r1")
    store.flush()
    assert store.audit_of("r1") == []
    assert [a.kind for a in store.audit_of("r2")] == ["denied"]


def test_root_nicknames_are_those_of_the_roots_of_a_type(store: Store) -> None:
    def run(run_id: str, nickname: str, agent_type: str = "explore", **kw: object) -> RunRecord:
        return RunRecord(run_id=run_id, agent_id=run_id, nickname=nickname, agent_type=agent_type, task="t",
                         **kw)  # type: ignore[arg-type]

    store.create_run(run("a", "explore-ada"))
    store.create_run(run("b", "explore-alan", archived=True))
    store.create_run(run("c", "explore-grace", parent_id="a"))
    store.create_run(run("d", "plan-ada", agent_type="plan"))
    store.flush()
    assert store.root_nicknames("explore") == {"explore-ada", "explore-alan"}
    assert store.root_nicknames("verify") == set()
