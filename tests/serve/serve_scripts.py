"""The scripted model ``subagents serve`` runs in the tests: ``--model serve_scripts:model`` (tests/serve on
PYTHONPATH).

What an agent does is read from its task (the first user message):

* ``echo TEXT``: answers ``echo: TEXT`` at once (usage: 10 in, 5 out);
* ``hang``: its model call never returns (until the agent is closed);
* ``listen``: lists the workspace once per turn until a message from the user arrives, then answers
  ``heard: <the message>``;
* ``write``: writes ``out.txt`` and answers with what the tool said;
* ``delegate TEXT``: spawns an ``explore`` child in the background with ``echo TEXT``, waits for it and
  answers ``child said: <its result>``.
"""

from __future__ import annotations

import asyncio

from subagents.messages import Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def _task(req: ModelRequest) -> str:
    return req.messages[0].text.strip()


def _results(req: ModelRequest) -> list[str]:
    return [r.content for m in req.messages for r in m.tool_results]


async def script(req: ModelRequest) -> ModelResponse:
    task = _task(req)
    usage = Usage(input_tokens=10, output_tokens=5)
    if task.startswith("echo "):
        return ModelResponse(f"echo: {task[5:]}", usage=usage)
    if task == "hang":
        await asyncio.sleep(3600)
    if task == "listen":
        said = [m.text for m in req.messages[1:] if m.role == "user" and "<message from" in m.text]
        if said:
            return ModelResponse("heard: " + said[-1].split("\n")[1], usage=usage)
        await asyncio.sleep(0.05)
        return ModelResponse("", [ToolCall("list_dir", {"path": "."})], usage=usage)
    if task == "write":
        done = _results(req)
        if not done:
            return ModelResponse("", [ToolCall("write_file", {"path": "out.txt", "content": "x"})], usage=usage)
        return ModelResponse("write said: " + done[0], usage=usage)
    if task.startswith("delegate "):
        done = _results(req)
        if not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "explore", "background": True,
                                                               "prompt": "echo " + task[9:]})], usage=usage)
        if len(done) == 1:
            return ModelResponse("", [ToolCall("wait", {})], usage=usage)
        return ModelResponse("child said: " + done[-1].split("\n")[-1], usage=usage)
    return ModelResponse(f"unknown task: {task}", usage=usage)


model = FunctionModel(script)


def factory() -> FunctionModel:
    """The same model, made by a function (``serve_scripts:factory``)."""
    return FunctionModel(script)


not_a_model = 42
