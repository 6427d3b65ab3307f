"""``subagents runs``: list, show, tree, tail, wait, cancel, resume, sweep on a seeded SQLite store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from owner_ids import mine
from subagents.cli.main import main
from subagents.messages import Message
from subagents.models import FunctionModel
from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore

DEAD = mine("gone-host:999999999:x")
ROOT = "019ab000-0000-7000-8000-0000aaaa1111"  # version 7: time first, the listed end random
KID = "019ab000-0001-7000-8000-0000bbbb2222"
KID2 = "019ab000-0001-7000-8000-0000bbbb3333"


def rec(run_id: str, nickname: str, **kw: object) -> RunRecord:
    d: dict[str, object] = {"agent_type": "explore", "task": "scan it", "status": "completed", "outcome": "ok",
                            "root_id": ROOT, "owner": DEAD, "created_at": 1.0, "started_at": 1.0, "ended_at": 3.0,
                            "result_text": f"{nickname} says hi", "runs": 1, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=nickname, **d)  # type: ignore[arg-type]


def seed(path: Path) -> None:
    """A finished root, a finished child with a transcript, a child still 'running' whose process is gone."""
    s = SQLiteStore(path)
    s.create_run(rec(ROOT, "general-purpose-ada", agent_type="general-purpose", label="the root"))
    s.create_run(rec(KID, "explore-ada", parent_id=ROOT, depth=1, created_at=2.0, label="docs"))
    s.create_run(rec(KID2, "explore-grace", parent_id=ROOT, depth=1, created_at=2.5, status="running",
                     outcome=None, result_text=None, ended_at=None))
    s.append_messages(KID, 0, [Message.user("scan it"), Message.assistant("explore-ada says hi")])
    s.close()


@pytest.fixture
def db(isolated: Path) -> Path:
    path = isolated / "runs.db"
    seed(path)
    return path


def run(db: Path, *args: str, model: FunctionModel | None = None) -> int:
    return main(["runs", "--store", f"sqlite:///{db}", *args], model=model)


def test_list_and_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(db, "list") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ID", "NICKNAME", "TYPE", "STATUS", "OUTCOME", "D", "AGE", "LABEL"]
    assert [ln.split()[:4] for ln in out[1:]] == [["aaaa1111", "general-purpose-ada", "general-purpose", "completed"],
                                                  ["bbbb2222", "explore-ada", "explore", "completed"],
                                                  ["bbbb3333", "explore-grace", "explore", "running"]]
    assert run(db, "list", "--status", "running", "--json") == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [KID2]


def test_ids_by_prefix_or_nickname_and_clear_refusals(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(db, "show", "explore-ada", "--json") == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == KID
    assert run(db, "show", "aaaa1111") == 0  # the short id a listing shows (the end of the id)
    out = capsys.readouterr().out
    assert "general-purpose-ada says hi" in out
    assert "stats:                 runtime 2.0s" in out
    assert run(db, "show", "019ab000-0000", "--json") == 0  # a unique prefix
    assert json.loads(capsys.readouterr().out)["run_id"] == ROOT
    assert run(db, "show", "019ab000-0001") == 2
    assert capsys.readouterr().err == (
        f"error: '019ab000-0001' matches 2 runs ({KID} (explore-ada), {KID2} (explore-grace)); "
        "give more characters of the id\n")
    assert run(db, "show", "zzzz") == 2
    assert capsys.readouterr().err == ("error: no run matches 'zzzz'; 'subagents runs list --all' shows the runs "
                                       "with their ids and nicknames\n")


def test_tree_and_tail(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(db, "tree", "1111") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["AGENT", "ID", "TIME", "TURNS", "TOKENS", "COST", "LABEL"]
    assert out[1].split() == ["general-purpose-ada", "[general-purpose]", "completed/ok", "aaaa1111", "2.0s", "0",
                              "0/0", "est", "n/a", "the", "root"]
    assert out[2].split() == ["explore-ada", "[explore]", "completed/ok", "bbbb2222", "2.0s", "0", "0/0", "est",
                              "n/a", "docs"]
    # a run still going: its time so far (it started at t=1.0 in this seeded store, so long ago) ends with "+"
    assert re.fullmatch(r"  explore-grace \[explore\] running +bbbb3333 +\d+d\d\dh\+ +0 +0/0 +est n/a", out[3])
    assert out[4] == "total: 3 agents · 2.0s wall · 0 turns · tokens 0/0 (in/out) · est n/a"
    assert run(db, "tail", "explore-ada") == 0
    assert capsys.readouterr().out == ("user: scan it\nassistant: explore-ada says hi\n"
                                       "-- status: completed / ok\n")


def test_wait(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(db, "wait", "explore-ada") == 0
    assert capsys.readouterr().out == "explore-ada completed/ok\n"
    assert run(db, "wait", "explore-grace", "--timeout", "0") == 1
    assert capsys.readouterr().err == "explore-grace is still running after 0.0s\n"


def test_cancel_an_orphan_directly_and_a_live_run_by_request(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(db, "cancel", "explore-ada") == 2
    assert "has already ended (completed); nothing to cancel" in capsys.readouterr().err
    assert run(db, "cancel", "explore-grace") == 0
    assert capsys.readouterr().out == ("Cancelled 1 run: no live process owned explore-grace, so the store was "
                                       "updated directly.\n")
    s = SQLiteStore(db)
    try:
        got = s.get_run(KID2)
        assert got is not None
        assert (got.status, got.outcome) == ("shutdown", "cancelled")
        live = rec("cccc4444-0000-0000-0000-000000000000", "explore-live", status="running", owner=s.owner)
        s.create_run(live)
        s.flush()
        assert run(db, "cancel", "explore-live") == 0  # while its owner (this open store) is alive
    finally:
        s.close()
    assert capsys.readouterr().out.startswith("Cancel requested: the process that runs explore-live (pid ")


def test_resume_an_orphan_here(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = FunctionModel(lambda req: f"again after {len(req.messages)} messages")
    assert run(db, "resume", "explore-ada", "one more time", model=model) == 0
    assert capsys.readouterr().out == "again after 3 messages\n"


def test_sweep(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(db, "sweep") == 0  # the two finished runs ended in 1970: long past archive_after_minutes
    assert capsys.readouterr().out == "Archived 2 runs, deleted 0 runs.\n"
    assert run(db, "list", "--json") == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [KID2]


def stored(db: Path, run_id: str) -> RunRecord:
    s = SQLiteStore(db)
    try:
        got = s.get_run(run_id)
    finally:
        s.close()
    assert got is not None
    return got


def test_wait_and_tail_stop_when_the_runs_process_is_gone(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """explore-grace is 'running' in the store, owned by a process with no lease (killed): both polled forever."""
    gone = ("explore-grace (019ab000-0001-7000-8000-0000bbbb3333) is still marked running, but the process that ran "
            "it is gone (killed before it finished); the next runtime that opens this store resumes it (e.g. any "
            "'subagents run'), or cancel it with 'subagents runs cancel ID'\n")
    assert run(db, "wait", "explore-grace") == 1
    assert capsys.readouterr().err == gone
    assert run(db, "tail", "explore-grace") == 1
    assert capsys.readouterr().err == gone


def test_resume_leaves_the_orphans_it_took_over_resumable(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Opening the store to resume explore-ada also takes over explore-grace (an orphan, still running here when
    the command ends): it is left interrupted — resumable — not cancelled ("closed before it finished")."""
    import asyncio

    from subagents.models import ModelRequest, ModelResponse

    async def model(req: ModelRequest) -> ModelResponse:
        if req.agent.id == KID2:
            await asyncio.sleep(30)
        return ModelResponse(f"again after {len(req.messages)} messages")

    assert run(db, "resume", "explore-ada", "one more time", model=FunctionModel(model)) == 0
    assert capsys.readouterr().out == "again after 3 messages\n"
    got = stored(db, KID2)
    assert got.outcome == "interrupted", (got.status, got.outcome, got.error)
    assert "resume it with: subagents runs resume" in (got.error or "")


def test_resume_with_an_empty_message_is_refused_before_anything_opens(db: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert run(db, "resume", "explore-ada", "   ") == 2
    assert capsys.readouterr().err == "error: the message is empty; say what the resumed run should do\n"
    got = stored(db, KID2)
    assert got.status == "running"  # no runtime opened: the orphan was not taken over (nor cancelled)


def test_resume_that_loses_a_race_with_another_process_says_so(db: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `runs resume` of one finished run at once: the one that finds it started again was told, in the Python
    API's words, to "use send_input", with exit 1 (a failed run) instead of 2."""
    from subagents import Runtime, SpawnError, Status

    async def started_elsewhere(self: Runtime, agent_id: str, message: str, **kw: object) -> None:
        raise SpawnError(f"agent explore-ada ({agent_id}) is still pending_init; use send_input to give it more "
                         "instructions, or wait for it")

    monkeypatch.setattr(Runtime, "resume", started_elsewhere)
    monkeypatch.setattr(Runtime, "status", lambda self, agent_id: Status.PENDING_INIT)
    assert run(db, "resume", "explore-ada", "more", model=FunctionModel(lambda req: "x")) == 2
    assert capsys.readouterr().err == (f"error: run explore-ada ({KID}) was started again by another process just "
                                       "now; follow it with 'subagents runs tail', resume it once it ends\n")


def test_a_resume_refused_by_a_race_leaves_the_orphans_it_took_over_resumable(
        db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The loser of a race took over explore-grace (an orphan) as it opened the store: it is left interrupted —
    resumable — as after a resume that ran, not cancelled by the refusal."""
    import asyncio

    from subagents import Runtime, SpawnError, Status
    from subagents.models import ModelRequest, ModelResponse

    async def started_elsewhere(self: Runtime, agent_id: str, message: str, **kw: object) -> None:
        await asyncio.sleep(0.05)  # (the orphan is running by then)
        raise SpawnError(f"agent explore-ada ({agent_id}) is still pending_init; use send_input")

    async def model(req: ModelRequest) -> ModelResponse:
        await asyncio.sleep(30)
        return ModelResponse("never")

    real_status = Runtime.status
    monkeypatch.setattr(Runtime, "resume", started_elsewhere)
    monkeypatch.setattr(Runtime, "status", lambda self, agent_id: Status.PENDING_INIT if agent_id == KID
                        else real_status(self, agent_id))
    assert run(db, "resume", "explore-ada", "more", model=FunctionModel(model)) == 2
    assert "was started again by another process" in capsys.readouterr().err
    got = stored(db, KID2)
    assert got.outcome == "interrupted", (got.status, got.outcome, got.error)
