"""pydantic-ai: a parent tool that runs a child agent (the documented delegation pattern).

Fake model: pydantic-ai's own ``FunctionModel`` with async functions and explicit usage (so the
test double does not estimate tokens by walking the history).  Fan-out: one model response with
N ``ToolCallPart``s; pydantic-ai runs the tool calls of one response concurrently.  The default
``request_limit=50`` would refuse a fan-out over 50 children sharing the parent's usage: lifted.
"""
from __future__ import annotations

from importlib.metadata import version

from _harness import BARE_TEXT, CHILD_TEXT, PARENT_TEXT, main
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

NO_LIMIT = UsageLimits(request_limit=None)


class Impl:
    name = "pydantic-ai"
    version = version("pydantic-ai-slim")

    def __init__(self):
        self.n = 1
        self.c = {"parent": 0, "child": 0, "bare": 0}
        c = self.c

        def usage():
            return RequestUsage(input_tokens=1, output_tokens=1)

        async def child_fn(messages, info: AgentInfo) -> ModelResponse:
            c["child"] += 1
            return ModelResponse(parts=[TextPart(CHILD_TEXT)], usage=usage())

        async def bare_fn(messages, info: AgentInfo) -> ModelResponse:
            c["bare"] += 1
            return ModelResponse(parts=[TextPart(BARE_TEXT)], usage=usage())

        async def parent_fn(messages, info: AgentInfo) -> ModelResponse:
            c["parent"] += 1
            rets = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
            if not rets:
                assert any(t.name == "child" for t in info.function_tools)
                return ModelResponse(parts=[ToolCallPart("child", {"task": f"task {i}"}, tool_call_id=f"call_{i}")
                                            for i in range(self.n)], usage=usage())
            assert len(rets) == self.n, (len(rets), self.n)
            assert all(r.content == CHILD_TEXT for r in rets)
            return ModelResponse(parts=[TextPart(PARENT_TEXT)], usage=usage())

        child = Agent(FunctionModel(child_fn), instructions="You are a child agent.")
        self.bare_agent = Agent(FunctionModel(bare_fn), instructions="You answer.")
        self.parent = Agent(FunctionModel(parent_fn), instructions="You delegate.")

        @self.parent.tool(name="child")
        async def child_tool(ctx: RunContext[None], task: str) -> str:
            """Delegate a task to the child agent."""
            return (await child.run(task, usage=ctx.usage, usage_limits=NO_LIMIT)).output

    async def cycle(self):
        self.n = 1
        return (await self.parent.run("do the thing", usage_limits=NO_LIMIT)).output

    async def bare(self):
        return (await self.bare_agent.run("hello")).output

    async def fanout(self, n):
        self.n = n
        return (await self.parent.run("fanout", usage_limits=NO_LIMIT)).output

    def counts(self):
        return dict(self.c)


if __name__ == "__main__":
    main(Impl)
