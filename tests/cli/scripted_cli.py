"""Run ``subagents`` with a scripted model, as a real process (the pseudo-terminal tests start this file).

``python scripted_cli.py SCRIPT ARGS...``: SCRIPT names a model script below; ARGS go to ``subagents``.
"""

from __future__ import annotations

import sys
import time

from subagents.cli.main import main
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def _results(req: ModelRequest) -> list[str]:
    return [r.content for m in req.messages for r in m.tool_results]


def write_two(req: ModelRequest) -> ModelResponse:
    """Writes a.txt, then b.txt, then answers with both tool results."""
    done = _results(req)
    if len(done) < 2:
        name = "ab"[len(done)] + ".txt"
        return ModelResponse("", [ToolCall("write_file", {"path": name, "content": name})])
    return ModelResponse("RESULTS: " + " || ".join(done))


def delegate(req: ModelRequest) -> ModelResponse:
    """The root spawns a background child that writes c.txt; the root waits and reports."""
    done = _results(req)
    if req.agent.depth == 1:
        return ModelResponse("", [ToolCall("write_file", {"path": "c.txt", "content": "c"})]
                             ) if not done else ModelResponse("child: " + done[0])
    if not done:
        return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "write c",
                                                           "background": True})])
    if len(done) == 1:
        return ModelResponse("", [ToolCall("wait", {})])
    return ModelResponse("RESULTS: " + done[-1])


def sleeper(req: ModelRequest) -> ModelResponse:
    """A root and a background child each start a long command named by the marker in the prompt."""
    marker = req.messages[0].text.split()[-1]
    command = f"touch {marker}-{req.agent.depth}.started; exec -a {marker} sleep 300"
    if req.agent.depth == 0 and len(req.messages) == 1:
        return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "background": True,
                                                           "prompt": f"sleep {marker}"}),
                                  ToolCall("bash", {"command": command})])
    if len(req.messages) == 1:
        return ModelResponse("", [ToolCall("bash", {"command": command})])
    return ModelResponse("woke up")


async def hang(req: ModelRequest) -> ModelResponse:
    """Touches ``<prompt's last word>.started`` in the workspace, then never answers (to be signalled)."""
    import asyncio
    from pathlib import Path

    Path(req.messages[0].text.split()[-1] + ".started").touch()  # noqa: ASYNC240 - a test's marker, once
    await asyncio.Event().wait()
    return ModelResponse("never")


def paced(req: ModelRequest) -> ModelResponse:
    """``write_two``, each answer 0.2 s after its request (a reader that leaves early leaves before the end)."""
    time.sleep(0.2)
    return write_two(req)


SCRIPTS = {"write_two": write_two, "delegate": delegate, "sleeper": sleeper, "hang": hang, "paced": paced}

if __name__ == "__main__":
    sys.exit(main(sys.argv[2:], model=FunctionModel(SCRIPTS[sys.argv[1]])))
