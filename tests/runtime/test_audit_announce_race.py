"""Seed 003's delivery decision, "injection successful? no -> queue as follow-up": an announcement that reached a
parent's inbox while the parent was ending its run (here: during its Stop hook) must not stay there unread; it is
queued as a follow-up, the first thing the parent reads when it is resumed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from subagents import HookInput, HookResult, Outcome, Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event


async def test_an_announcement_arriving_as_the_parent_ends_is_its_first_follow_up(workdir: Path) -> None:
    release, ended = asyncio.Event(), asyncio.Event()
    prompts: list[str] = []
    child: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await release.wait()
            return ModelResponse(text="late findings")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"agent_type": "explore", "prompt": "scan",
                                                                      "background": True})])
        if not child:
            child.append(json.loads(req.messages[-1].tool_results[0].content)["agent_id"])
        prompts.append(req.last_user_text)
        return ModelResponse(text="parent done")

    async def stop(inp: HookInput) -> HookResult | None:
        if inp.agent_type == "general-purpose" and not prompts[1:]:  # the root's first end: the child ends now
            release.set()
            await ended.wait()
            assert rt.status(child[0]).is_final()
        return None

    def on_event(e: Event) -> None:
        if e.kind == "subagent_completed" and e.depth == 1:
            ended.set()

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", hooks={"Stop": [stop]},
                       on_event=on_event) as rt:
        r = await rt.run("go")
        assert r.outcome is Outcome.OK
        assert r.text == "parent done"
        await rt.resume(r.id, "what came back?")
        await rt.wait([r.id])
    resumed = prompts[-1]
    assert resumed.startswith("<subagent-notification>")  # the announcement comes first, with the resume message
    assert "late findings" in resumed
    assert resumed.endswith("what came back?")
    assert sum("late findings" in p for p in prompts) == 1  # delivered once
