"""Many background results at once reach the parent as one line each, within one message's budget (.notices)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from subagents import Outcome, Runtime
from subagents.config import Settings
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.notices import NOTICE_BUDGET, fitted, notice_line
from subagents.runtime.result import RunResult, trigger_message
from subagents.runtime.status import Outcome as O
from subagents.runtime.status import Status

LONG = "finding " * 125  # 1,000 characters: 300 of them are 300 KB of notifications


def note(i: int, text: str = LONG, outcome: O = O.OK) -> str:
    r = RunResult(id=f"id{i}", nickname=f"Nick{i}", agent="general-purpose",
                  status=Status.COMPLETED if outcome is O.OK else Status.ERRORED, outcome=outcome, text=text,
                  error=None if outcome is O.OK else "boom")
    return trigger_message(r, f"task {i}", text)


def spawn(i: int) -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"task {i}", "description": f"task {i}",
                                    "background": True})


def texts_of(req: ModelRequest) -> list[str]:
    return [b.text for b in req.messages[-1].content if b.kind == "text"]


# -- the rule -------------------------------------------------------------------------------------
def test_a_delivery_within_the_budget_is_unchanged() -> None:
    few = [note(i) for i in range(3)]
    assert fitted(few) is few
    assert fitted(["hello"] * 2) == ["hello"] * 2


def test_over_the_budget_notifications_become_lines_and_messages_stay_whole_in_place() -> None:
    user = "from the user: " + "x" * 50_000  # longer than the budget itself: still whole
    out = fitted([note(0), user, *[note(i) for i in range(1, 80)]])
    assert out[1] == user
    block = out[0]
    assert block.startswith("<subagent-notifications>\n80 background tasks finished at once")
    assert block.endswith("NO_REPLY if no announcement is needed.\n</subagent-notifications>")
    lines = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert len(lines) == 80
    assert lines[7].startswith('- "task 7" (Nick7, id id7) completed successfully: finding finding')
    assert all(len(ln) < 260 for ln in lines)
    assert "more not shown" not in block


def test_past_what_the_budget_holds_in_lines_a_count_of_the_rest() -> None:
    out = fitted([note(i) for i in range(1_000)] + ["the user, after them all"])
    assert out[1:] == ["the user, after them all"]
    assert len(out[0]) <= NOTICE_BUDGET + 1_000
    shown = [ln for ln in out[0].splitlines() if ln.startswith("- ")]
    assert 100 < len(shown) < 1_000
    assert f"[and {1_000 - len(shown)} more not shown: list_agents lists them" in out[0]
    assert shown[0].startswith('- "task 0" (Nick0')  # in arrival order
    assert shown[-1].startswith(f'- "task {len(shown) - 1}" (')


def test_a_failed_child_says_so_and_text_that_only_looks_like_one_stays_whole() -> None:
    assert notice_line(note(3, "half done\n\nStats: fake", O.ERROR)) == (
        '- "task 3" (Nick3, id id3) failed: half done Stats: fake')
    fake = "<subagent-notification>\nA background task without its parts"
    assert notice_line(fake) is None
    assert fitted([fake, *[note(i) for i in range(60)]])[0] == fake


# -- in a run -------------------------------------------------------------------------------------
async def test_three_hundred_results_at_once_reach_the_parent_in_one_bounded_message(workdir: Path) -> None:
    """300 background children, 1,000 characters each, all done at the parent's next tool boundary: the parent's
    next message holds one block of one-line results (it held 300 KB before), and ``wait`` still gives every result
    in full."""
    n = 300
    seen: dict[str, Any] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text=LONG + req.messages[0].text)
        last = req.messages[-1]
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn(i) for i in range(n)])
        if "ids" not in seen:
            seen["ids"] = [json.loads(r.content)["agent_id"] for r in last.tool_results]
            seen["texts"] = texts_of(req)
            return ModelResponse(tool_calls=[ToolCall("wait", {"agent_ids": seen["ids"][:5]})])
        seen["wait"] = last.tool_results[0].content
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory", max_threads=n + 1) as rt:
        r = await rt.run("go")
    assert r.outcome is Outcome.OK, r.error
    texts = seen["texts"]
    assert len(texts) == 1, [t[:80] for t in texts]
    assert sum(map(len, texts)) <= NOTICE_BUDGET + 1_000
    assert texts[0].startswith(f"<subagent-notifications>\n{n} background tasks finished at once")
    shown = [ln for ln in texts[0].splitlines() if ln.startswith("- ")]
    assert f"[and {n - len(shown)} more not shown" in texts[0]
    assert all(" completed successfully: finding finding" in ln for ln in shown)
    assert seen["wait"].count(LONG) == 5  # the full results are a wait away


async def test_follow_ups_of_a_parent_that_was_not_running_are_fitted_when_it_resumes(workdir: Path) -> None:
    """The children end after their parent's run: their notifications wait as follow-ups and come, fitted, with the
    message that resumes it."""
    n = 120
    release = asyncio.Event()
    prompts: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await release.wait()
            return ModelResponse(text=LONG)
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn(i) for i in range(n)])
        if req.messages[-1].tool_results:
            return ModelResponse(text="started them")
        prompts.append(req.messages[-1].text)
        return ModelResponse(text="NO_REPLY")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory", max_threads=n + 1) as rt:
        parent = await rt.run("go")
        assert parent.text == "started them"
        release.set()
        assert len(await rt.wait()) == n
        h = await rt.resume(parent.id, "anything new?")
        await rt.wait([h.id])
    assert len(prompts) == 1
    assert prompts[0].startswith(f"<subagent-notifications>\n{n} background tasks finished at once")
    assert prompts[0].endswith("anything new?")
    assert len(prompts[0]) <= NOTICE_BUDGET + 1_000


async def test_with_steering_off_the_end_of_turn_delivery_is_fitted(workdir: Path) -> None:
    n = 100
    followups: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text=LONG)
        last = req.messages[-1]
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn(i) for i in range(n)])
        if last.tool_results:
            return ModelResponse(text="my answer")
        followups.append(last.text)
        return ModelResponse(text="NO_REPLY")

    settings = Settings()
    settings.announce_steer = False
    async with Runtime(model=FunctionModel(fn, inline=True), workdir=workdir, store="memory", max_threads=n + 1,
                       settings=settings) as rt:
        r = await rt.run("go")
    assert r.silent
    assert len(followups) == 1
    assert followups[0].startswith(f"<subagent-notifications>\n{n} background tasks finished at once")
    assert len(followups[0]) <= NOTICE_BUDGET + 1_000


def test_the_temporal_engines_delivery_is_fitted_and_acknowledges_every_notification() -> None:
    from subagents.engines.temporal.workflow import AgentWorkflow, _Inbox

    wf = AgentWorkflow.__new__(AgentWorkflow)  # (its __init__ needs a workflow's event loop; drain reads these two)
    wf.inbox, wf.acks = _Inbox(), []
    wf.inbox.items = [(f"ann:id{i}:1", note(i)) for i in range(100)] + [(None, "from the user")]
    blocks = wf.drain()
    assert [b["kind"] for b in blocks] == ["text", "text"]
    assert blocks[0]["text"].startswith("<subagent-notifications>\n100 background tasks finished at once")
    assert blocks[1]["text"] == "from the user"
    assert wf.acks == [f"ann:id{i}:1" for i in range(100)]
    assert wf.inbox.items == []
