"""The crash scenario: a root agent fans out background children that nap in tools, on a SQLite store,
then delegates one more job to a foreground child.

``python crash_scenario.py run STORE_PATH`` runs it (the crash test SIGKILLs this process at a
random point; ``STORE_PATH`` may also be a store URL, ``postgresql://...``, with the workspace directory
after it); it prints ``READY`` once the runtime is open and ``COMPLETED <id>`` for every child
whose completion event was published (so, by the commit-before-publish rule, committed).
:func:`recover` reopens the store in a fresh Runtime and lets everything finish; :func:`check`
returns the list of violated guarantees (empty when all hold).  ``bench/crash.py`` reuses it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from subagents import Runtime
from subagents.messages import Message
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.store import Store, open_store
from subagents.tools.base import tool

JOBS = 3
NAPS = 2
NAP_S = 0.01
ROOT_DONE = "ROOT DONE"
FG_JOB = f"job-{JOBS}"  # the foreground child's job


@tool
async def nap(seconds: float) -> str:
    """Sleep a little (stands in for a slow tool)."""
    await asyncio.sleep(seconds)
    return "rested"


def _blocks(messages: list[Message]) -> list[str]:
    out = []
    for m in messages:
        for b in m.content:
            if b.kind == "text":
                out.append(b.text)
            elif b.kind == "tool_result":
                out.append(b.content)
    return out


def _child(req: ModelRequest) -> ModelResponse:
    naps = sum(1 for m in req.messages for b in m.tool_results if not b.is_error)
    if naps < NAPS:  # job-i naps (i + 1) times longer, so the children end one after the other
        job = int(req.messages[0].text.rpartition("-")[2]) % JOBS
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": NAP_S * (job + 1)})])
    return ModelResponse(text=f"RESULT {req.messages[0].text} from {req.agent.id}")


def _spawned(messages: list[Message]) -> tuple[dict[str, str], set[str]]:
    """(job -> child id) from successful spawn results, and the jobs whose spawn call failed or was interrupted."""
    calls: dict[str, str] = {}  # tool_use id -> job
    for m in messages:
        for u in m.tool_uses:
            if u.name == "spawn_agent":
                calls[u.id] = str(u.arguments["prompt"])
    ids: dict[str, str] = {}
    failed: set[str] = set()
    for m in messages:
        for r in m.tool_results:
            job = calls.get(r.tool_use_id)
            if job is None:
                continue
            if r.is_error:
                failed.add(job)
            elif job != FG_JOB:  # a background spawn returns the child's id (a foreground one, its result)
                ids[job] = json.loads(r.content)["agent_id"]
    return ids, failed - set(ids)


def _root(req: ModelRequest) -> ModelResponse:
    ids, failed = _spawned(req.messages)
    todo = [f"job-{i}" for i in range(JOBS) if f"job-{i}" not in ids and
            (f"job-{i}" in failed or not any(u.name == "spawn_agent" for m in req.messages for u in m.tool_uses))]
    if todo:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": job,
                                                                  "description": job, "background": True})
                                          for job in todo])
    texts = _blocks(req.messages)
    unseen = [cid for cid in ids.values() if not any(f"from {cid}" in t for t in texts)]
    if not unseen:
        if not any(f"RESULT {FG_JOB} from" in t for t in texts):  # none yet, or the call came back interrupted
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": FG_JOB,
                                                                      "description": FG_JOB})])
        return ModelResponse(text=ROOT_DONE)
    if sum(1 for m in req.messages for u in m.tool_uses if u.name == "nap") < 3:
        # busy for a while: finished children are announced at the root's tool boundaries
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.015})])
    return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": unseen})])


def script(req: ModelRequest) -> ModelResponse:
    return _root(req) if req.agent.depth == 0 else _child(req)


def _where(store: Path | str, workdir: Path | None = None) -> tuple[str, Path]:
    """(store URL, workspace) for a SQLite file (its directory) or a store URL (``workdir``)."""
    if isinstance(store, str) and "://" in store:
        assert workdir is not None, "a store URL needs a workspace directory"
        return store, workdir
    return f"sqlite:///{store}", Path(store).parent


def _open(store: Path | str) -> Store:
    url, workdir = _where(store, Path.cwd())
    return open_store(url, workdir)


def runtime(store_path: Path | str, workdir: Path | None = None) -> Runtime:
    url, wd = _where(store_path, workdir)
    return Runtime(model=FunctionModel(script), workdir=wd, store=url,
                   tools=[nap], builtin_tools=False, max_threads=8, permission_mode="yolo")


async def _run(store_path: Path | str, workdir: Path | None = None) -> None:
    def on_event(ev: Event) -> None:
        if ev.kind == "subagent_completed" and ev.depth > 0 and ev.data.get("status") == "completed":
            print(f"COMPLETED {ev.agent_id}", flush=True)

    async with runtime(store_path, workdir) as rt:
        rt.bus.on(on_event)
        print("READY", flush=True)
        await rt.run("ROOT")
        await rt.wait()


async def recover(store_path: Path | str, workdir: Path | None = None) -> None:
    """Reopen the store in a new Runtime (restore) and let every restored run finish."""
    async with runtime(store_path, workdir) as rt:
        for _ in range(50):
            live = [n.id for n in rt.manager.nodes.values() if not n.status.is_final()]
            if not live:
                break
            await rt.wait(live, timeout=30)


def check(store_path: Path | str, completed_before_kill: set[str]) -> list[str]:
    """Every guarantee of the crash test, as a list of violations."""
    s = _open(store_path)
    try:
        return _violations(s, completed_before_kill)
    finally:
        s.close()


def tally(store_path: Path | str, completed_before_kill: set[str]) -> tuple[int, int]:
    """(lost results, re-runs of finished children): results of completed children the root did not
    receive, and children that ran again (resumed, or spawned anew for the same job) after completing."""
    s = _open(store_path)
    try:
        runs = s.list_runs(include_archived=True)
        roots = [r for r in runs if r.depth == 0]
        texts = _blocks(s.transcript(roots[0].run_id)) if roots else []
    finally:
        s.close()
    kids = [r for r in runs if r.depth == 1]
    lost = sum(1 for r in kids if r.status == "completed" and not any(f"from {r.run_id}" in t for t in texts))
    lost += sum(1 for c in completed_before_kill if not any(r.run_id == c for r in kids))
    by_job: dict[str, list[str]] = {}
    for r in kids:
        by_job.setdefault(r.task, []).append(r.run_id)
    reruns = sum(1 for r in kids if r.run_id in completed_before_kill and r.runs > 1)
    reruns += sum(len(ids) - 1 for ids in by_job.values() if len(ids) > 1 and set(ids) & completed_before_kill)
    return lost, reruns


def _violations(s: Store, completed_before_kill: set[str]) -> list[str]:
    bad: list[str] = []
    runs = {r.run_id: r for r in s.list_runs(include_archived=True)}
    for r in runs.values():
        if not r.is_final:
            bad.append(f"run {r.run_id} ({r.nickname}) left {r.status}")
    for cid in completed_before_kill:
        r = runs.get(cid)
        if r is None:
            bad.append(f"child {cid} completed before the kill but its record is lost")
        elif r.status != "completed" or not (r.result_text or "").startswith("RESULT "):
            bad.append(f"child {cid} completed before the kill but now reads {r.status}: {r.result_text!r}")
    roots = [r for r in runs.values() if r.depth == 0]
    if not roots:
        return bad  # killed before the root was recorded: nothing else to check
    root = roots[0]
    if root.status != "completed" or root.result_text != ROOT_DONE:
        bad.append(f"root ended {root.status}/{root.outcome} with {root.result_text!r} ({root.error})")
    transcript = _blocks(s.transcript(root.run_id))
    for a in s.announcements_of():
        if a.delivered_at is None:
            bad.append(f"announcement {a.id} was never delivered")
    for r in runs.values():
        if r.depth != 1:
            continue
        seen = sum(1 for t in transcript if f"from {r.run_id}" in t)
        if r.status == "completed" and seen != 1:
            bad.append(f"the root received child {r.run_id}'s result {seen} times, not exactly once")
    jobs: dict[str, int] = {}
    for r in runs.values():
        if r.depth == 1:
            jobs[r.task] = jobs.get(r.task, 0) + 1
    for job, n in jobs.items():
        if n > 1:
            bad.append(f"{job} was spawned {n} times: a child ran again instead of delivering its result")
    ids, _ = _spawned(s.transcript(root.run_id))
    for job, cid in ids.items():
        if cid not in runs:
            bad.append(f"child {cid} ({job}) is named in the root's transcript but its record is lost")
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "run":
        where = sys.argv[2]
        asyncio.run(_run(where, Path(sys.argv[3])) if "://" in where else _run(Path(where)))
