"""Per-turn overhead of the agent loop (AgentCore) with an instant FunctionModel.

    .venv/bin/python bench/loop_overhead.py [--turns 50] [--runs 400]

Each run is one agent that calls a trivial inline tool for ``--turns`` turns and then answers, so
one turn = build the request, call the model, record the reply, validate and run one tool call,
append the result, check the limits.  Prints the median µs per turn (and per run) over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from subagents import Limits, tool
from subagents.models import AgentInfo, FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.paths import Workspace


@tool(category="read", inline=True)
def ping(n: int) -> str:
    """Answer pong.

    Args:
        n: a number echoed back.
    """
    return f"pong {n}"


async def main(turns: int, runs: int) -> None:
    def script(req: ModelRequest) -> ModelResponse:
        k = len(req.messages) // 2
        if k < turns - 1:
            return ModelResponse(tool_calls=[ToolCall("ping", {"n": k})])
        return ModelResponse(text="done")

    info = AgentInfo("bench", "bench", "general-purpose")
    model = FunctionModel(script, inline=True)  # the loop alone: no thread hop for the instant script
    with tempfile.TemporaryDirectory() as d:
        ctx = ToolContext(agent=info, workspace=Workspace(d))
        registry = ToolRegistry([ping])
        per_run = []
        for i in range(runs + 20):
            core = AgentCore(info=info, model=model, system="s", registry=registry, ctx=ctx,
                             limits=Limits(max_turns=turns + 1))
            t0 = time.perf_counter()
            r = await core.run("go")
            dt = time.perf_counter() - t0
            assert (r.text, r.turns) == ("done", turns), (r.text, r.turns)
            if i >= 20:  # warm-up
                per_run.append(dt)
    med = statistics.median(per_run)
    print(f"agent loop, {turns} turns per run, {runs} runs: median {med * 1e6 / turns:.1f} µs per turn "
          f"({med * 1e6:.0f} µs per run; tool calls run inline, events off)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--runs", type=int, default=400)
    a = ap.parse_args()
    asyncio.run(main(a.turns, a.runs))
