"""Two workers in two processes share one fan-out: both execute activities, every result reaches the root
once, the store agrees."""

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
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.limits import Limits
from subagents.messages import TextBlock
from subagents.store import open_store

from .scripts import NOTE

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

TESTS = Path(__file__).resolve().parents[2]
N = 12


def _worker(url: str, workdir: Path, store_url: str, marks: Path, log: Path) -> subprocess.Popen[bytes]:
    """A ``subagents worker`` process; its tool side effects go to its own ``marks`` file."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "SUBAGENTS_TEST_MARKS": str(marks), "SUBAGENTS_MAX_THREADS": str(N)}  # the whole fan-out at once
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "subagents.cli.worker_cmd", "--engine", url, "--workdir", str(workdir),
             "--store", store_url, "--model", "engines.temporal.scripts:model",
             "--tool", "engines.temporal.scripts:mark", "--tool", "engines.temporal.scripts:nap",
             "--permission-mode", "yolo"], env=env, stdout=out, stderr=subprocess.STDOUT)


async def _pollers(env: WorkflowEnvironment, queue: str) -> int:
    """How many distinct workers poll ``queue`` for activities."""
    resp = await env.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace="default", task_queue=TaskQueue(name=queue), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY))
    return len({p.identity for p in resp.pollers})


async def test_two_worker_processes_share_one_fan_out(temporal_env: WorkflowEnvironment, workdir: Path,
                                                      tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    target = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", f"two-{uuid.uuid4()}")
    engine = TemporalEngine(temporal_env.client, target)
    marks = [tmp_path / "marks-a.txt", tmp_path / "marks-b.txt"]
    log = tmp_path / "workers.log"
    workers = [_worker(target.url, workdir, store_url, m, log) for m in marks]
    try:
        deadline = time.monotonic() + 60
        while await _pollers(temporal_env, target.task_queue) < 2:  # both ready, or one could take it all
            assert time.monotonic() < deadline, ("the two workers never both polled the task queue:\n"
                                                 + log.read_text()[-3000:])
            await asyncio.sleep(0.1)
        result = await asyncio.wait_for(engine.run(f"fanout {N} 0.1", limits=Limits(max_turns=400)), 90)
    finally:
        for p in workers:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(10)
    assert (result.status, result.text) == ("completed", f"got {N} notifications"), log.read_text()[-3000:]
    done = [m.read_text().split() if m.exists() else [] for m in marks]
    assert all(done), f"one worker executed no tool activity: {done}"
    assert sorted(done[0] + done[1]) == sorted(f"c{i}" for i in range(N))  # each side effect once, on one worker
    store = open_store(store_url, workdir)
    try:
        runs = store.list_runs(root_id=result.id)
        assert len(runs) == N + 1
        assert {r.status for r in runs} == {"completed"}
        anns = store.announcements_of(parent_id=result.id)
        assert sorted(a.child_id for a in anns) == sorted(r.run_id for r in runs if r.parent_id == result.id)
        assert all(a.delivered_at is not None for a in anns)
        texts = [b.text for m in store.transcript(result.id) if m.role == "user" for b in m.content
                 if isinstance(b, TextBlock)]
        assert sum(t.count(NOTE) for t in texts) == N
    finally:
        store.close()
