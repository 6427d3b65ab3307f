"""Restart recovery: a store left by a dead process is taken over by the next Runtime."""

from __future__ import annotations

from pathlib import Path

from owner_ids import mine
from subagents import Runtime
from subagents.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.recovery import INTERRUPTED_RUN, INTERRUPTED_TOOL
from subagents.store import AnnouncementRecord, RunRecord
from subagents.store.sqlite import SQLiteStore

DEAD = mine("vm-that-is-gone:999999999:deadbeef")  # no such pid: the owner is dead


def seed(path: Path, records: list[RunRecord], transcripts: dict[str, list[Message]],
         anns: list[AnnouncementRecord] = ()) -> None:  # type: ignore[assignment]
    """Write what a crashed process would have left behind."""
    s = SQLiteStore(path)
    try:
        for r in records:
            s.create_run(r)
        for run_id, msgs in transcripts.items():
            s.append_messages(run_id, 0, msgs)
        for a in anns:
            s.finish_run(a.child_id, {}, a)
    finally:
        s.close()


def run(run_id: str, **kw: object) -> RunRecord:
    d: dict[str, object] = {"nickname": f"nick-{run_id}", "agent_type": "general-purpose", "task": "do it",
                            "status": "running", "owner": DEAD, "root_id": run_id, "runs": 1, "created_at": 1.0, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, **d)  # type: ignore[arg-type]


def rt_for(path: Path, fn: object, **kw: object) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=path.parent, store=f"sqlite:///{path}",  # type: ignore[arg-type]
                   builtin_tools=False, **kw)  # type: ignore[arg-type]


async def test_resume_after_restart_keeps_the_whole_conversation(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    history = [Message.user("count to three"), Message.assistant("one"), Message.user("go on")]
    seed(db, [run("r1")], {"r1": history})
    seen: list[list[Message]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(list(req.messages))
        return ModelResponse(text="two, three")

    async with rt_for(db, fn) as rt:
        done = await rt.wait(["r1"], timeout=10)
        assert done["r1"].text == "two, three"
        assert seen == [history]
    s = SQLiteStore(db)
    try:
        assert s.transcript("r1") == [*history, Message.assistant("two, three")]
        got = s.get_run("r1")
        assert got is not None
        assert (got.status, got.outcome, got.result_text, got.runs) == ("completed", "ok", "two, three", 2)
    finally:
        s.close()


async def test_an_interrupted_tool_call_is_reported_not_rerun(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    call = Message("assistant", [TextBlock("writing"), ToolUseBlock("t1", "charge_card", {"usd": 5})])
    seed(db, [run("r1")], {"r1": [Message.user("pay"), call]})
    seen: list[Message] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(req.messages[-1])
        return ModelResponse(text="I will check whether the charge went through")

    async with rt_for(db, fn) as rt:
        await rt.wait(["r1"], timeout=10)
    assert seen == [Message("user", [ToolResultBlock("t1", INTERRUPTED_TOOL, is_error=True)])]


async def test_mark_interrupted_keeps_the_partial_result_and_announces_it(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    seed(db, [run("root", status="completed", outcome="ok", result_text="done"),
              run("kid", parent_id="root", root_id="root", depth=1, background=True, label="scan")],
         {"kid": [Message.user("scan"), Message.assistant("half of it"),
                  Message("assistant", [ToolUseBlock("t", "nap", {})])]})
    rt = rt_for(db, lambda req: "unused")
    rt.settings.on_restart = "mark_interrupted"
    async with rt:
        assert rt.status("kid") == "errored"
        r = rt.result("kid")
        assert r is not None
        assert (r.outcome, r.text, r.truncated, r.error) == ("interrupted", "half of it", True, INTERRUPTED_RUN)
        root = rt.manager.find("root")
        assert root is not None
        assert [a.id for a in root.followups] == ["kid:1"]  # delivered when the root runs again


async def test_undelivered_announcements_reach_a_resumed_parent_once(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    ann = AnnouncementRecord("kid:1", "root", "kid", "<subagent-notification>kid found 42</subagent-notification>",
                             2.0)
    seed(db, [run("root"),
              run("kid", parent_id="root", root_id="root", depth=1, background=True, status="completed",
                  outcome="ok", result_text="42")],
         {"root": [Message.user("find it"), Message("assistant", [ToolUseBlock("n1", "nap", {})])]}, [ann])
    seen: list[list[Message]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append(list(req.messages))
        return ModelResponse(text="42 it is")

    async with rt_for(db, fn) as rt:
        await rt.wait(["root"], timeout=10)
    assert seen[0][-1] == Message("user", [ToolResultBlock("n1", INTERRUPTED_TOOL, is_error=True),
                                           TextBlock(ann.text)])
    s = SQLiteStore(db)
    try:
        assert s.pending_announcements() == []
        assert sum(ann.text in m.text for m in s.transcript("root")) == 1
    finally:
        s.close()


async def test_a_transcript_that_holds_the_answer_is_finished_with_it(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    seed(db, [run("r1")], {"r1": [Message.user("q"), Message.assistant("the answer")]})
    calls: list[str] = []
    async with rt_for(db, lambda req: calls.append("x") or "again") as rt:
        r = rt.result("r1")
        assert r is not None
        assert (r.status, r.text) == ("completed", "the answer")
    assert calls == []


async def test_restore_runs_once_and_leaves_live_owners_alone(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    seed(db, [run("dead")], {"dead": [Message.user("x")]})
    live = SQLiteStore(db)  # another runtime's store, open: it holds a lease on the run it owns
    try:
        live.create_run(run("mine", owner=live.owner))
        live.flush()
        async with rt_for(db, lambda req: "ok") as rt:
            assert await rt.restore() is None  # already done by __aenter__
            assert rt.manager.find("mine") is None
            await rt.wait(["dead"], timeout=10)
            assert rt.status("dead") == "completed"
            assert rt.status("mine") == "running"  # another live runtime's run: not ours to touch
    finally:
        live.close()


async def test_restore_recreates_only_open_runs_and_loads_finished_children_on_demand(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    root = run("root", agent_type="general-purpose")
    done = [run(f"done{i}", parent_id="root", root_id="root", depth=1, status="completed", outcome="ok",
                result_text=f"result {i}", created_at=2.0 + i) for i in range(3)]
    spawn_turn = [Message.user("fan out"), Message.assistant("spawned three; now I wait")]
    seed(db, [root, *done], {"root": [*spawn_turn, Message.user("continue")]})
    waited: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if not req.messages[-1].tool_results:
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        waited.append(req.messages[-1].tool_results[0].content)
        return ModelResponse(text="all collected")

    async with rt_for(db, fn) as rt:
        assert set(rt.manager.nodes) == {"root"}  # the finished children were not re-created at restore
        res = await rt.wait(["root"], timeout=10)
        assert res["root"].text == "all collected"
        assert {"done0", "done1", "done2"} <= set(rt.manager.nodes)  # loaded when the parent waited
    assert waited[0].startswith("[wait: 3 finished, 0 still running; timed_out=false]")
    assert all(f"result {i}" in waited[0] for i in range(3))


async def test_mark_interrupted_names_the_worktree_a_killed_child_left(tmp_path: Path) -> None:
    """A child in ``isolation: worktree`` killed with its process: its worktree and branch (with its changes) stay,
    and the interrupted result says where (it said nothing)."""
    db, wt = tmp_path / "state.db", tmp_path / "wt"
    wt.mkdir()
    worktree = {"repo": str(tmp_path), "path": str(wt), "branch": "subagents/kid", "root": str(wt), "base": "abc"}
    seed(db, [run("root", status="completed", outcome="ok", result_text="done"),
              run("kid", parent_id="root", root_id="root", depth=1, background=True, worktree=worktree)],
         {"kid": [Message.user("edit"), Message.assistant("half of it")]})
    rt = rt_for(db, lambda req: "unused")
    rt.settings.on_restart = "mark_interrupted"
    async with rt:
        r = rt.result("kid")
    assert r is not None
    assert r.text.startswith(f"half of it\n\n[worktree left as it was: {wt} (branch subagents/kid)")
