"""Teams at their edges (found by trying to break them; each test fails on the code before the fix): names with a
trailing newline, mail to a teammate that shut down, a refused plan approval, ids beyond 64 bits, an unknown
teammate to shut down, ``wait_idle`` right after a message, and mail that arrives while an idle hook runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.authority.hooks import HookInput
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.teams.model import TeamError, check_name

from .team_scripts import call, member_name, turns


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory" if request.param == "memory" else f"sqlite:///{tmp_path}/s.db"


def test_a_name_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(TeamError, match="bad member name 'bob\\\\n'"):
        check_name("member", "bob\n")  # ("$" matched before a final newline)
    with pytest.raises(TeamError):
        check_name("team", "docs\n")
    assert check_name("member", "bob") == "bob"


async def test_mail_to_a_teammate_that_shut_down_is_a_tool_error(workdir: Path, store: str) -> None:
    out: list[str] = []

    def model(req: ModelRequest) -> ModelResponse:
        if member_name(req) is not None:
            return ModelResponse(text="bye")
        n = turns(req)
        if n == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "m"})])
        if n == 1:
            return ModelResponse(tool_calls=[call("spawn_agent", {"agent_type": "general-purpose", "prompt": "p",
                                                                  "team": "m", "name": "x"})])
        if n == 2:
            return ModelResponse(tool_calls=[call("team_shutdown", {"name": "x"})])
        if n == 3:  # (x ends: not a step that may or may not give its thread the time to, under load)
            return ModelResponse(tool_calls=[call("wait", {})])
        if n == 4:
            return ModelResponse(tool_calls=[call("send_message", {"to": "x", "text": "are you there?"})])
        res = req.messages[-1].tool_results
        out.append(f"{res[0].is_error}: {res[0].content}")
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(model, inline=True), workdir=workdir, store=store) as rt:
        await asyncio.wait_for(rt.run("go", agent="coordinator"), 5)
    assert out == ["True: teammate 'x' has shut down and reads no more messages; spawn a new teammate (spawn_agent "
                   "with team='m' and another name) for more work"]  # was: "message sent to x"


async def test_a_refused_plan_approval_approves_nothing(workdir: Path) -> None:
    out: list[str] = []

    def model(req: ModelRequest) -> ModelResponse:
        if member_name(req) is not None:
            return ModelResponse(text="my plan: ...")
        n = turns(req)
        if n == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "p"})])
        if n == 1:
            return ModelResponse(tool_calls=[call("spawn_agent", {"agent_type": "general-purpose", "prompt": "p",
                                                                  "team": "p", "name": "x",
                                                                  "require_plan_approval": True})])
        if n == 2:
            return ModelResponse(tool_calls=[call("send_message", {"to": "x", "text": "   ", "approve_plan": True})])
        if n == 3:
            out.append(req.messages[-1].tool_results[0].content)
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory",
                       permission_mode="autoEdit") as rt:
        await asyncio.wait_for(rt.run("go", agent="coordinator"), 5)
        member = rt.team("p").members[0]
    assert out == ["the message is empty; write what you want to say"]
    assert member.plan_approved is False  # was: approved by the refused call


async def test_ids_beyond_64_bits_and_unknown_teammates_are_team_errors(workdir: Path, store: str) -> None:
    async with Runtime(model=FunctionModel(lambda r: ModelResponse(text="x")), workdir=workdir, store=store) as rt:
        team = rt.create_team("p")
        await team.add_task("a")
        with pytest.raises(TeamError):
            await team.add_task("b", blocked_by=[2**70])  # was (SQLite): OverflowError
        with pytest.raises(TeamError):
            await team.complete_task(2**70)
        with pytest.raises(TeamError, match="no teammate 'ghost' in team p"):
            team.shutdown("ghost")  # was: [] (nothing said)


async def test_wait_idle_right_after_a_message_waits_for_the_teammate_it_woke(workdir: Path, store: str) -> None:
    seen: list[str] = []

    async def model(req: ModelRequest) -> ModelResponse:
        if turns(req) == 0:
            return ModelResponse(text="ready")
        await asyncio.sleep(0.2)
        seen.append(req.messages[-1].text)
        return ModelResponse(text="handled")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store=store) as rt:
        team = rt.create_team("w")
        team.spawn("x", "wait")
        assert await asyncio.wait_for(team.wait_idle(5), 6)
        team.send("x", "ping")
        assert await team.wait_idle(5)  # (no wait_for: its task would give the teammate a step first)
        handled = list(seen)
        team.shutdown()
    assert len(handled) == 1
    assert "ping" in handled[0]  # was: wait_idle returned at once, the message not handled yet


async def test_mail_that_arrives_while_the_idle_hook_runs_is_the_next_prompt(workdir: Path) -> None:
    heard: list[str] = []
    in_hook = asyncio.Event()

    async def slow_idle_hook(inp: HookInput) -> None:
        in_hook.set()
        await asyncio.sleep(0.3)

    def model(req: ModelRequest) -> ModelResponse:
        if turns(req) > 0:
            heard.append(req.messages[-1].text)
        return ModelResponse(text=f"turn {turns(req)}")

    async with Runtime(model=FunctionModel(model), workdir=workdir, store="memory",
                       hooks={"TeammateIdle": [slow_idle_hook]}) as rt:
        team = rt.create_team("h")
        team.spawn("x", "wait")
        await asyncio.wait_for(in_hook.wait(), 5)
        team.send("x", "ping")  # the teammate's run is still going: its idle hook runs
        for _ in range(300):
            if any("ping" in h for h in heard):
                break
            await asyncio.sleep(0.01)
        team.shutdown()
    assert any("ping" in h for h in heard), heard  # was: put in its inbox, counted as delivered, never read


async def test_the_leads_inbox_right_after_its_run_holds_nothing_it_read(workdir: Path, tmp_path: Path) -> None:
    """SQLite: the lead's read marks are stored once its transcript is committed; ``Team.inbox()`` right after
    ``rt.run`` returned gave the messages it had read a second time (9 runs in 10)."""
    lead_saw: list[str] = []

    def model(req: ModelRequest) -> ModelResponse:
        n = turns(req)
        if member_name(req) is None:
            if n == 0:
                return ModelResponse(tool_calls=[call("team_create", {"name": "t"})])
            if n == 1:
                return ModelResponse(tool_calls=[
                    call("spawn_agent", {"agent_type": "general-purpose", "prompt": "p", "team": "t", "name": "w"})])
            lead_saw.append(req.messages[-1].text)
            return ModelResponse(text="lead done")
        if n == 0:
            return ModelResponse(tool_calls=[call("send_message", {"to": "lead", "text": "first"})])
        return ModelResponse(text="w done")

    for _ in range(3):
        lead_saw.clear()
        async with Runtime(model=FunctionModel(model), workdir=workdir, store=f"sqlite:///{tmp_path}/s.db") as rt:
            assert (await asyncio.wait_for(rt.run("go", agent="coordinator"), 5)).outcome == "ok"
            assert any("first" in s for s in lead_saw)
            assert [m.text for m in rt.team("t").inbox()] == []
            rt.team("t").delete()
