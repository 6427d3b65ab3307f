"""The Temporal engine with an in-process worker: a root with a tool call and a foreground child, a
background fan-out announced once, bad input as clear errors."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.shapes import ActivityOptions
from subagents.engines.temporal.worker import build_worker
from subagents.exceptions import SpawnError
from subagents.limits import Limits
from subagents.messages import TextBlock
from subagents.runtime.runtime import Runtime
from subagents.store import open_store

from .scripts import NOTE, mark, model, nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]


class Setup:
    def __init__(self, engine: TemporalEngine, store_url: str, marks: Path) -> None:
        self.engine, self.store_url, self.marks = engine, store_url, marks
        self.url = ""

    def marks_seen(self) -> list[str]:
        return self.marks.read_text().split() if self.marks.exists() else []


@pytest_asyncio.fixture(loop_scope="session")
async def setup(temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    marks = tmp_path / "marks.txt"
    monkeypatch.setenv("SUBAGENTS_TEST_MARKS", str(marks))
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    rt = Runtime(model=model, workdir=workdir, store=store_url, tools=[mark, nap], permission_mode="yolo")
    queue = f"q-{uuid.uuid4()}"
    target = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", queue)
    try:
        async with build_worker(temporal_env.client, rt, queue):
            s = Setup(TemporalEngine(temporal_env.client, target, ActivityOptions(max_attempts=2)), store_url, marks)
            s.url = target.url
            yield s
    finally:
        await rt.aclose()


async def test_a_root_with_a_tool_call_and_a_foreground_child(setup: Setup) -> None:
    result = await setup.engine.run("do it", limits=Limits(max_turns=10))
    assert (result.status, result.outcome, result.turns, result.tool_calls) == ("completed", "ok", 3, 2)
    assert result.text == "root got: done kid"
    assert setup.marks_seen() == ["root", "kid"]
    store = open_store(setup.store_url, Path("."))
    try:
        root = store.get_run(result.id)
        assert root is not None
        assert (root.status, root.result_text, root.turns) == ("completed", result.text, 3)
        (child_id,) = store.child_ids(result.id)
        child = store.get_run(child_id)
        assert child is not None
        assert (child.status, child.parent_id, child.root_id, child.depth, child.result_text) == (
            "completed", result.id, result.id, 1, "done kid")
        transcript = store.transcript(result.id)
        assert [m.role for m in transcript] == ["user", "assistant", "user", "assistant", "user", "assistant"]
        assert transcript[4].tool_results[0].content.endswith("done kid")
        assert [m.role for m in store.transcript(child_id)] == ["user", "assistant", "user", "assistant"]
    finally:
        store.close()
    assert await setup.engine.status(result.id) == "completed"


async def test_runtime_run_goes_to_the_workers_with_an_engine_url(setup: Setup, workdir: Path) -> None:
    rt = Runtime(model=model, workdir=workdir, store=setup.store_url, engine=setup.url)
    try:
        result = await rt.run("do it", limits=Limits(max_turns=10))
        assert (result.status, result.text) == ("completed", "root got: done kid")
        assert rt.status(result.id) == "completed"  # from the store the workers wrote
    finally:
        await rt.aclose()


async def test_background_children_are_announced_once(setup: Setup) -> None:
    result = await setup.engine.run("fanout 3", limits=Limits(max_turns=100))
    assert (result.status, result.text) == ("completed", "got 3 notifications")
    assert sorted(setup.marks_seen()) == ["c0", "c1", "c2"]
    store = open_store(setup.store_url, Path("."))
    try:
        anns = store.announcements_of(parent_id=result.id)
        assert len(anns) == 3
        assert all(a.delivered_at is not None for a in anns)
        texts = [b.text for m in store.transcript(result.id) if m.role == "user" for b in m.content
                 if isinstance(b, TextBlock)]
        assert sum(t.count(NOTE) for t in texts) == 3
        assert {r.status for r in store.list_runs(root_id=result.id)} == {"completed"}
    finally:
        store.close()


def _notes(store_url: str, run_id: str) -> tuple[int, list[bool]]:
    """How many announcements the run's transcript holds, and whether each one to it is marked delivered."""
    store = open_store(store_url, Path("."))
    try:
        texts = [b.text for m in store.transcript(run_id) if m.role == "user" for b in m.content
                 if isinstance(b, TextBlock)]
        return sum(t.count(NOTE) for t in texts), [a.delivered_at is not None
                                                    for a in store.announcements_of(parent_id=run_id)]
    finally:
        store.close()


async def test_wait_hands_over_background_results_instead_of_their_announcements(setup: Setup) -> None:
    result = await setup.engine.run("waiter", limits=Limits(max_turns=20))
    assert result.text.startswith("[wait: 2 finished, 0 still running; timed_out=false]")
    assert result.text.count("done w") == 2
    assert _notes(setup.store_url, result.id) == (0, [True, True])


async def test_close_agent_closes_a_background_child(setup: Setup) -> None:
    result = await setup.engine.run("closer", limits=Limits(max_turns=20))
    closed, waited = result.text.split("\n---\n")
    assert "closed (with its descendants)." in closed
    assert "status shutdown · outcome cancelled" in closed
    assert waited.startswith("[wait: 2 finished, 0 still running; timed_out=false]")
    assert _notes(setup.store_url, result.id) == (0, [True, True])
    store = open_store(setup.store_url, Path("."))
    try:
        assert sorted((r.status, r.outcome) for r in store.list_runs(root_id=result.id) if r.parent_id) == [
            ("completed", "ok"), ("shutdown", "cancelled")]
    finally:
        store.close()


async def test_send_input_reaches_the_agent_at_its_next_tool_boundary(setup: Setup) -> None:
    run_id = await setup.engine.start("listen", limits=Limits(max_turns=1000))
    await setup.engine.send_input(run_id, "the password is swordfish")
    result = await setup.engine.result(run_id)
    assert (result.status, result.text) == ("completed", "heard the password is swordfish")


async def test_close_cancels_a_run_and_records_it_as_shutdown(setup: Setup) -> None:
    run_id = await setup.engine.start("listen", limits=Limits(max_turns=1000))
    assert await setup.engine.status(run_id) == "running"
    result = await setup.engine.close(run_id)
    assert (result.status, result.outcome, result.error) == ("shutdown", "cancelled", "closed before it finished")
    assert await setup.engine.status(run_id) == "shutdown"
    store = open_store(setup.store_url, Path("."))
    try:
        rec = store.get_run(run_id)
        assert rec is not None
        assert (rec.status, rec.outcome) == ("shutdown", "cancelled")
    finally:
        store.close()


async def test_a_limit_stops_the_run_with_partial_work(setup: Setup) -> None:
    result = await setup.engine.run("do it", limits=Limits(max_turns=1))
    assert (result.status, result.outcome, result.limit) == ("errored", "limit", "max_turns")
    assert result.error == "Exceeded max_turns=1 (turns=2)"


async def test_an_unknown_agent_type_is_a_clear_error(setup: Setup) -> None:
    with pytest.raises(SpawnError, match=r"failed on the Temporal engine: unknown agent type 'nope'; known types: "):
        await setup.engine.run("do it", agent="nope")
