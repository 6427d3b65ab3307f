"""Continue-as-new: a long run keeps its workflow history bounded and ends exactly as it would without.

The runs here continue as new after every turn or two (``ActivityOptions.turns_per_history``); each is
compared with the same run on one history: result, counts and transcript; announcements reach the
root once; ``wait`` and ``close_agent`` still reach children started in an earlier history."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.shapes import ActivityOptions
from subagents.engines.temporal.worker import build_worker
from subagents.limits import Limits
from subagents.messages import TextBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.result import RunResult
from subagents.runtime.runtime import Runtime
from subagents.store import open_store

from . import scripts
from .scripts import NOTE, mark, nap

_HEADER = re.compile(r"\[agent [^\]]*\]")  # a child's result header: its id, nickname and runtime differ
pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]


def _script(req: ModelRequest) -> ModelResponse:
    """``steps N``: N turns that each mark ``s<i>``, then an answer listing the tool results; other prompts
    as in :mod:`.scripts`."""
    task = req.messages[0].text
    if req.agent.depth > 0 or not task.startswith("steps"):
        return scripts._script(req)
    n = int(task.split()[1])
    turns = sum(1 for m in req.messages if m.role == "assistant")
    if turns < n:
        return ModelResponse(text=f"step {turns}", tool_calls=[ToolCall("mark", {"tag": f"s{turns}"})])
    return ModelResponse(text=" ".join(r.content for m in req.messages for r in m.tool_results))


class Engines:
    def __init__(self, env: WorkflowEnvironment, queue: str, store_url: str) -> None:
        target = TemporalTarget(env.client.service_client.config.target_host, "default", queue)
        self.client = env.client
        self.store_url = store_url
        self.plain = TemporalEngine(env.client, target, ActivityOptions(max_attempts=2))
        self.every = {n: TemporalEngine(env.client, target, ActivityOptions(max_attempts=2, turns_per_history=n))
                      for n in (1, 2)}

    async def continued(self, run_id: str) -> int:
        progress: dict[str, Any] = await self.client.get_workflow_handle(run_id).query("progress")
        return int(progress["continued"])

    def transcript(self, run_id: str) -> list[tuple[str, str]]:
        store = open_store(self.store_url, Path("."))
        try:
            return [(m.role, _HEADER.sub("[agent]", m.text + "|".join(r.content for r in m.tool_results)))
                    for m in store.transcript(run_id)]
        finally:
            store.close()

    def notes(self, run_id: str) -> tuple[int, list[bool]]:
        store = open_store(self.store_url, Path("."))
        try:
            texts = [b.text for m in store.transcript(run_id) if m.role == "user" for b in m.content
                     if isinstance(b, TextBlock)]
            return sum(t.count(NOTE) for t in texts), [a.delivered_at is not None
                                                        for a in store.announcements_of(parent_id=run_id)]
        finally:
            store.close()


@pytest_asyncio.fixture(loop_scope="session")
async def engines(temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Engines]:
    monkeypatch.setenv("SUBAGENTS_TEST_MARKS", str(tmp_path / "marks.txt"))
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    rt = Runtime(model=FunctionModel(_script, name="scripted"), workdir=workdir, store=store_url,
                 tools=[mark, nap], permission_mode="yolo")
    queue = f"can-{uuid.uuid4()}"
    try:
        async with build_worker(temporal_env.client, rt, queue):
            yield Engines(temporal_env, queue, store_url)
    finally:
        await rt.aclose()


def _same(a: RunResult, b: RunResult) -> None:
    assert (a.status, a.outcome, a.text, a.turns, a.tool_calls, a.usage) == (
        b.status, b.outcome, b.text, b.turns, b.tool_calls, b.usage)


async def test_a_long_run_continues_as_new_and_ends_as_it_would_on_one_history(engines: Engines) -> None:
    one = await engines.plain.run("steps 12", limits=Limits(max_turns=20))
    many = await engines.every[2].run("steps 12", limits=Limits(max_turns=20))
    assert (many.status, many.turns, many.tool_calls) == ("completed", 13, 12)
    assert many.text == " ".join(f"marked s{i}" for i in range(12))
    _same(many, one)
    assert await engines.continued(one.id) == 0
    assert await engines.continued(many.id) == 6  # before turns 3, 5, 7, 9, 11 and 13
    assert engines.transcript(many.id) == engines.transcript(one.id)
    assert len(engines.transcript(many.id)) == 26


async def test_limits_count_across_histories(engines: Engines) -> None:
    result = await engines.every[1].run("steps 12", limits=Limits(max_turns=5))
    assert (result.status, result.limit, result.error, result.text) == (
        "errored", "max_turns", "Exceeded max_turns=5 (turns=6)", "step 4")
    assert await engines.continued(result.id) == 4


async def test_a_foreground_child_across_histories(engines: Engines) -> None:
    one = await engines.plain.run("do it", limits=Limits(max_turns=10))
    many = await engines.every[1].run("do it", limits=Limits(max_turns=10))
    assert many.text == "root got: done kid"
    _same(many, one)
    assert await engines.continued(many.id) == 2
    assert engines.transcript(many.id) == engines.transcript(one.id)


async def test_announcements_reach_the_root_once_across_histories(engines: Engines) -> None:
    result = await engines.every[1].run("fanout 3 0.3", limits=Limits(max_turns=200))
    assert (result.status, result.text) == ("completed", "got 3 notifications")
    assert await engines.continued(result.id) >= 2
    assert engines.notes(result.id) == (3, [True, True, True])


async def test_wait_collects_children_started_in_an_earlier_history(engines: Engines) -> None:
    result = await engines.every[1].run("waiter", limits=Limits(max_turns=20))
    assert await engines.continued(result.id) == 2
    assert result.text.startswith("[wait: 2 finished, 0 still running; timed_out=false]")
    assert result.text.count("done w") == 2
    assert engines.notes(result.id) == (0, [True, True])


async def test_close_agent_reaches_a_child_started_in_an_earlier_history(engines: Engines) -> None:
    result = await engines.every[1].run("closer", limits=Limits(max_turns=20))
    assert await engines.continued(result.id) == 2
    closed, waited = result.text.split("\n---\n")
    assert "closed (with its descendants)." in closed
    assert "status shutdown · outcome cancelled" in closed
    assert waited.startswith("[wait: 2 finished, 0 still running; timed_out=false]")
    assert engines.notes(result.id) == (0, [True, True])
