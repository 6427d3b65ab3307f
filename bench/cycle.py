"""Delegation cycle cost: a parent that spawns one foreground child, the child answers, the parent answers.

Usage: ``python bench/cycle.py [--store memory://|sqlite] [--n 2000]``; prints µs per cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def script(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse(text="child done")
    last = req.messages[-1]
    if last.tool_results:
        return ModelResponse(text="parent done")
    return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "go",
                                                              "description": "d"})])


async def bench(store: str, n: int, workdir: str) -> float:
    async with Runtime(model=FunctionModel(script, inline=True),
                       workdir=workdir, store=store, builtin_tools=False) as rt:
        for _ in range(50):
            await rt.run("hi")
        t0 = time.perf_counter()
        for _ in range(n):
            await rt.run("hi")
        dt = time.perf_counter() - t0
    return dt / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default="memory://")
    ap.add_argument("--n", type=int, default=2000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        store = f"sqlite:///{d}/state.db" if a.store == "sqlite" else a.store
        us = asyncio.run(bench(store, a.n, d))
    print(f"{a.store}: {us:.1f} µs per parent→child→parent cycle")


if __name__ == "__main__":
    main()
