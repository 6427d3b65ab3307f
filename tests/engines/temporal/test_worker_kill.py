"""Kill a worker with SIGKILL in the middle of a tree of background children, start another: the tree
finishes, every result reaches the root once, no tool activity that completed runs again, the store agrees."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.shapes import ActivityOptions
from subagents.limits import Limits
from subagents.messages import TextBlock
from subagents.store import open_store

from .scripts import NOTE

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

TESTS = Path(__file__).resolve().parents[2]
N = 6


def _worker(url: str, workdir: Path, store_url: str, marks: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "SUBAGENTS_TEST_MARKS": str(marks), "SUBAGENTS_MAX_THREADS": str(N)}  # the whole fan-out at once
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "subagents.cli.worker_cmd", "--engine", url, "--workdir", str(workdir),
             "--store", store_url, "--model", "engines.temporal.scripts:model",
             "--tool", "engines.temporal.scripts:mark", "--tool", "engines.temporal.scripts:nap",
             "--permission-mode", "yolo"], env=env, stdout=out, stderr=subprocess.STDOUT)


def _completed_marks(store_url: str, workdir: Path, root_id: str) -> set[str]:
    """The tags whose ``mark`` activity completed: its result is in the child's recorded transcript."""
    if not Path(store_url.removeprefix("sqlite:///")).exists():
        return set()
    store = open_store(store_url, workdir)
    try:
        return {r.content.removeprefix("marked ") for run in store.list_runs(root_id=root_id)
                if run.run_id != root_id for m in store.transcript(run.run_id) for r in m.tool_results
                if r.content.startswith("marked ")}
    finally:
        store.close()


async def _until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_a_killed_worker_s_tree_finishes_on_another_worker(temporal_env: WorkflowEnvironment, workdir: Path,
                                                                 tmp_path: Path) -> None:
    marks, log = tmp_path / "marks.txt", tmp_path / "workers.log"
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    target = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", f"kill-{uuid.uuid4()}")
    engine = TemporalEngine(temporal_env.client, target,
                            ActivityOptions(model_timeout_s=3, tool_timeout_s=3, store_timeout_s=5))

    def seen() -> list[str]:
        return marks.read_text().split() if marks.exists() else []

    first = _worker(target.url, workdir, store_url, marks, log)
    second = None
    try:
        run_id = await engine.start(f"fanout {N} 0.4", limits=Limits(max_turns=400))
        # kill once two mark activities have *completed* (their results are in the children's transcripts): a mark
        # whose activity was still running at the kill may run again (at least once), a completed one must not
        await _until(lambda: len(_completed_marks(store_url, workdir, run_id)) >= 2, 60,
                     "two children's side effects completed on the first worker")
        first.send_signal(signal.SIGKILL)
        first.wait()
        completed = _completed_marks(store_url, workdir, run_id)
        before = seen()
        assert len(before) < N, "the tree was finished before the kill; nothing was tested"
        second = _worker(target.url, workdir, store_url, marks, log)
        result = await asyncio.wait_for(engine.result(run_id), 50)
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(10)
    assert (result.status, result.text) == ("completed", f"got {N} notifications"), log.read_text()[-3000:]
    after = seen()
    assert sorted(set(after)) == sorted(f"c{i}" for i in range(N))  # every child's side effect happened
    assert [t for t in completed if after.count(t) != 1] == []  # none that had completed ran again after the kill
    assert len(after) - N <= N - len(completed)  # only a mark still running at the kill may have run twice
    store = open_store(store_url, workdir)
    try:
        runs = store.list_runs(root_id=run_id)
        assert len(runs) == N + 1
        assert {r.status for r in runs} == {"completed"}
        assert {r.owner for r in runs} == {f"temporal:{target.task_queue}"}  # no process: the engine owns them
        assert sorted(r.result_text or "" for r in runs if r.parent_id == run_id) == sorted(
            f"done c{i}" for i in range(N))
        anns = store.announcements_of(parent_id=run_id)
        assert len(anns) == N
        assert all(a.delivered_at is not None for a in anns)
        texts = [b.text for m in store.transcript(run_id) if m.role == "user" for b in m.content
                 if isinstance(b, TextBlock)]
        assert sum(t.count(NOTE) for t in texts) == N
        assert sorted(a.child_id for a in anns) == sorted(r.run_id for r in runs if r.parent_id == run_id)
    finally:
        store.close()
