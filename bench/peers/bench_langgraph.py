"""LangGraph: ``create_react_agent`` graphs; the parent's tool invokes a child graph.

Fake model: a minimal ``BaseChatModel`` subclass with ``_agenerate`` (the stock fakes are sync
only and cannot emit tool calls); ``bind_tools`` returns itself.  Delegation is LangChain's
sub-agent pattern: a ``@tool`` doing ``await child_graph.ainvoke(...)`` with a fresh conversation.
Fan-out: one AIMessage with N tool calls; the prebuilt agent sends one ``Send`` task per call,
run concurrently in one superstep.
"""
from __future__ import annotations

import warnings
from importlib.metadata import version
from typing import Any

from _harness import BARE_TEXT, CHILD_TEXT, PARENT_TEXT, main
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

warnings.filterwarnings("ignore")
from langgraph.prebuilt import create_react_agent  # noqa: E402


class FakeModel(BaseChatModel):
    role: str
    text: str = ""
    box: Any  # shared {"n": int, "calls": {...}}; typed Any so pydantic does not copy it

    @property
    def _llm_type(self) -> str:
        return "fake"

    def bind_tools(self, tools, **kw):
        return self

    def _reply(self, messages):
        self.box["calls"][self.role] += 1
        if self.role != "parent":
            return AIMessage(content=self.text)
        rets = []
        for m in reversed(messages):
            if not isinstance(m, ToolMessage):
                break
            rets.append(m)
        n = self.box["n"]
        if not rets:
            return AIMessage(content="", tool_calls=[{"name": "child", "args": {"task": f"task {i}"},
                                                      "id": f"call_{i}", "type": "tool_call"} for i in range(n)])
        assert len(rets) == n, (len(rets), n)
        assert all(r.content == CHILD_TEXT for r in rets)
        return AIMessage(content=PARENT_TEXT)

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])


class Impl:
    name = "langgraph"
    version = f"{version('langgraph')} (langchain-core {version('langchain-core')})"

    def __init__(self):
        self.box = {"n": 1, "calls": {"parent": 0, "child": 0, "bare": 0}}
        box = self.box
        child_graph = create_react_agent(FakeModel(role="child", text=CHILD_TEXT, box=box), [],
                                         prompt="You are a child agent.", name="child")
        self.bare_graph = create_react_agent(FakeModel(role="bare", text=BARE_TEXT, box=box), [],
                                             prompt="You answer.", name="bare")

        @tool("child")
        async def child_tool(task: str) -> str:
            """Delegate a task to the child agent."""
            out = await child_graph.ainvoke({"messages": [HumanMessage(task)]})
            return out["messages"][-1].content

        self.parent_graph = create_react_agent(FakeModel(role="parent", box=box), [child_tool],
                                               prompt="You delegate.", name="parent")

    async def _run(self, graph, text):
        out = await graph.ainvoke({"messages": [HumanMessage(text)]}, {"recursion_limit": 100})
        return out["messages"][-1].content

    async def cycle(self):
        self.box["n"] = 1
        return await self._run(self.parent_graph, "do the thing")

    async def bare(self):
        return await self._run(self.bare_graph, "hello")

    async def fanout(self, n):
        self.box["n"] = n
        return await self._run(self.parent_graph, "fanout")

    def counts(self):
        return dict(self.box["calls"])


if __name__ == "__main__":
    main(Impl)
