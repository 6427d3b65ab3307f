"""A fan-out of many background children: what the parent sees stays the same, and the work per child does
not grow with the number of children (counted, never timed)."""

from __future__ import annotations

import gc
import json
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


async def test_a_finished_fan_out_keeps_about_ten_tracked_objects_per_child(workdir: Path) -> None:
    """What stays of each finished child (node, result, record, announcement, the parent's call and result)
    is ~10 objects the garbage collector walks on every full collection: the memory store keeps a child's
    announcement as a tuple of plain values (untracked), read back as records."""
    n, seen = 3000, {}

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0 or req.messages[0].text == "warm up":
            return ModelResponse(text="ok" if req.agent.depth else "done")
        turn, last = _turn(req), req.messages[-1]
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

    async with Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory://",
                       max_threads=100, when_full="queue") as rt:
        assert (await rt.run("warm up")).text == "done"
        per_child = float("inf")
        for _ in range(3):  # the least of three: objects other threads of the test process make only add to it
            seen.clear()
            gc.collect()
            before = len(gc.get_objects())
            assert (await rt.run("fan out")).text == "done"
            gc.collect()
            per_child = min(per_child, (len(gc.get_objects()) - before) / n)
            if per_child < 10.5:
                break
        store = rt.store
        first = seen["ids"][0]
        (ann,) = store.announcements_of(child_id=first)
        assert ann.child_id == first
        assert "<subagent-notification>" in ann.text
        assert ann.delivered_at is not None
        assert store.pending_announcements() == []
    assert per_child < 10.5, per_child
