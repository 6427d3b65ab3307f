"""A team survives a SIGKILL: tasks, ownership and unread mail intact; its teammates resume (issue 14).

The crashing side (``python tests/runtime/test_team_restart.py STORE``) makes team ``r`` with tasks #1 and
#2 and teammates ``a`` and ``b`` on a SQLite store; each claims one task and hangs in its next model call;
the lead then mails ``a`` (unread: ``a`` is busy) and the process SIGKILLs itself.  A new Runtime on the
same store resumes both teammates with their tasks: they complete them, ``a`` reads the mail exactly once.
In-progress tasks of a teammate that resumes stay its own (they go back to the board only when a teammate
ends or is shut down).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.teams.model import MemberStatus, TaskStatus


def _name(req: ModelRequest) -> str:
    first = req.messages[0].text
    return first.split('"', 2)[1]


async def _crashing_side(store: Path) -> None:
    claimed: set[str] = set()
    both = asyncio.Event()

    async def model(req: ModelRequest) -> ModelResponse:
        me = _name(req)
        last = req.messages[-1]
        if not last.tool_results:
            return ModelResponse(tool_calls=[ToolCall("task_claim", {"task_id": 1 if me == "a" else 2}, id="c")])
        claimed.add(me)
        if len(claimed) == 2:
            both.set()
        await asyncio.Event().wait()  # hangs: the process dies here
        raise AssertionError

    rt = Runtime(model=FunctionModel(model), workdir=store.parent, store=f"sqlite:///{store}")
    async with rt:
        team = rt.create_team("r")
        await team.add_task("first")
        await team.add_task("second")
        team.spawn("a", "do #1")
        team.spawn("b", "do #2")
        await asyncio.wait_for(both.wait(), 30)
        team.send("a", "extra note: mind the tabs")
        rt.store.flush()
        os.kill(os.getpid(), signal.SIGKILL)


async def test_a_team_survives_sigkill_and_its_teammates_resume(tmp_path: Path) -> None:
    store = tmp_path / "state.db"
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, __file__, str(store)], cwd=tmp_path, timeout=60,
                                   capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    seen: dict[str, list[str]] = {"a": [], "b": []}

    def model(req: ModelRequest) -> ModelResponse:
        me, last = _name(req), req.messages[-1]
        seen[me].append(last.text or "\n".join(r.content for r in last.tool_results))
        results = last.tool_results
        if results and results[0].content.startswith("you own #"):
            tid = int(results[0].content.split("#", 1)[1].split(" ", 1)[0])
            return ModelResponse(tool_calls=[ToolCall("task_update", {"task_id": tid, "status": "completed",
                                                                      "note": f"{me} after restart"}, id="u")])
        return ModelResponse(text=f"{me} idle")

    async with Runtime(model=FunctionModel(model), workdir=tmp_path, store=f"sqlite:///{store}") as rt:
        team = rt.team("r")
        for _ in range(200):
            if all(m.status is MemberStatus.IDLE for m in team.members) and any("extra note" in t for t in seen["a"]):
                break
            await asyncio.sleep(0.02)
        tasks = team.tasks
        assert [(t.status, t.owner, t.note) for t in tasks] == [
            (TaskStatus.COMPLETED, "a", "a after restart"), (TaskStatus.COMPLETED, "b", "b after restart")]
        assert sum("extra note: mind the tabs" in t for t in seen["a"]) == 1
        assert not any("extra note" in t for t in seen["b"])
        assert [m.status for m in team.members] == [MemberStatus.IDLE, MemberStatus.IDLE]
        team.shutdown()


if __name__ == "__main__":
    asyncio.run(_crashing_side(Path(sys.argv[1])))
