"""``subagents team list|show``: read a store a real scripted team run left (lead + 2 teammates), never make one."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.cli.main import main
from subagents.cli.team_cmd import board_lines
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store.sqlite import SQLiteStore
from subagents.teams import open_team_store
from subagents.teams.model import MemberRecord, MemberStatus, TaskRecord, TaskStatus


def script(req: ModelRequest) -> ModelResponse:
    """The lead makes team ``crew`` (3 tasks, #3 after #1) and 2 teammates; each does one task and reports."""
    n = sum(1 for m in req.messages if m.role == "assistant")
    last = req.messages[-1]
    if "team_create" in req.tool_names:  # the lead
        if n == 0:
            return ModelResponse(tool_calls=[ToolCall("team_create", {"name": "crew", "description": "count things"})])
        if n == 1:
            return ModelResponse(tool_calls=[
                ToolCall("task_create", {"subject": "count the .py lines"}),
                ToolCall("task_create", {"subject": "count the .md lines"}),
                ToolCall("task_create", {"subject": "sum the counts", "blocked_by": [1]})])
        if n == 2:
            return ModelResponse(tool_calls=[
                ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "take a task", "team": "crew",
                                         "name": name}) for name in ("ann", "bob")])
        if n == 3:
            return ModelResponse(tool_calls=[ToolCall("broadcast", {"text": "thanks, all"})])
        return ModelResponse(text="the lead is done")
    if n == 0:
        return ModelResponse(tool_calls=[ToolCall("task_claim", {"task_id": 1 if "ann" in last.text else 2})])
    if n == 1 and last.tool_results and last.tool_results[0].content.startswith("you own #"):
        tid = int(last.tool_results[0].content.split("#")[1].split(" ")[0])
        return ModelResponse(tool_calls=[
            ToolCall("task_update", {"task_id": tid, "status": "completed", "note": f"{tid * 10} lines"}),
            ToolCall("send_message", {"to": "lead", "text": f"task {tid}: {tid * 10} lines\nsecond line"})])
    return ModelResponse(text="my part is done")


@pytest.fixture
def project(isolated: Path) -> Path:
    """The project's store after one real run: team ``crew`` (2 shut down teammates, tasks 1-2 done, 3 pending)."""
    db = isolated / ".subagents" / "state.db"

    async def go() -> None:
        async with Runtime(model=FunctionModel(script), workdir=isolated, store=f"sqlite:///{db}") as rt:
            r = await asyncio.wait_for(rt.run("split the work", agent="coordinator"), 20)
            assert r.ok, r.error

    asyncio.run(go())
    return isolated


def team(*args: str) -> int:
    return main(["team", "--store", "sqlite:///.subagents/state.db", *args])


def test_list(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert team("list") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "LEAD", "TASKS", "AGE", "MEMBERS"]
    assert out[1].split()[:3] == ["crew", "coordinator-ada", "2/3"]
    assert out[1].endswith("2 (2 shut down)")
    assert team("list", "--json") == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["name"] == "crew"
    assert row["description"] == "count things"
    assert row["lead"]["nickname"] == "coordinator-ada"
    assert (row["members"], row["members_by_status"]) == (2, {"shut_down": 2})
    assert (row["tasks_completed"], row["tasks_total"]) == (2, 3)


def test_show_draws_members_board_and_messages(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert team("show", "crew") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "team crew — count things"
    assert lines[1].startswith("lead: coordinator-ada (")
    assert "2 teammates · 2/3 tasks completed" in lines[1]
    members = [ln.split() for ln in lines[3:6]]
    assert members[0][:5] == ["NAME", "STATUS", "TYPE", "RUN", "MODE"]
    assert [m[:3] for m in members[1:]] == [["ann", "shut_down", "general-purpose"],
                                           ["bob", "shut_down", "general-purpose"]]
    assert all(len(m[3]) == 8 for m in members[1:])  # the short run id, as `runs list` shows it
    assert "PENDING (1)" in out
    assert "IN PROGRESS (0)" in out
    assert "COMPLETED (2)" in out
    assert "#3 sum the counts" in out
    assert "after #1" in out
    assert "#1 count the .py lines" in out
    assert "@ann" in out
    assert "= 10 lines" in out
    assert "  ann -> lead: task 1: 10 lines second line" in lines  # one line per message
    assert "  lead -> ann,bob [broadcast]: thanks, all" in lines  # a broadcast once, to all its recipients
    assert any(ln.startswith("  ann -> lead [idle]: ann is idle.") for ln in lines)
    assert all(len(ln) <= 100 for ln in lines)


def test_show_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert team("show", "crew", "--json", "--messages", "3") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["name"] == "crew"
    assert doc["lead"]["nickname"] == "coordinator-ada"
    assert [(m["name"], m["status"], m["agent_type"]) for m in doc["members"]] == [
        ("ann", "shut_down", "general-purpose"), ("bob", "shut_down", "general-purpose")]
    assert [(t["id"], t["status"], t["owner"], t["blocked_by"]) for t in doc["tasks"]] == [
        (1, "completed", "ann", []), (2, "completed", "bob", []), (3, "pending", None, [1])]
    assert len(doc["messages"]) == 3
    assert [m["seq"] for m in doc["messages"]] == sorted(m["seq"] for m in doc["messages"])


def test_an_in_progress_task_is_in_its_column(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = SQLiteStore(project / ".subagents" / "state.db")
    try:
        open_team_store(store).claim("crew", 3, "lead", time.time())
    finally:
        store.close()
    assert team("show", "crew") == 0
    out = capsys.readouterr().out
    assert "PENDING (0)" in out
    assert "IN PROGRESS (1)" in out
    header = next(ln for ln in out.splitlines() if ln.startswith("PENDING"))
    card = next(ln for ln in out.splitlines() if "#3 sum the counts" in ln)
    assert card.index("#3") == header.index("IN PROGRESS")


def test_unknown_team_lists_the_teams(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert team("show", "nope") == 2
    err = capsys.readouterr().err
    assert "no team named 'nope'" in err
    assert "(teams: crew)" in err
    assert team("show", "nope", "--json") == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "error"
    assert doc["exit_code"] == 2
    assert "(teams: crew)" in doc["message"]


def test_no_store_is_said_and_none_is_made(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert team("list") == 0
    assert "No teams: there is no run store yet" in capsys.readouterr().out
    assert team("list", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []
    assert team("show", "crew") == 2
    assert "there is no run store yet" in capsys.readouterr().err
    assert team("show", "crew", "--json") == 2
    assert json.loads(capsys.readouterr().out)["exit_code"] == 2
    assert not (isolated / ".subagents").exists()


def test_help() -> None:
    assert main(["team", "--help"]) == 0
    assert main(["team", "show", "--help"]) == 0


def test_board_fits_its_width() -> None:
    tasks = [TaskRecord("t", i, "a rather long subject that will not fit in one narrow column " * 2,
                        status=s, owner="someone" if s is not TaskStatus.PENDING else None, blocked_by=(1, 2),
                        note="a note " * 20) for i, s in enumerate(TaskStatus, 1)]
    for width in (60, 100, 140):
        lines = board_lines(tasks, width)
        assert all(len(ln) <= width for ln in lines)
        assert lines[0].split("   ")[0].startswith("PENDING (1)")


def test_the_board_is_measured_in_terminal_columns() -> None:
    """East Asian wide characters take two columns: cut by characters, lines reached 180 columns."""
    from unicodedata import east_asian_width

    from subagents.teams.model import TaskRecord, TaskStatus

    def cols(s: str) -> int:
        return sum(2 if east_asian_width(c) in "WF" else 1 for c in s)

    tasks = [TaskRecord("w", 1, "宽字符" * 30), TaskRecord("w", 2, "宽字符" * 30, status=TaskStatus.IN_PROGRESS,
                                                         owner="x"),
             TaskRecord("w", 3, "plain subject", status=TaskStatus.COMPLETED, owner="x", note="宽" * 80)]
    lines = board_lines(tasks, 100)
    assert max(cols(line) for line in lines) <= 100, [cols(x) for x in lines]
    gutter = [line for line in lines[2:] if "#2" in line]  # the second column starts where its header does
    assert gutter
    assert cols(gutter[0][: gutter[0].index("#2")]) == cols(lines[0][: lines[0].index("IN PROGRESS")])


def test_delete_a_finished_team(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs_before = SQLiteStore(project / ".subagents" / "state.db")
    try:
        n_runs = len(runs_before.list_runs())
    finally:
        runs_before.close()
    assert team("delete", "crew") == 0
    assert capsys.readouterr().out.startswith("deleted team crew: 2 teammates, 3 tasks and its messages")
    assert team("list") == 0
    assert capsys.readouterr().out.strip() == "No teams."
    store = SQLiteStore(project / ".subagents" / "state.db")
    try:
        assert open_team_store(store).get_team("crew") is None
        assert len(store.list_runs()) == n_runs  # the lead's and the teammates' runs stay
    finally:
        store.close()
    assert team("delete", "crew") == 2
    assert "no team named 'crew' in this store (teams: none yet)" in capsys.readouterr().err


def test_delete_refuses_a_team_whose_teammates_are_not_shut_down(project: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    store = SQLiteStore(project / ".subagents" / "state.db")
    try:
        ts = open_team_store(store)
        ts.create_team("live", "", time.time())
        ts.add_member(MemberRecord("live", "cy", "general-purpose", status=MemberStatus.IDLE))
    finally:
        store.close()
    assert team("delete", "live") == 2
    err = capsys.readouterr().err
    assert "team 'live' was not deleted: its teammate cy (idle) is not shut down" in err, err
    assert "Traceback" not in err
    assert team("show", "live") == 0  # still there
