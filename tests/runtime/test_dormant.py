"""A finished child lets its loop go (runtime/dormant.py): its core, conversation and tool context are
freed once its result is recorded and delivered, while ``result``, ``runs``, ``wait`` and ``resume``
still work — a resumed child gets its whole conversation back from the store.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.authority.guard import AgentGuard
from subagents.messages import Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.loop import AgentCore
from subagents.tools.context import ToolContext

N = 3


class Script:
    """The root spawns N background children, waits for them, answers; a resumed child echoes its history."""

    def __init__(self) -> None:
        self.seen_on_resume: list[list[str]] = []

    def __call__(self, req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            texts = [m.text for m in req.messages]
            if len(req.messages) > 1:  # resumed: its first run's conversation is there
                self.seen_on_resume.append(texts)
                return ModelResponse(text="again: " + " | ".join(texts))
            return ModelResponse(text=f"done {texts[0]}")
        last = req.messages[-1]
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[
                ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"task {i}",
                                         "description": f"c{i}", "background": True}, id=f"s{i}")
                for i in range(N)])
        if any(r.content.startswith("{") for r in last.tool_results):
            ids = [json.loads(r.content)["agent_id"] for r in last.tool_results]
            return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": ids}, id="w")])
        return ModelResponse(text="all done")


def _agent_id(o: AgentCore | ToolContext | AgentGuard) -> str:
    return o.agent.id if isinstance(o, ToolContext) else o.info.id


@pytest.mark.parametrize("store", ["memory://", "sqlite"])
async def test_a_finished_background_child_frees_its_loop_and_resumes_from_the_store(workdir: Path,
                                                                                      store: str) -> None:
    url = store if store == "memory://" else f"sqlite:///{workdir.parent}/state.db"
    script = Script()
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=url) as rt:
        mgr = rt.manager
        r = await rt.run("fan out")
        assert r.text == "all done"
        root = next(n for n in mgr.nodes.values() if n.parent_id is None)
        kids = [mgr.nodes[c] for c in root.children]
        assert len(kids) == N
        assert all(k.core_ is None for k in kids)
        gc.collect()
        ids = {k.id for k in kids}
        alive = [type(o).__name__ for o in gc.get_objects()
                 if isinstance(o, AgentCore | ToolContext | AgentGuard) and _agent_id(o) in ids]
        assert alive == []  # freed: core, tool context, guard (and with them the conversation and budget)
        # what status, result and listing read is still there
        for i, k in enumerate(kids):
            res = rt.result(k.id)
            assert res is not None
            assert res.text == f"done task {i}"
            assert str(rt.status(k.id)) == "completed"
        listed = {rec.run_id: rec for rec in rt.runs()}
        assert all(listed[k.id].result_text == f"done task {i}" for i, k in enumerate(kids))
        # resume: the loop is rebuilt with the stored conversation
        h = await rt.resume(kids[1].id, "more")
        again = (await rt.wait([h.id]))[h.id]
        assert again.text == "again: task 1 | done task 1 | more", again.text
        assert script.seen_on_resume == [["task 1", "done task 1", "more"]]
        mgr.store.flush()
        assert [m.text for m in mgr.store.transcript(kids[1].id)] == ["task 1", "done task 1", "more",
                                                                       again.text]



async def test_a_queued_agent_holds_no_loop_until_it_starts(workdir: Path) -> None:
    """With ``max_threads`` 1 and ``when_full = "queue"``, the agents waiting for a slot hold no core; each one
    is built as it starts, with the system prompt its record holds, and every result arrives."""
    seen_queued: list[bool] = []
    nodes: dict[str, object] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            waiting = [n for n in rt.manager.nodes.values() if n.parent_id is not None and n.task is None
                       and not n.status.is_final()]
            seen_queued.append(bool(waiting) and all(n.core_ is None for n in waiting))
            return ModelResponse(text=f"done {req.messages[0].text}")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[
                ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"task {i}",
                                         "description": f"c{i}", "background": True}, id=f"s{i}")
                for i in range(N)])
        last = req.messages[-1]
        if any(r.content.startswith("{") for r in last.tool_results):
            ids = [json.loads(r.content)["agent_id"] for r in last.tool_results]
            nodes.update({i: rt.manager.nodes[i] for i in ids})
            return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": ids}, id="w")])
        return ModelResponse(text="all done")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", max_threads=1,
                       when_full="queue") as rt:
        r = await rt.run("fan out")
        assert r.text == "all done"
        assert seen_queued[:N - 1] == [True] * (N - 1)  # while one ran, the others waited without a core
        for i, child_id in enumerate(nodes):
            res = rt.result(child_id)
            assert res is not None
            assert res.text == f"done task {i}"
            rec = rt.manager.store.get_run(child_id)
            assert rec is not None
            assert rec.system_prompt == rt.manager.nodes[child_id].system_prompt != ""


@pytest.mark.parametrize("store", ["memory://", "sqlite"])
async def test_a_finished_root_frees_its_loop_keeps_its_budget_and_resumes(workdir: Path, store: str) -> None:
    """A root that has ended lets its loop go too (a long-lived runtime keeps its last trees in memory: their
    loops would be objects the collector walks on every pass); what its tree spent stays on its budget, and a
    resume gets its whole conversation back."""
    url = store if store == "memory://" else f"sqlite:///{workdir.parent}/state.db"
    seen: list[list[str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append([m.text for m in req.messages])
        return ModelResponse(text=f"answer {len(req.messages)}", usage=Usage(input_tokens=10, output_tokens=5))

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store=url) as rt:
        r = await rt.run("first")
        assert r.text == "answer 1"
        root = rt.manager.nodes[r.id]
        assert root.core_ is None  # released
        gc.collect()
        assert [o for o in gc.get_objects() if isinstance(o, AgentCore) and o.info.id == root.id] == []
        assert root.dormant is not None
        assert root.dormant.budget is not None
        assert root.dormant.budget.tokens == 15  # the tree's totals are kept
        h = await rt.resume(root.id, "second")
        again = (await rt.wait([h.id]))[h.id]
        assert again.text == "answer 3"
        assert seen[-1] == ["first", "answer 1", "second"]
        assert root.core.budget is not None
        assert root.core.budget.tokens == 15  # a resumed run has its own budget
