"""A fan-out of many background children: what the parent sees stays the same, and the work per child does
not grow with the number of children (counted, never timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from subagents import AgentDefinition, Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def _turn(req: ModelRequest) -> int:
    return sum(1 for m in req.messages if m.role == "assistant")


async def test_a_queued_spawns_result_is_the_json_of_its_fields(workdir: Path) -> None:
    """The result of a spawn that waits for a slot is written by a template: byte for byte what json.dumps
    writes of its fields (names that need escaping included)."""
    odd = AgentDefinition("odd", "odd names", "You are odd.",
                          nickname_candidates=[f'zoë "q{i}" \\ \u2603' for i in range(4)])
    seen: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            return ModelResponse(text="ok")
        if _turn(req) == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "odd", "prompt": f"t{i}",
                                                                      "background": True}, id=f"c{i}")
                                             for i in range(4)])
        if not seen:
            seen.extend(r.content for r in req.messages[-1].tool_results)
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory://",
                       agents=[odd], max_threads=1, when_full="queue") as rt:
        await rt.run("go")
        kids = {a.id: a for a in rt.agents() if a.depth == 1}
    assert len(seen) == 4
    for ahead, content in enumerate(seen, start=-1):
        fields = json.loads(content)
        child = kids[fields["agent_id"]]
        want = {"agent_id": child.id, "nickname": child.nickname, "status": "running" if ahead < 0 else "queued",
                "permission_mode": "default",
                "note": "runs in the background; its result will be announced to you, or collect it with wait"}
        if ahead >= 0:
            want["queued"] = (f"queued: {ahead} agents ahead of it; it starts when a slot frees (max_threads=1)")
        assert content == json.dumps(want)


_MEASURE = r"""
import asyncio, gc, json, sys
from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

n, seen = 3000, {}


def fn(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0 or req.messages[0].text == "warm up":
        return ModelResponse(text="ok" if req.agent.depth else "done")
    turn, last = sum(1 for m in req.messages if m.role == "assistant"), req.messages[-1]
    if turn == 0:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose",
                                                                  "prompt": f"t{i}", "background": True})
                                         for i in range(n)])
    if turn == 1:
        ids = [json.loads(r.content)["agent_id"] for r in last.tool_results]
        seen["ids"] = ids
        return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": ids[i:i + 100]})
                                         for i in range(0, n, 100)])
    return ModelResponse(text="done")


async def main() -> None:
    async with Runtime(model=FunctionModel(fn, inline=True), workdir=sys.argv[1], store="memory://",
                       max_threads=100, when_full="queue") as rt:
        assert (await rt.run("warm up")).text == "done"
        seen.clear()
        gc.collect()
        before = len(gc.get_objects())
        assert (await rt.run("fan out")).text == "done"
        gc.collect()
        per_child = (len(gc.get_objects()) - before) / n
        (ann,) = rt.store.announcements_of(child_id=seen["ids"][0])
        print(json.dumps({"per_child": per_child, "child_id": ann.child_id == seen["ids"][0],
                          "notification": "<subagent-notification>" in ann.text,
                          "delivered": ann.delivered_at is not None,
                          "pending": len(rt.store.pending_announcements())}))

asyncio.run(main())
"""


def test_a_finished_fan_out_keeps_about_eight_tracked_objects_per_child(workdir: Path) -> None:
    """What stays of each finished child (node, result, record, announcement, the parent's call and result)
    is ~7.5 objects the garbage collector walks on every full collection (~10 before its lists of children and
    follow-ups were made on demand and its transcript packed flat): the memory store keeps a child's
    announcement as a tuple of plain values (untracked), read back as records.  Counted in a fresh interpreter:
    the test process's other objects (threads, caches of earlier tests) would blur the count."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(workdir)], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (got["child_id"], got["notification"], got["delivered"], got["pending"]) == (True, True, True, 0)
    assert got["per_child"] < 8.0, got["per_child"]


_QUEUED = """
import asyncio, gc, json, sys
from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

n, seen = 2000, {}


def fn(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        if "per_child" not in seen:  # the first child to run: every other one waits for a slot
            gc.collect()
            seen["per_child"] = (len(gc.get_objects()) - seen["before"]) / n
        return ModelResponse(text="ok")
    if req.messages[0].text == "warm up":
        return ModelResponse(text="done")
    if sum(1 for m in req.messages if m.role == "assistant") == 0:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "general-purpose",
                                                                  "prompt": f"t{i}", "background": True})
                                         for i in range(n)])
    return ModelResponse(text="done")


async def main() -> None:
    async with Runtime(model=FunctionModel(fn, inline=True), workdir=sys.argv[1], store=sys.argv[2],
                       max_threads=1, when_full="queue") as rt:
        assert (await rt.run("warm up")).text == "done"
        gc.collect()
        seen["before"] = len(gc.get_objects())
        assert (await rt.run("fan out")).text == "done"
        await rt.wait([a.id for a in rt.agents() if a.depth == 1])
        print(json.dumps({"per_child": seen["per_child"]}))

asyncio.run(main())
"""


def test_a_child_waiting_for_a_slot_keeps_about_eight_tracked_objects(workdir: Path) -> None:
    """2,000 background children queued behind ``max_threads=1``: each waits as its node (its own place in the
    queue), its identity, its recipe, its record, its todo list, and the parent's call and result for it (~8
    objects the collector walks).  Its tool context, its lists of children and follow-ups are made only when
    it needs them (it was ~12).  Counted as the first child runs, in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _QUEUED, str(workdir), "memory://"], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    per_child = json.loads(out.stdout.strip().splitlines()[-1])["per_child"]
    assert per_child < 8.5, per_child
