"""Run ``subagents chat`` with a scripted model, as a real process (the pseudo-terminal tests start this file).

``python scripted_chat.py ARGS...``: ARGS go to ``subagents chat``.  The root agent's script reads the
person's message:

- ``spawn LABEL``: starts a background child labelled LABEL, answers ``STARTED LABEL``; the child
  works until a file ``release-LABEL`` appears in the workspace, then answers ``FOUND LABEL``;
- ``edit NAME``: writes the file NAME (asks for approval in the default mode), answers with the tool result;
- ``hang``: never answers (Ctrl-C stops the turn);
- an announcement (seed 003's trigger message): ``NO_REPLY`` when the label holds "quiet", else
  ``HEARD: <the findings>``;
- anything else: ``ECHO #N: <message>`` (N: how many person messages the conversation holds, so a
  resumed conversation shows it kept its history).
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

from subagents.cli.main import main
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


async def conversation(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return await _child(req)
    last = req.messages[-1]
    if last.tool_results:
        return ModelResponse(" | ".join(r.content for r in last.tool_results))
    text = last.text
    announced = re.search(r'A background task "([^"]*)"[^\n]* just ([^\n]*)\n.*?Findings:\n(.*?)\n\nStats', text, re.S)
    if announced:
        label, _, findings = announced.groups()
        return ModelResponse("NO_REPLY" if "quiet" in label else f"HEARD: {findings}")
    if text.startswith("spawn "):
        label = text.split()[1]
        return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"find {label}",
                                                           "background": True, "label": label})])
    if text == "hang":
        await asyncio.Event().wait()  # until Ctrl-C closes the turn
    if text.startswith("edit "):
        return ModelResponse("", [ToolCall("write_file", {"path": text.split()[1], "content": "edited"})])
    said = [m for m in req.messages if m.role == "user" and m.text and not m.tool_results]
    return ModelResponse(f"ECHO #{len(said)}: {text}")


async def _child(req: ModelRequest) -> ModelResponse:
    label = req.messages[0].text.split()[-1]
    release = Path(f"release-{label}")
    while not release.exists():  # noqa: ASYNC110, ASYNC240 - the test (another process) creates it
        await asyncio.sleep(0.05)
    return ModelResponse(f"FOUND {label}")


if __name__ == "__main__":
    sys.exit(main(["chat", *sys.argv[1:]], model=FunctionModel(conversation)))
