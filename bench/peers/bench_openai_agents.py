"""OpenAI Agents SDK: the child ``Agent`` exposed to the parent with ``Agent.as_tool()``.

Fake model: a minimal ``agents.models.interface.Model`` subclass returning canned
``ModelResponse``s at once (no network).  Fan-out: one response with N ``function_call`` items;
the SDK runs the function tools of one response concurrently.  Tracing is disabled (its default
exporter would upload spans).
"""
from __future__ import annotations

import json
from importlib.metadata import version

from _harness import BARE_TEXT, CHILD_TEXT, PARENT_TEXT, main
from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

set_tracing_disabled(True)


def _msg(text):
    return ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(text=text, type="output_text", annotations=[],
                                                             logprobs=[])])


def _usage():
    return Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)


def _get(item, key):
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


class TextModel(Model):
    def __init__(self, text):
        self.text, self.calls = text, 0

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, **kw):
        self.calls += 1
        return ModelResponse(output=[_msg(self.text)], usage=_usage(), response_id=None)

    def stream_response(self, *a, **k):
        raise NotImplementedError


class ParentModel(Model):
    def __init__(self):
        self.n, self.calls = 1, 0

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, **kw):
        self.calls += 1
        outs = [] if isinstance(input, str) else [i for i in input if _get(i, "type") == "function_call_output"]
        if not outs:
            assert any(t.name == "child" for t in tools)
            return ModelResponse(output=[
                ResponseFunctionToolCall(id=f"fc_{i}", call_id=f"call_{i}", type="function_call", name="child",
                                         arguments=json.dumps({"input": f"task {i}"})) for i in range(self.n)],
                usage=_usage(), response_id=None)
        assert len(outs) == self.n, (len(outs), self.n)
        assert all(str(_get(o, "output")) == CHILD_TEXT for o in outs), outs[0]
        return ModelResponse(output=[_msg(PARENT_TEXT)], usage=_usage(), response_id=None)

    def stream_response(self, *a, **k):
        raise NotImplementedError


class Impl:
    name = "openai-agents"
    version = version("openai-agents")

    def __init__(self):
        self.child_model, self.parent_model = TextModel(CHILD_TEXT), ParentModel()
        self.bare_model = TextModel(BARE_TEXT)
        child = Agent(name="child", instructions="You are a child agent.", model=self.child_model)
        self.parent = Agent(name="parent", instructions="You delegate.", model=self.parent_model,
                            tools=[child.as_tool(tool_name="child", tool_description="Delegate a task.")])
        self.bare_agent = Agent(name="bare", instructions="You answer.", model=self.bare_model)

    async def cycle(self):
        self.parent_model.n = 1
        return (await Runner.run(self.parent, "do the thing")).final_output

    async def bare(self):
        return (await Runner.run(self.bare_agent, "hello")).final_output

    async def fanout(self, n):
        self.parent_model.n = n
        return (await Runner.run(self.parent, "fanout", max_turns=10)).final_output

    def counts(self):
        return {"parent": self.parent_model.calls, "child": self.child_model.calls, "bare": self.bare_model.calls}


if __name__ == "__main__":
    main(Impl)
