"""Teams in the runtime (issue 14): a model-made team end to end, mail, idle and wake-up, shutdown, fences."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.teams.model import MemberStatus, TaskStatus, TeamError

from .team_scripts import LeadAndWorkers, call, member_name, turns


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory" if request.param == "memory" else f"sqlite:///{tmp_path}/state.db"


async def test_a_lead_and_three_teammates_share_the_board(workdir: Path, store: str) -> None:
    script = LeadAndWorkers(n_workers=3, n_tasks=7)
    events: list[Any] = []
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=store, on_event=events.append) as rt:
        t0 = asyncio.get_running_loop().time()
        r = await asyncio.wait_for(rt.run("split the work", agent="coordinator"), 20)
        assert (r.outcome, r.text) == ("ok", "lead done")
        assert r.duration_s >= (asyncio.get_running_loop().time() - t0) * 0.5  # the whole run, not its last turn
        team = rt.team("t")
        tasks = team.tasks
        assert [t.status for t in tasks] == [TaskStatus.COMPLETED] * 7
        assert all(t.owner in ("w0", "w1", "w2") and t.note == f"{t.owner} did {t.id}" for t in tasks)
        for _ in range(100):  # the lead ended: its idle teammates are shutting down
            if all(m.status is MemberStatus.SHUT_DOWN for m in team.members):
                break
            await asyncio.sleep(0.02)
        assert [m.status for m in team.members] == [MemberStatus.SHUT_DOWN] * 3
        await rt.events_delivered()
    # every "did N" reached the lead exactly once, whatever turn it came in
    said = re.findall(r"(w\d) did (\d+)", "\n".join(script.lead_prompts))
    assert sorted(int(n) for _, n in said) == list(range(1, 8))
    kinds = [e.kind for e in events]
    for k in ("team_created", "teammate_joined", "task_created", "task_claimed", "task_completed", "message_sent",
              "teammate_idle", "teammate_shutdown"):
        assert k in kinds, k
    assert kinds.count("task_claimed") == 7
    assert kinds.count("task_completed") == 7


async def test_only_leads_and_members_see_team_tools(workdir: Path) -> None:
    seen: dict[str, list[str]] = {}

    def model(req: ModelRequest) -> ModelResponse:
        who = member_name(req) or req.agent.agent_type
        seen.setdefault(who, req.tool_names)
        if who == "general-purpose":
            if turns(req) == 0:
                return ModelResponse(tool_calls=[call("task_list", {})])
            return ModelResponse(text=req.messages[-1].tool_results[0].content)
        if who == "coordinator" and turns(req) == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "fence"})])
        if who == "coordinator" and turns(req) == 1:
            return ModelResponse(tool_calls=[call("spawn_agent", {"agent_type": "explore", "prompt": "look",
                                                                  "team": "fence", "name": "eye"})])
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory") as rt:
        r = await rt.run("try the board")
        assert "task_list" not in seen["general-purpose"]
        assert "task_list" in r.text
        assert "not available" in r.text
        await rt.run("make a team", agent="coordinator")
        await rt.team("fence").wait_idle(timeout=5)
    assert "team_create" in seen["coordinator"]
    assert {"task_claim", "send_message", "broadcast", "team_shutdown"} <= set(seen["eye"])
    assert "team_create" not in seen["eye"]
    assert "team_delete" not in seen["eye"]
    assert "write_file" not in seen["eye"]  # the fence of its type still holds (explore is read-only)


async def test_a_python_team_teammate_idles_and_wakes_on_mail(workdir: Path, store: str) -> None:
    heard: list[str] = []

    def model(req: ModelRequest) -> ModelResponse:
        last = req.messages[-1]
        if turns(req) == 0:
            return ModelResponse(text="ready")
        heard.append(last.text)
        if "ping" in last.text:
            return ModelResponse(tool_calls=[call("send_message", {"to": "lead", "text": "pong 1"}),
                                             call("send_message", {"to": "lead", "text": "pong 2"}, 1),
                                             call("send_message", {"to": "lead", "text": "pong 3"}, 2)])
        return ModelResponse(text="answered")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store=store) as rt:
        team = rt.create_team("py")
        run_id = team.spawn("solo", "wait for pings")
        assert await team.wait_idle(timeout=5)
        assert [m.status for m in team.members] == [MemberStatus.IDLE]
        notices = team.inbox()
        assert [(m.sender, m.kind) for m in notices] == [("solo", "idle")]
        assert "ready" in notices[0].text
        team.send("solo", "ping")
        await asyncio.sleep(0.05)
        assert await team.wait_idle(timeout=5)
        got = team.inbox()
        assert [m.text for m in got if m.kind == "message"] == ["pong 1", "pong 2", "pong 3"]  # in order
        assert len(heard) == 2
        assert "ping" in heard[0]
        assert 'from="lead"' in heard[0]
        assert team.inbox() == []  # read once
        assert team.shutdown() == ["solo"]
        result = (await rt.wait([run_id], timeout=5))[run_id]
        assert result.outcome == "ok"
        assert [m.status for m in team.members] == [MemberStatus.SHUT_DOWN]
        team.delete()
        with pytest.raises(TeamError, match="no team named 'py'"):
            rt.team("py")


async def test_broadcast_reaches_every_member_once(workdir: Path) -> None:
    got: dict[str, list[str]] = {}

    def model(req: ModelRequest) -> ModelResponse:
        me = member_name(req) or "?"
        if turns(req) > 0:
            got.setdefault(me, []).append(req.messages[-1].text)
        if me == "a" and turns(req) == 0:
            return ModelResponse(tool_calls=[call("broadcast", {"text": "hello all"})])
        return ModelResponse(text="ok")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory") as rt:
        team = rt.create_team("b")
        team.spawn("b", "wait")
        team.spawn("c", "wait")
        assert await team.wait_idle(timeout=5)
        team.spawn("a", "say hello")
        await asyncio.sleep(0.1)
        assert await team.wait_idle(timeout=5)
        lead_mail = [m for m in team.inbox() if m.kind == "broadcast"]
        team.shutdown()
    assert [m.text for m in lead_mail] == ["hello all"]
    assert [sum("hello all" in t for t in got.get(n, [])) for n in ("b", "c")] == [1, 1]
    assert "a" not in got or all("hello all" not in t for t in got["a"])


async def test_shutdown_gives_back_in_progress_tasks(workdir: Path) -> None:
    release = asyncio.Event()

    async def model(req: ModelRequest) -> ModelResponse:
        if turns(req) == 0:
            return ModelResponse(tool_calls=[call("task_claim", {})])
        if turns(req) == 1:
            await release.wait()
        return ModelResponse(text="stopped")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory") as rt:
        team = rt.create_team("s")
        await team.add_task("long job")
        team.spawn("busy", "work")
        for _ in range(100):
            if team.tasks[0].status is TaskStatus.IN_PROGRESS:
                break
            await asyncio.sleep(0.01)
        assert team.tasks[0].owner == "busy"
        assert team.shutdown("busy") == ["busy"]
        assert team.members[0].status is MemberStatus.STOPPING  # it finishes its step first
        release.set()
        for _ in range(100):
            if team.members[0].status is MemberStatus.SHUT_DOWN:
                break
            await asyncio.sleep(0.01)
        assert team.members[0].status is MemberStatus.SHUT_DOWN
        assert (team.tasks[0].status, team.tasks[0].owner) == (TaskStatus.PENDING, None)


async def test_team_errors_are_tool_errors_the_model_reads(workdir: Path) -> None:
    out: list[str] = []

    def model(req: ModelRequest) -> ModelResponse:
        n = turns(req)
        if n:
            out.extend(r.content for r in req.messages[-1].tool_results)
        plan = [[call("team_create", {"name": "Bad Name"})], [call("team_create", {"name": "ok"})],
                [call("task_create", {"subject": "x", "blocked_by": [99]})],
                [call("task_claim", {"task_id": 5})],
                [call("spawn_agent", {"agent_type": "general-purpose", "prompt": "p", "team": "ok", "name": "lead"})],
                [call("send_message", {"to": "nobody", "text": "hi"})],
                [call("spawn_agent", {"agent_type": "general-purpose", "prompt": "p", "team": "ok"})]]
        return ModelResponse(tool_calls=plan[n]) if n < len(plan) else ModelResponse(text="done")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory") as rt:
        r = await rt.run("errors", agent="coordinator")
    assert r.outcome == "ok"
    assert "bad team name 'Bad Name'" in out[0]
    assert out[1].startswith("team ok created")
    assert "99" in out[2]
    assert "task" in out[2]
    assert "5" in out[3]
    assert "'lead' is the team lead's name" in out[4]
    assert "nobody" in out[5]
    assert "needs both team and name" in out[6]


def test_claude_code_team_tool_names_in_an_agent_file_name_ours(tmp_path: Path) -> None:
    from subagents.authority.hooks import Hooks
    from subagents.definitions.loader import parse_definition

    names = "TeamCreate, TeamDelete, TaskCreate, TaskList, TaskGet, TaskUpdate, SendMessage, Task"
    d = parse_definition({"name": "cc-lead", "description": "d", "tools": names}, "lead", source="cc-lead.md")
    assert d.tools == ["team_create", "team_delete", "task_create", "task_list", "task_get", "task_update",
                       "send_message", "spawn_agent"]
    hooks = Hooks.from_python({"PreToolUse": [{"matcher": "TaskCreate|SendMessage", "callback": lambda i: None}]})
    assert [len(hooks.matching("PreToolUse", t)) for t in ("task_create", "send_message", "task_list")] == [1, 1, 0]


async def test_a_closed_teammate_leaves_the_team_and_gives_back_its_task(workdir: Path, store: str) -> None:
    async def model(req: ModelRequest) -> ModelResponse:
        if turns(req) == 0:
            return ModelResponse(tool_calls=[call("task_claim", {})])
        await asyncio.Event().wait()  # works forever
        raise AssertionError

    async with Runtime(model=FunctionModel(model), workdir=workdir, store=store) as rt:
        team = rt.create_team("c")
        await team.add_task("endless")
        run_id = team.spawn("slow", "work")
        for _ in range(200):
            if team.tasks[0].owner == "slow":
                break
            await asyncio.sleep(0.01)
        result = await rt.close(run_id)
        assert result.outcome == "cancelled"
        assert [m.status for m in team.members] == [MemberStatus.SHUT_DOWN]
        assert (team.tasks[0].status, team.tasks[0].owner) == (TaskStatus.PENDING, None)
        team.delete()  # every member is shut down: the team can go
        assert rt.create_team("c").tasks == []


async def test_the_coordinators_teammates_and_children_get_the_file_tools_it_holds(workdir: Path) -> None:
    """The built-in coordinator only delegates, yet its workers edit the workspace: it holds the file tools
    (``delegate_tools``) for them without calling them itself."""
    seen: dict[str, list[str]] = {}

    def model(req: ModelRequest) -> ModelResponse:
        who = member_name(req) or req.agent.agent_type
        seen.setdefault(who, req.tool_names)
        n = turns(req)
        if who == "coordinator":
            if n == 0:
                return ModelResponse(tool_calls=[call("team_create", {"name": "w"})])
            if n == 1:
                return ModelResponse(tool_calls=[
                    call("spawn_agent", {"agent_type": "general-purpose", "prompt": "write", "team": "w",
                                         "name": "scribe"}),
                    call("spawn_agent", {"agent_type": "general-purpose", "prompt": "write too"}, 1)])
            if n == 2:  # tried to write itself: refused, it only holds the tool
                return ModelResponse(tool_calls=[call("write_file", {"path": "lead.txt", "content": "no"})])
            return ModelResponse(text="lead done")
        if n == 0:
            path = "team.txt" if who == "scribe" else "child.txt"
            return ModelResponse(tool_calls=[call("write_file", {"path": path, "content": f"by {who}\n"})])
        return ModelResponse(text="written")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory", permission_mode="autoEdit") as rt:
        r = await asyncio.wait_for(rt.run("write two files", agent="coordinator"), 20)
        assert r.outcome == "ok"
        await rt.team("w").wait_idle(timeout=5)
    assert (workdir / "team.txt").read_text() == "by scribe\n"
    assert (workdir / "child.txt").read_text() == "by general-purpose\n"
    assert not (workdir / "lead.txt").exists()
    assert "write_file" not in seen["coordinator"]
    assert {"write_file", "edit_file", "bash", "task_claim"} <= set(seen["scribe"])
