"""Item 3: after a crash, a resumed parent's pending foreground ``spawn_agent`` call receives the
child's result exactly once, and a child that had finished is not run again.

A subprocess runs a parent that spawns one foreground child on a SQLite store and SIGKILLs itself
at a chosen point (everything queued before is flushed first, so the point is exact):

* ``child-finished``: the child's final status is committed, the parent's tool result is not;
* ``child-running``: the child is in its first model call;
* ``child-created``: the child's record is committed, it has not called its model yet.

The test then recovers the store in a new Runtime and counts the child's model calls (a marker file
gets one line per call, in both processes) and the result in the parent's transcript.
``python tests/faults/test_store_spawn_once.py WINDOW STORE`` runs the crashing side.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.messages import Message
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store.sqlite import SQLiteStore

CHILD_RESULT = "CHILD RESULT 42"
PARENT_DONE = "PARENT DONE"


def _texts(messages: list[Message]) -> list[str]:
    return [b.content if b.kind == "tool_result" else b.text for m in messages for b in m.content
            if b.kind in ("text", "tool_result")]


def script(marker: Path, crash: str | None) -> object:
    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            with marker.open("a") as f:
                f.write("call\n")
            if crash == "child-running":
                _die()
            return ModelResponse(text=CHILD_RESULT)
        results = [b for m in req.messages for b in m.tool_results]
        if results and not results[-1].is_error:
            return ModelResponse(text=f"{PARENT_DONE}: {results[-1].content.splitlines()[-1]}")
        # nothing spawned yet, or the spawn call came back as an error (interrupted): spawn (again)
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose",
                                                                  "prompt": "child job", "description": "job"})])
    return fn


_STORE: list[SQLiteStore] = []


def _die() -> None:
    _STORE[0].flush()
    os.kill(os.getpid(), signal.SIGKILL)


def runtime(store_path: Path, fn: object) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=store_path.parent, store=f"sqlite:///{store_path}",  # type: ignore[arg-type]
                   builtin_tools=False, permission_mode="yolo")


async def _crash(window: str, store_path: Path) -> None:
    rt = runtime(store_path, script(store_path.parent / "marker", window))
    store = rt.store
    assert isinstance(store, SQLiteStore)
    _STORE.append(store)
    append, create = store.append_messages, store.create_run

    def append_then_maybe_die(run_id: str, start: int, msgs: object, *a: object, **k: object) -> None:
        if window == "child-finished" and any(m.tool_results for m in msgs):  # type: ignore[attr-defined]
            rec = store.get_run(run_id) if run_id else None
            if rec is None or rec.depth == 0:
                _die()  # the child's end is committed (flushed), the parent's tool result never is
        append(run_id, start, msgs, *a, **k)  # type: ignore[arg-type]

    def create_then_maybe_die(rec: object) -> None:
        create(rec)  # type: ignore[arg-type]
        if window == "child-created" and rec.depth == 1:  # type: ignore[attr-defined]
            _die()

    store.append_messages = append_then_maybe_die  # type: ignore[method-assign,assignment]
    store.create_run = create_then_maybe_die  # type: ignore[method-assign,assignment]
    async with rt:
        await rt.run("delegate the job")


def crash_and_recover(tmp_path: Path, window: str) -> tuple[int, int, list[str], str]:
    """(child model calls, child records, the parent's transcript texts, the parent's result)."""
    store_path = tmp_path / "state.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, __file__, window, str(store_path)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    marker = tmp_path / "marker"

    async def recover() -> None:
        async with runtime(store_path, script(marker, None)) as rt:
            live = [n.id for n in rt.manager.nodes.values() if not n.status.is_final()]
            await rt.wait(live, timeout=10)

    asyncio.run(recover())
    s = SQLiteStore(store_path)
    try:
        runs = s.list_runs(include_archived=True)
        root = next(r for r in runs if r.depth == 0)
        kids = [r for r in runs if r.depth == 1]
        texts = _texts(s.transcript(root.run_id))
    finally:
        s.close()
    calls = len(marker.read_text().splitlines()) if marker.exists() else 0
    assert root.status == "completed", (root.status, root.error)
    return calls, len(kids), texts, root.result_text or ""


@pytest.mark.timeout(30)
def test_a_child_that_finished_before_the_crash_is_delivered_not_rerun(tmp_path: Path) -> None:
    calls, kids, texts, result = crash_and_recover(tmp_path, "child-finished")
    assert calls == 1  # the child's model ran once, before the crash
    assert kids == 1   # and it was not spawned again
    assert sum(CHILD_RESULT in t for t in texts) == 2  # its result in the tool result, and the parent's answer
    assert sum(CHILD_RESULT in t and "status completed" in t for t in texts) == 1
    assert result == f"{PARENT_DONE}: {CHILD_RESULT}"


@pytest.mark.timeout(30)
def test_a_child_running_at_the_crash_is_resumed_once_and_delivered_once(tmp_path: Path) -> None:
    calls, kids, texts, result = crash_and_recover(tmp_path, "child-running")
    assert calls == 2  # the call the crash interrupted, and one after the restart
    assert kids == 1
    assert sum(CHILD_RESULT in t and "status completed" in t for t in texts) == 1
    assert result == f"{PARENT_DONE}: {CHILD_RESULT}"


@pytest.mark.timeout(30)
def test_a_child_created_just_before_the_crash_runs_once_and_is_delivered_once(tmp_path: Path) -> None:
    calls, kids, texts, result = crash_and_recover(tmp_path, "child-created")
    assert calls == 1
    assert kids == 1
    assert sum(CHILD_RESULT in t and "status completed" in t for t in texts) == 1
    assert result == f"{PARENT_DONE}: {CHILD_RESULT}"


if __name__ == "__main__":
    asyncio.run(_crash(sys.argv[1], Path(sys.argv[2])))
