"""Approvals on the Temporal engine: a call that needs a person waits, on the worker, for the client's answer.

The worker runs in permission mode ``default`` (``touch`` is an edit tool: it asks); the client is a
``Runtime(engine=..., approver=...)``.  Allow once, allow always (the same call does not ask again), deny
with a reason the model reads, no approver (denied with the local text, and the event), a child's request
(its chain), an approval in a run that continued as new (answered through ``TemporalEngine.decide``), and a
close while a request waits.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Limits, Runtime
from subagents.authority.approvals import ApprovalRequest, Decision
from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.shapes import ActivityOptions
from subagents.engines.temporal.worker import build_worker
from subagents.exceptions import UserError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.tools.base import tool

from .scripts import nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

LIMITS = Limits(max_turns=20)
TOUCHED: list[str] = []


@tool(category="edit")
def touch(name: str) -> str:
    """Touch a thing (an edit: permission mode default asks first).

    Args:
        name: what to touch.
    """
    TOUCHED.append(name)
    return f"touched {name}"


def _script(req: ModelRequest) -> ModelResponse:
    """The task is a list of words: ``touch X`` calls touch(X) one turn each, ``child`` spawns a foreground
    child that touches ``kid``, ``nap`` naps; then the answer is every tool result, joined by `` | ``."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    steps = req.messages[0].text.split(",")
    if turns < len(steps):
        word, *rest = steps[turns].split()
        if word == "touch":
            return ModelResponse(tool_calls=[ToolCall("touch", {"name": rest[0]})])
        if word == "child":
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "touch kid", "description": "a kid"})])
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.01})])
    results = [r.content.splitlines()[-1] for m in req.messages for r in m.tool_results]
    return ModelResponse(text=" | ".join(results))


model = FunctionModel(_script, name="asking")


@dataclass
class Person:
    """An approver answering from a list of decisions (the last one repeats); records what it was asked."""

    answers: list[Decision]
    asked: list[ApprovalRequest] = field(default_factory=list)
    block: bool = False

    async def __call__(self, req: ApprovalRequest) -> Decision:
        self.asked.append(req)
        if self.block:
            await asyncio.Event().wait()
        return self.answers[min(len(self.asked), len(self.answers)) - 1]


@dataclass
class Setup:
    env: WorkflowEnvironment
    url: str
    target: TemporalTarget
    workdir: Path
    store_url: str

    def client(self, approver: Person | None = None, events: list[Event] | None = None) -> Runtime:
        return Runtime(workdir=self.workdir, store=self.store_url, engine=self.url, approver=approver,
                       on_event=events.append if events is not None else None)


@pytest_asyncio.fixture(loop_scope="session")
async def setup(temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path) -> AsyncIterator[Setup]:
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    worker_rt = Runtime(model=model, workdir=workdir, store=store_url, tools=[touch, nap], permission_mode="default")
    queue = f"approvals-{uuid.uuid4()}"
    target = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", queue)
    TOUCHED.clear()
    try:
        async with build_worker(temporal_env.client, worker_rt, queue):
            yield Setup(temporal_env, target.url, target, workdir, store_url)
    finally:
        await worker_rt.aclose()


async def _until(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_allow_once_asks_each_time(setup: Setup) -> None:
    person = Person([Decision.allow()])
    events: list[Event] = []
    async with setup.client(person, events) as rt:
        result = await asyncio.wait_for(rt.run("touch a,touch a", limits=LIMITS), 60)
        await rt.events_delivered()
        audit = [a for a in rt.store.audit_of(result.id) if a.kind == "approval"]  # the worker's guard wrote them
    assert (result.status, result.text) == ("completed", "touched a | touched a")
    assert [r.tool for r in person.asked] == ["touch", "touch"]
    assert person.asked[0].arguments == {"name": "a"}
    assert person.asked[0].mode == "default"
    assert "wants to run touch(name=\"a\")" in person.asked[0].describe()
    assert TOUCHED == ["a", "a"]
    decided = [e.data for e in events if e.kind == "approval_decided"]
    assert [d["decision"] for d in decided] == ["allowed once", "allowed once"]
    requested = [e for e in events if e.kind == "approval_requested"]
    assert len(requested) == 2
    assert requested[0].agent_id == result.id
    assert requested[0].data["reason"] == "permission mode 'default' asks before file edits"
    assert [a.data["decision"] for a in audit] == ["allowed once", "allowed once"]


async def test_allow_always_covers_the_same_call_later_and_the_children(setup: Setup) -> None:
    person = Person([Decision.allow_always()])
    async with setup.client(person) as rt:
        result = await asyncio.wait_for(rt.run("touch a,touch a,child,touch b", limits=LIMITS), 60)
    assert result.text == "touched a | touched a | touched kid | touched b"
    # "touch" (the whole tool) was allowed always at the first call: the child and the later calls do not ask
    assert [r.arguments for r in person.asked] == [{"name": "a"}]
    assert TOUCHED == ["a", "a", "kid", "b"]


async def test_deny_with_a_reason_the_model_reads(setup: Setup) -> None:
    person = Person([Decision.deny("not on Fridays")])
    events: list[Event] = []
    async with setup.client(person, events) as rt:
        result = await asyncio.wait_for(rt.run("touch a", limits=LIMITS), 60)
        await rt.events_delivered()
    assert result.text == ("touch was not run: the user denied it: not on Fridays. Do not retry the same call; "
                           "adjust your approach.")
    assert TOUCHED == []
    (decided,) = [e.data for e in events if e.kind == "approval_decided"]
    assert (decided["decision"], decided["message"], decided["by"]) == ("denied", "not on Fridays", "approver")


async def test_no_approver_denies_with_the_local_text_and_event(setup: Setup) -> None:
    events: list[Event] = []
    async with setup.client(None, events) as rt:
        result = await asyncio.wait_for(rt.run("touch a", limits=LIMITS), 60)
        await rt.events_delivered()
    assert result.text.startswith("touch was not run: permission mode 'default' asks before file edits, and no one "
                                  "can approve it here")
    assert "--permission-mode yolo" in result.text  # as locally (autoEdit for write_file / edit_file)
    assert TOUCHED == []
    (decided,) = [e for e in events if e.kind == "approval_decided"]
    assert (decided.data["by"], decided.agent_id) == ("no approver", result.id)


async def test_a_childs_request_names_its_parents(setup: Setup) -> None:
    person = Person([Decision.allow()])
    async with setup.client(person) as rt:
        result = await asyncio.wait_for(rt.run("child", limits=LIMITS), 60)
    (req,) = person.asked
    assert req.agent.depth == 1
    assert [a.nickname for a in req.chain] == [result.nickname]
    assert req.describe().startswith(f"{result.nickname} > {req.agent.nickname} [general-purpose]")
    assert result.text == "touched kid"


async def test_an_approval_in_a_run_that_continued_as_new(setup: Setup) -> None:
    """Every turn continues as new: an "allow always" rule is carried, a later request is answered by update."""
    engine = TemporalEngine(setup.env.client, setup.target, ActivityOptions(max_attempts=2, turns_per_history=1))
    run_id = await engine.start("touch a,nap,touch a,touch b", limits=LIMITS)
    answered: list[str] = []

    async def answer(decision: Decision) -> None:
        deadline = time.monotonic() + 30
        while not (pending := await engine.approvals(run_id)):
            assert time.monotonic() < deadline, "no approval request came"
            await asyncio.sleep(0.05)
        (req,) = pending
        assert (req["tool"], req["arguments"]) == ("touch", {"name": "b" if answered else "a"})
        answered.append(await engine.decide(run_id, req["id"], decision))
        with pytest.raises(UserError, match=r"has already been decided|is pending in this run"):
            await engine.decide(run_id, req["id"], decision)  # the update's validator refuses a second answer

    await answer(Decision.allow_always("touch(a)"))  # the approver names a narrower rule: touch(b) asks
    await answer(Decision.allow())
    result = await asyncio.wait_for(engine.result(run_id), 60)
    progress: dict[str, Any] = await setup.env.client.get_workflow_handle(run_id).query("progress")
    assert progress["continued"] >= 3
    assert answered == ["allowed always", "allowed once"]
    assert result.text == "touched a | rested | touched a | touched b"
    assert TOUCHED == ["a", "a", "b"]


async def test_close_while_a_request_waits(setup: Setup) -> None:
    person = Person([Decision.allow()], block=True)
    async with setup.client(person) as rt:
        handle = await rt.spawn("touch a", limits=LIMITS)
        await _until(lambda: person.asked, "the approval request")
        engine = await rt.remote.engine() if rt.remote is not None else None
        assert engine is not None
        assert [r["id"] for r in await engine.approvals(handle.id)] == [person.asked[0].id]
        result = await asyncio.wait_for(rt.close(handle.id), 30)
        assert (result.status, result.outcome) == ("shutdown", "cancelled")
        assert await engine.approvals(handle.id) == []
        with pytest.raises(UserError, match=r"not running on the Temporal engine|decision was refused"):
            await engine.decide(handle.id, person.asked[0].id, Decision.allow())
    assert TOUCHED == []
