"""The scripted model and tools the Temporal tests run on workers (named by import path across processes).

``mark(tag)`` appends ``tag`` to the file named by ``$SUBAGENTS_TEST_MARKS``: one line per executed tool
activity, so a test counts side effects.  The model (``model``):

- a root whose prompt is ``fanout N [delay]`` spawns N background children in one turn (child ``i`` waits
  ``delay * (i + 1)`` seconds: they end one after the other), then naps
  (a read-only tool) until N announcements reached it, then answers ``got N notifications``;
- a root whose prompt is ``listen`` naps until a message reaches it (``send_input``), then answers
  ``heard <message>`` (it naps forever when none comes: for ``close``);
- ``waiter`` spawns two background children and waits for them; ``closer`` spawns one that naps forever
  and one that ends, closes the first, waits for the second; both answer with their tool results;
- any other root calls ``mark(root)``, spawns one foreground child, then answers with its result;
- a child whose prompt starts with ``forever`` naps forever; any other child waits ``delay`` seconds (its
  prompt's last word, default 0), calls ``mark(<its prompt's first word>)`` and answers ``done <that word>``.
"""

from __future__ import annotations

import json
import os
import time

from subagents.messages import TextBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.base import tool

NOTE = "<subagent-notification>"


@tool(category="edit")
def mark(tag: str) -> str:
    """Record a side effect.

    Args:
        tag: what to record.
    """
    with open(os.environ["SUBAGENTS_TEST_MARKS"], "a", encoding="utf-8") as f:
        f.write(tag + "\n")
    return f"marked {tag}"


@tool(category="read")
def nap(seconds: float) -> str:
    """Wait a little.

    Args:
        seconds: how long.
    """
    time.sleep(seconds)
    return "rested"


def _script(req: ModelRequest) -> ModelResponse:
    turns = sum(1 for m in req.messages if m.role == "assistant")
    task = req.messages[0].text
    if req.agent.depth > 0:
        words = task.split()
        if words[0] == "forever":
            return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.05})])
        if turns == 0:
            time.sleep(float(words[-1]) if len(words) > 1 else 0.0)
            return ModelResponse(tool_calls=[ToolCall("mark", {"tag": words[0]})])
        return ModelResponse(text=f"done {words[0]}")
    if task.startswith("fanout"):
        parts = task.split()
        n, delay = int(parts[1]), parts[2] if len(parts) > 2 else "0"
        if turns == 0:
            return ModelResponse(tool_calls=[
                ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"c{i} {float(delay) * (i + 1)}",
                                         "description": f"child {i}", "background": True}) for i in range(n)])
        seen = sum(b.text.count(NOTE) for m in req.messages if m.role == "user" for b in m.content
                   if isinstance(b, TextBlock))
        if seen < n:
            return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.2})])
        return ModelResponse(text=f"got {seen} notifications")
    if task in ("waiter", "closer"):  # two background children, then wait for them / close the first
        if turns == 0:
            first = "forever" if task == "closer" else "w0 0.1"
            return ModelResponse(tool_calls=[
                ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": p, "background": True})
                for p in (first, "w1 0.2")])
        if turns == 1:
            if task == "waiter":
                return ModelResponse(tool_calls=[ToolCall("wait", {})])
            spawned = json.loads(req.messages[-1].tool_results[0].content)
            return ModelResponse(tool_calls=[ToolCall("close_agent", {"agent_id": spawned["nickname"]}),
                                             ToolCall("wait", {"timeout_s": 30})])
        return ModelResponse(text="\n---\n".join(r.content for r in req.messages[-1].tool_results))
    if task == "listen":  # naps until a message from outside arrives, then repeats it
        heard = [b.text for m in req.messages[1:] if m.role == "user" for b in m.content if isinstance(b, TextBlock)]
        return ModelResponse(text="heard " + heard[0]) if heard else ModelResponse(
            tool_calls=[ToolCall("nap", {"seconds": 0.05})])
    if turns == 0:
        return ModelResponse(tool_calls=[ToolCall("mark", {"tag": "root"})])
    if turns == 1:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose",
                                                                   "prompt": "kid", "description": "a kid"})])
    return ModelResponse(text="root got: " + req.messages[-1].tool_results[0].content.splitlines()[-1])


model = FunctionModel(_script, name="scripted")
