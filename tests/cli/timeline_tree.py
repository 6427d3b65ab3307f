"""A small recorded tree for the timeline tests: a root with a background child and a failing child.

The root (general-purpose) spawns ``scanner`` in the background, then ``breaker`` in the foreground
(its model raises: it errors), waits for the scanner and answers.  The scanner calls ``list_dir`` and
answers.  Prompts and results carry markup that must stay text on the page (:data:`EVIL`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from subagents import Runtime
from subagents.messages import Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.models.pricing import Prices

#: Markup in a prompt and a result: a script, an image that fetches from the network and runs an
#: onerror handler, and the end of a script element.
EVIL = ('</script><script>window.__pwned = 1</script><img src="http://127.0.0.1:9/x.png" '
        'onerror="window.__pwned = 2">&amp; "quotes" \'too\'')
PACE_S = 0.05
USAGE = Usage(input_tokens=1000, output_tokens=200)
PRICES = Prices(input=3.0, output=15.0)  # each call: 1000 * 3e-6 + 200 * 15e-6 = $0.006


def _calls(req: ModelRequest) -> int:
    return sum(1 for m in req.messages if m.role == "assistant")


async def script(req: ModelRequest) -> ModelResponse:
    await asyncio.sleep(PACE_S)
    task = req.messages[0].text
    n = _calls(req)
    if req.agent.depth == 0:
        if n == 0:
            return ModelResponse("Spawning a scanner in the background.", [ToolCall("spawn_agent", {
                "agent_type": "explore", "prompt": "scan the files " + EVIL, "description": "scanner",
                "background": True})], usage=USAGE)
        if n == 1:
            return ModelResponse("", [ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "break things", "description": "breaker"})], usage=USAGE)
        if n == 2:
            return ModelResponse("", [ToolCall("wait", {})], usage=USAGE)
        return ModelResponse("All done: " + EVIL, usage=USAGE)
    if task.startswith("break"):
        raise RuntimeError("the breaker's model broke")
    if n == 0:
        return ModelResponse("", [ToolCall("list_dir", {"path": "."})], usage=USAGE)
    await asyncio.sleep(PACE_S * 2)
    return ModelResponse("Found the files. " + EVIL, usage=USAGE)


async def build(workdir: Path, db: Path) -> str:
    """Run the tree into the SQLite store at ``db``; return the root's run id."""
    model = FunctionModel(script, prices=PRICES)
    async with Runtime(model=model, workdir=workdir, store=f"sqlite:///{db}", permission_mode="yolo") as rt:
        result = await rt.run("Survey the project " + EVIL)
        return result.id
