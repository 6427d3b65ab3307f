"""Team hooks (TaskCreated, TaskCompleted, TeammateIdle: exit 2 / block semantics) and plan approval (issue 14)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from subagents import Runtime
from subagents.authority.hooks import HookInput, HookResult
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.teams.model import MemberStatus, TaskStatus

from .team_scripts import call, turns


def _tool_text(req: ModelRequest) -> str:
    return "\n".join(r.content for r in req.messages[-1].tool_results)


def _claim_then_update(updates: list[dict[str, object]], seen: list[str]) -> Callable[[ModelRequest], ModelResponse]:
    """A teammate that claims task 1, then calls ``task_update`` with each of ``updates``; ``seen``: the results."""

    def model(req: ModelRequest) -> ModelResponse:
        n = turns(req)
        if n:
            seen.append(_tool_text(req))
        if n == 0:
            return ModelResponse(tool_calls=[call("task_claim", {})])
        if n <= len(updates):
            return ModelResponse(tool_calls=[call("task_update", {"task_id": 1, **updates[n - 1]})])
        return ModelResponse(text="done")

    return model


async def test_a_task_completed_hook_keeps_the_task_open_and_the_teammate_reads_why(workdir: Path) -> None:
    asked: list[dict[str, object]] = []
    seen: list[str] = []

    def gate(inp: HookInput) -> HookResult | None:
        asked.append(inp.to_dict())
        return HookResult("block", "run the tests first") if len(asked) == 1 else None

    model = _claim_then_update([{"status": "completed", "note": "x"}] * 2, seen)
    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory",
                       hooks={"TaskCompleted": [gate]}) as rt:
        team = rt.create_team("h")
        await team.add_task("ship it", "all tests green")
        team.spawn("dev", "ship")
        assert await team.wait_idle(timeout=5)
        assert team.tasks[0].status is TaskStatus.COMPLETED
        team.shutdown()
    assert "stays open" in seen[1]
    assert "run the tests first" in seen[1]
    assert seen[2].startswith("updated #1 [completed]")
    assert asked[0]["hook_event_name"] == "TaskCompleted"
    assert (asked[0]["team_name"], asked[0]["task_id"], asked[0]["teammate_name"]) == ("h", 1, "dev")
    assert asked[0]["task_subject"] == "ship it"


async def test_the_note_of_a_completed_task_changes_only_through_the_task_completed_check(workdir: Path) -> None:
    # The check approved "tests green" with the task; rewriting the note afterwards ("skipped the tests") is asked
    # of it again — before, the owner could change the approved record at will.
    asked: list[str] = []
    seen: list[str] = []

    def gate(inp: HookInput) -> HookResult | None:
        note = str(inp.to_dict()["note"])
        asked.append(note)
        return HookResult("block", "a note must say the tests are green") if "green" not in note else None

    notes = ["tests green", "skipped the tests", "tests green, and docs", "tests green, and docs"]
    updates: list[dict[str, object]] = [{"note": n} for n in notes]
    updates[0]["status"] = "completed"
    model = _claim_then_update(updates, seen)
    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory",
                       hooks={"TaskCompleted": [gate]}) as rt:
        team = rt.create_team("n")
        await team.add_task("ship it")
        team.spawn("dev", "ship")
        assert await team.wait_idle(timeout=5)
        task = team.tasks[0]
        team.shutdown()
    assert (task.status, task.note) == (TaskStatus.COMPLETED, "tests green, and docs")
    assert asked == ["tests green", "skipped the tests", "tests green, and docs"]  # the same note again: no check
    assert "keeps its note: a TaskCompleted hook refused the new one: a note must say the tests are green" in seen[2]


async def test_a_command_hook_that_exits_2_refuses_a_task_and_its_stderr_is_the_reason(workdir: Path) -> None:
    out: list[str] = []

    def model(req: ModelRequest) -> ModelResponse:
        if turns(req) == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "c"})])
        if turns(req) == 1:
            return ModelResponse(tool_calls=[call("task_create", {"subject": "forbidden work"})])
        out.append(_tool_text(req))
        return ModelResponse(text="done")

    hook = {"command": "cat > \"$SUBAGENTS_PROJECT_DIR/hook-input.json\"; echo 'no new tasks today' >&2; exit 2"}
    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory",
                       hooks={"TaskCreated": [hook]}) as rt:
        await rt.run("plan", agent="coordinator")
        assert rt.team("c").tasks == []
    assert "TaskCreated hook refused it: no new tasks today" in out[0]
    sent = json.loads((workdir / "hook-input.json").read_text())
    assert (sent["hook_event_name"], sent["task_subject"], sent["team_name"]) == ("TaskCreated", "forbidden work", "c")


async def test_a_teammate_idle_hook_gives_the_teammate_more_to_do(workdir: Path) -> None:
    prompts: list[str] = []
    calls = 0

    def more(inp: HookInput) -> HookResult | None:
        nonlocal calls
        calls += 1
        return HookResult("block", "also update the changelog") if calls == 1 else None

    def model(req: ModelRequest) -> ModelResponse:
        prompts.append(req.messages[-1].text)
        return ModelResponse(text=f"turn {turns(req)} done")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory",
                       hooks={"TeammateIdle": [more]}) as rt:
        team = rt.create_team("i")
        team.spawn("doc", "write docs")
        assert await team.wait_idle(timeout=5)
        idle = team.inbox()
        team.shutdown()
    assert calls == 2
    assert "<teammate-idle-hook>" in prompts[1]
    assert "also update the changelog" in prompts[1]
    assert [m.kind for m in idle] == ["idle"]
    assert "turn 1 done" in idle[0].text


async def test_plan_approval_keeps_a_teammate_read_only_until_the_lead_approves(workdir: Path) -> None:
    results: list[str] = []

    def model(req: ModelRequest) -> ModelResponse:
        n = turns(req)
        if n:
            results.append(_tool_text(req) or req.messages[-1].text)
        if n in (0, 2):
            return ModelResponse(tool_calls=[call("write_file", {"path": "out.txt", "content": "made\n"}, n)])
        return ModelResponse(text="plan: write out.txt" if n == 1 else "written")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory", permission_mode="autoEdit") as rt:
        team = rt.create_team("p")
        team.spawn("builder", "make out.txt", require_plan_approval=True)
        assert await team.wait_idle(timeout=5)
        assert not (workdir / "out.txt").exists()
        assert team.members[0].mode == "autoEdit"
        assert not team.members[0].plan_approved
        team.send("builder", "approved, go ahead", approve_plan=True)
        await asyncio.sleep(0.05)
        assert await team.wait_idle(timeout=5)
        assert team.members[0].plan_approved
        team.shutdown()
    assert "permission mode 'plan' refuses file edits" in results[0]
    assert "approved, go ahead" in results[1]
    assert results[2].startswith("Created out.txt")
    assert (workdir / "out.txt").read_text() == "made\n"
    assert [m.status for m in team.members] in ([MemberStatus.SHUT_DOWN], [MemberStatus.STOPPING])
