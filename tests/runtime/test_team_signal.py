"""A team stopped by a signal comes back when the store is opened again, as after a crash.

``Runtime.interrupting("SIGTERM")`` (what ``subagents run``, ``chat`` and ``serve`` call on a signal) ends the
runtime's agents as ``interrupted``.  A teammate is long-lived: its run is left unfinished in the store, so the
next Runtime on the store resumes it like a run a crash left (its role, its team tools, its claimed tasks); an
interrupted lead is resumable (``rt.resume``) and gets its role back.  Each test failed before the fix: the
teammates stayed ``working`` in the team store forever (``wait_idle`` never returned) and a resumed teammate's
``task_update`` was refused as outside its tool fence.

``python tests/runtime/test_team_signal.py CWD`` is the CLI side: ``subagents run`` with a scripted coordinator
that makes a team, SIGTERMed by the test once both teammates hold a task.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.teams.model import MemberStatus, TaskStatus

try:
    from .team_scripts import call, member_name, turns
except ImportError:  # run as a script (the CLI side)
    sys.path.insert(0, str(Path(__file__).parent))
    from team_scripts import call, member_name, turns  # type: ignore[no-redef]

TEAM_TOOLS = {"task_list", "task_claim", "task_update", "send_message", "broadcast", "team_shutdown"}


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/state.db"


def _last_results(req: ModelRequest) -> list[str]:
    return [r.content for r in req.messages[-1].tool_results]


Script = Callable[[ModelRequest], Awaitable[ModelResponse]]


def _hanging_workers(claimed: set[str], both: asyncio.Event, idle: tuple[str, ...] = ()) -> Script:
    """Teammates that claim a task (``a`` #1, ``b`` #2), tell the test, then hang in their next model call (where
    the signal finds them); those in ``idle`` end their first turn at once (idle at the signal)."""

    async def model(req: ModelRequest) -> ModelResponse:
        me = member_name(req)
        assert me is not None
        if me in idle:
            return ModelResponse(text=f"{me}: nothing for me")
        if not req.messages[-1].tool_results:
            return ModelResponse(tool_calls=[call("task_claim", {"task_id": 1 if me == "a" else 2})])
        claimed.add(me)
        if claimed >= {"a", "b"}:
            both.set()
        await asyncio.Event().wait()  # the signal comes here
        raise AssertionError

    return model


class Finisher:
    """The model after the restart: a teammate completes the task it holds, tells the lead, then goes idle."""

    def __init__(self) -> None:
        self.calls: dict[str, list[ModelRequest]] = {}
        self.results: dict[str, list[str]] = {}
        self.prompts: dict[str, list[str]] = {}  # the text of the user message each call answers

    def __call__(self, req: ModelRequest) -> ModelResponse:
        me = member_name(req) or "lead"
        self.calls.setdefault(me, []).append(req)
        got = _last_results(req)
        self.results.setdefault(me, []).extend(got)
        self.prompts.setdefault(me, []).append(req.messages[-1].text)
        if got and got[0].startswith("you own #"):
            tid = int(got[0].split("#", 1)[1].split(" ", 1)[0])
            return ModelResponse(tool_calls=[
                call("task_update", {"task_id": tid, "status": "completed", "note": f"{me} after the signal"}),
                call("send_message", {"to": "lead", "text": f"{me} did {tid}"})])
        if got and got[0].startswith("interrupted"):  # (a restored call whose result was lost: look again)
            return ModelResponse(tool_calls=[call("task_list", {})])
        last = req.messages[-1].text
        if last.startswith("finish task #"):  # (a resume's message)
            tid = int(last.split("#", 1)[1].split(":", 1)[0])
            return ModelResponse(tool_calls=[call("task_update", {"task_id": tid, "status": "completed"})])
        return ModelResponse(text=f"{me} idle" + (f" after: {last[:80]}" if last else ""))


async def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def test_a_python_team_stopped_by_sigterm_comes_back_on_the_next_open(workdir: Path, tmp_path: Path) -> None:
    store = _store(tmp_path)
    claimed: set[str] = set()
    both = asyncio.Event()
    async with Runtime(model=FunctionModel(_hanging_workers(claimed, both, idle=("c",))), workdir=workdir,
                       store=store) as rt:
        team = rt.create_team("sig")
        await team.add_task("first")
        await team.add_task("second")
        ids = {n: team.spawn(n, f"work as {n}") for n in ("a", "b", "c")}
        await asyncio.wait_for(both.wait(), 10)
        await _until(lambda: team.members[2].status is MemberStatus.IDLE)
        rt.interrupting("SIGTERM")

    script = Finisher()
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=store) as rt:
        team = rt.team("sig")
        assert await team.wait_idle(timeout=10), [(m.name, m.status) for m in team.members]
        assert [(t.status, t.owner, t.note) for t in team.tasks] == [
            (TaskStatus.COMPLETED, "a", "a after the signal"), (TaskStatus.COMPLETED, "b", "b after the signal")]
        assert [m.status for m in team.members] == [MemberStatus.IDLE] * 3
        for n in ("a", "b"):  # their team tools came back with them: task_update was not refused
            assert set(script.calls[n][0].tool_names) >= TEAM_TOOLS, script.calls[n][0].tool_names
            assert any(r.startswith(f"updated #{1 if n == 'a' else 2} [completed]") for r in script.results[n]), \
                script.results[n]
        assert "c" not in script.calls  # idle at the signal: it waits for mail again, no model call
        assert sorted(m.text for m in team.inbox() if m.kind == "message") == ["a did 1", "b did 2"]
        team.send("c", "one more thing")  # mail wakes it, as any idle teammate
        assert await team.wait_idle(timeout=10)
        assert "one more thing" in script.prompts["c"][0]
        assert rt.status(ids["a"]) == "running"  # a teammate waits for mail; it ends when shut down
        team.shutdown()
        await _until(lambda: all(m.status is MemberStatus.SHUT_DOWN for m in team.members))


async def test_a_lead_interrupted_with_its_team_is_resumed_with_its_role(workdir: Path, tmp_path: Path) -> None:
    store = _store(tmp_path)
    claimed: set[str] = set()
    both = asyncio.Event()
    workers = _hanging_workers(claimed, both)

    async def first(req: ModelRequest) -> ModelResponse:
        if member_name(req) is not None:
            return await workers(req)
        n = turns(req)
        if n == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "t"})])
        if n == 1:
            return ModelResponse(tool_calls=[
                call("task_create", {"subject": "job one"}, 0), call("task_create", {"subject": "job two"}, 1),
                *(call("spawn_agent", {"agent_type": "general-purpose", "prompt": "do a job", "team": "t",
                                       "name": n}, i) for i, n in enumerate("ab"))])
        return ModelResponse(text="waiting for my team")

    async with Runtime(model=FunctionModel(first), workdir=workdir, store=store) as rt:
        lead = await rt.spawn("split the work", agent="coordinator")
        await asyncio.wait_for(both.wait(), 10)
        rt.interrupting("SIGTERM")

    script = Finisher()
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=store) as rt:
        team = rt.team("t")
        assert await team.wait_idle(timeout=10), [(m.name, m.status) for m in team.members]
        assert [(t.status, t.owner) for t in team.tasks] == [(TaskStatus.COMPLETED, "a"), (TaskStatus.COMPLETED, "b")]
        assert rt.result(lead.id).outcome == "interrupted"  # type: ignore[union-attr]  # the lead: resumable
        h = await rt.resume(lead.id, "go on")
        r = (await asyncio.wait_for(rt.wait([h.id]), 10))[h.id]
        assert r.outcome == "ok"
        said = "\n".join(script.prompts["lead"])
        assert "a did 1" in said  # its teammates' mail reached it as the lead
        assert "b did 2" in said
        assert {"team_shutdown", "task_list", "send_message"} <= set(script.calls["lead"][0].tool_names)
        await _until(lambda: all(m.status is MemberStatus.SHUT_DOWN for m in team.members))  # ended: shut down


async def test_with_mark_interrupted_a_teammate_is_idle_and_resumes_with_its_team_tools(workdir: Path,
                                                                                         tmp_path: Path) -> None:
    store = _store(tmp_path)
    claimed: set[str] = set()
    both = asyncio.Event()
    async with Runtime(model=FunctionModel(_hanging_workers(claimed, both)), workdir=workdir, store=store) as rt:
        team = rt.create_team("mi")
        await team.add_task("first")
        await team.add_task("second")
        a = team.spawn("a", "work")
        team.spawn("b", "work")
        await asyncio.wait_for(both.wait(), 10)
        rt.interrupting("SIGTERM")

    script = Finisher()
    rt = Runtime(model=FunctionModel(script), workdir=workdir, store=store)
    rt.settings.on_restart = "mark_interrupted"
    async with rt:
        team = rt.team("mi")
        assert rt.result(a).outcome == "interrupted"  # type: ignore[union-attr]
        assert await team.wait_idle(timeout=5), [(m.name, m.status) for m in team.members]  # not "working"
        assert [m.status for m in team.members] == [MemberStatus.IDLE] * 2
        assert [(t.status, t.owner) for t in team.tasks] == [(TaskStatus.IN_PROGRESS, "a"), (TaskStatus.IN_PROGRESS,
                                                                                              "b")]
        await rt.resume(a, "finish task #1: task_update it completed")
        await _until(lambda: team.tasks[0].status is TaskStatus.COMPLETED)
        assert set(script.calls["a"][0].tool_names) >= TEAM_TOOLS
        assert await team.wait_idle(timeout=10)
        assert team.members[0].status is MemberStatus.IDLE  # back to waiting for mail, a teammate again
        team.shutdown()
        await _until(lambda: [m.status for m in team.members] == [MemberStatus.SHUT_DOWN] * 2)
        assert [(t.status, t.owner) for t in team.tasks] == [(TaskStatus.COMPLETED, "a"), (TaskStatus.PENDING, None)]


# -- the CLI: `subagents run` stopped by SIGTERM ------------------------------------------------------------------
async def _cli_lead(req: ModelRequest) -> ModelResponse:
    me = member_name(req)
    if me is not None:
        if not req.messages[-1].tool_results:
            return ModelResponse(tool_calls=[call("task_claim", {"task_id": 1 if me == "a" else 2})])
        Path(f"{me}.claimed").touch()  # noqa: ASYNC240 - a marker for the test, once
        await asyncio.Event().wait()  # the signal comes here
        raise AssertionError
    n = turns(req)
    if n == 0:
        return ModelResponse(tool_calls=[call("team_create", {"name": "cli"})])
    if n == 1:
        return ModelResponse(tool_calls=[
            call("task_create", {"subject": "job one"}, 0), call("task_create", {"subject": "job two"}, 1),
            *(call("spawn_agent", {"agent_type": "general-purpose", "prompt": "do a job", "team": "cli",
                                   "name": n}, i) for i, n in enumerate("ab"))])
    return ModelResponse(text="waiting for my team")


async def test_subagents_run_stopped_by_sigterm_leaves_a_team_that_comes_back(workdir: Path) -> None:
    env = {**os.environ, "SUBAGENTS_STORE": f"sqlite:///{workdir}/.subagents/state.db"}
    proc = await asyncio.create_subprocess_exec(sys.executable, __file__, str(workdir), cwd=workdir, env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        await _until(lambda: (workdir / "a.claimed").exists() and (workdir / "b.claimed").exists(), 30)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert b"Stopped by SIGTERM" in err

    script = Finisher()
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=env["SUBAGENTS_STORE"]) as rt:
        team = rt.team("cli")
        assert await team.wait_idle(timeout=10), [(m.name, m.status) for m in team.members]
        assert [(t.status, t.owner) for t in team.tasks] == [(TaskStatus.COMPLETED, "a"), (TaskStatus.COMPLETED, "b")]
        team.shutdown()


if __name__ == "__main__":
    from subagents.cli.main import main

    os.chdir(sys.argv[1])
    sys.exit(main(["run", "split the work", "--agent", "coordinator", "--permission-mode", "yolo"],
                  model=FunctionModel(_cli_lead)))
