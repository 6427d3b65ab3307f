"""The lifecycle contract, run through the public Runtime API on both engines: the local asyncio engine
(``engine=None``) and the Temporal engine (``engine="temporal://..."``, a worker in this process).

The same assertions hold on both: a run with a foreground child, a background spawn then ``wait``,
``send_input`` reaching a running agent, ``close`` ending the descendants too, ``status`` / ``result`` /
``agents``, the events, and the errors for what cannot be done.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Limits, Runtime
from subagents.authority.approvals import ApprovalRequest, Decision
from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.worker import build_worker
from subagents.exceptions import SpawnError
from subagents.messages import TextBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.runtime.status import Status
from subagents.tools.base import tool

from .scripts import nap

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

LIMITS = Limits(max_turns=200)


def _script(req: ModelRequest) -> ModelResponse:
    """``delegate``: a foreground child; ``fan``: two background children then wait; ``hold``: a background
    child that naps forever, the root naps too; ``listen``: naps until a message comes.  Children answer
    ``done <prompt>`` (``forever``: they nap).  A root told more after its answer (resumed) says ``resumed: ...``."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    task = req.messages[0].text
    last = req.messages[-1]
    if req.agent.depth > 0:
        if task == "forever":
            return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.05})])
        return ModelResponse(text=f"done {task}")
    if turns and last.role == "user" and not last.tool_results and req.messages[-2].role == "assistant" \
            and not req.messages[-2].tool_uses:
        return ModelResponse(text="resumed: " + last.text)
    if task == "delegate":
        if turns == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "kid", "description": "a kid"})])
        return ModelResponse(text="root got: " + last.tool_results[0].content.splitlines()[-1])
    if task == "fan":
        if turns == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": p, "background": True}) for p in ("a", "b")])
        if turns == 1:
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        return ModelResponse(text=last.tool_results[0].content)
    if task == "hold":
        if turns == 0:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
                "agent_type": "general-purpose", "prompt": "forever", "background": True})])
        return ModelResponse(tool_calls=[ToolCall("nap", {"seconds": 0.05})])
    heard = [b.text for m in req.messages[1:] if m.role == "user" for b in m.content if isinstance(b, TextBlock)]
    return ModelResponse(text="heard " + heard[0]) if heard else ModelResponse(
        tool_calls=[ToolCall("nap", {"seconds": 0.05})])


model = FunctionModel(_script, name="contract")


@pytest_asyncio.fixture(loop_scope="session", params=["local", "temporal"])
async def rt(request: pytest.FixtureRequest, temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
             ) -> AsyncIterator[Runtime]:
    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    if request.param == "local":
        async with Runtime(model=model, workdir=workdir, store=store_url, tools=[nap],
                           permission_mode="yolo") as local:
            yield local
        return
    env = temporal_env
    worker_rt = Runtime(model=model, workdir=workdir, store=store_url, tools=[nap], permission_mode="yolo")
    queue = f"contract-{uuid.uuid4()}"
    url = TemporalTarget(env.client.service_client.config.target_host, "default", queue).url
    try:
        remote = Runtime(workdir=workdir, store=store_url, engine=url)  # no model here: it is on the workers
        async with build_worker(env.client, worker_rt, queue), remote:
            yield remote
    finally:
        await worker_rt.aclose()


async def _until(check: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_run_with_a_foreground_child(rt: Runtime) -> None:
    result = await rt.run("delegate", limits=LIMITS)
    assert (result.status, result.outcome, result.text) == ("completed", "ok", "root got: done kid")
    assert rt.status(result.id) is Status.COMPLETED
    stored = rt.result(result.id)
    assert stored is not None
    assert stored.text == "root got: done kid"
    (child,) = [a for a in rt.agents() if a.parent_id == result.id]
    assert (child.depth, child.status) == (1, Status.COMPLETED)
    assert {r.run_id for r in rt.runs()} >= {result.id, child.id}


async def test_spawn_in_the_background_then_wait(rt: Runtime) -> None:
    handle = await rt.spawn("fan", limits=LIMITS)
    assert handle.nickname
    assert handle.agent_type == "general-purpose"
    assert rt.status(handle.id) in (Status.PENDING_INIT, Status.RUNNING, Status.COMPLETED)
    results = await rt.wait([handle.id], timeout=30)
    text = results[handle.id].text
    assert text.startswith("[wait: 2 finished, 0 still running; timed_out=false]")
    assert "done a" in text
    assert "done b" in text
    assert rt.status(handle.id) is Status.COMPLETED
    kids = [a for a in rt.agents() if a.parent_id == handle.id]
    assert sorted(a.status for a in kids) == [Status.COMPLETED, Status.COMPLETED]


async def test_wait_without_ids_waits_for_every_unfinished_agent(rt: Runtime) -> None:
    first, second = await rt.spawn("delegate", limits=LIMITS), await rt.spawn("fan", limits=LIMITS)
    results = await rt.wait(timeout=30)
    assert {first.id, second.id} <= set(results)
    assert results[first.id].text == "root got: done kid"
    assert all(a.status.is_final() for a in rt.agents())


async def test_send_input_reaches_a_running_agent(rt: Runtime) -> None:
    handle = await rt.spawn("listen", limits=LIMITS)
    assert rt.result(handle.id) is None  # still running
    await rt.send_input(handle.nickname, "the password is swordfish")
    result = (await rt.wait([handle.id], timeout=30))[handle.id]
    assert result.text.startswith("heard ")
    assert "the password is swordfish" in result.text
    with pytest.raises(SpawnError, match="has already finished"):
        await rt.send_input(handle.id, "too late")


async def test_close_ends_the_agent_and_its_descendants(rt: Runtime) -> None:
    handle = await rt.spawn("hold", limits=LIMITS)
    def child_working() -> bool:  # the child has called its model: it runs (its workflow too)
        return any(a.parent_id == handle.id and len(rt.store.transcript(a.id)) > 1 for a in rt.agents())

    await _until(child_working, "the background child")
    result = await rt.close(handle.id)
    assert (result.status, result.outcome) == ("shutdown", "cancelled")
    (child,) = [a for a in rt.agents() if a.parent_id == handle.id]
    await _until(lambda: rt.status(child.id) is Status.SHUTDOWN, "the child closed too")
    assert rt.status(handle.id) is Status.SHUTDOWN
    again = await rt.close(handle.id)  # closing a finished agent hands its result back
    assert again.status == "shutdown"


async def test_unknown_agents_and_unfinished_waits(rt: Runtime) -> None:
    assert rt.status("no-such-agent") is Status.NOT_FOUND
    assert rt.result("no-such-agent") is None
    with pytest.raises(SpawnError, match="no agent with id or nickname 'nobody'"):
        await rt.send_input("nobody", "hello")
    handle = await rt.spawn("listen", limits=LIMITS)
    assert await rt.wait([handle.id], timeout=0.3) == {}  # unfinished ones are absent
    await rt.close(handle.id)


async def test_resume_a_finished_run(rt: Runtime) -> None:
    first = await rt.run("delegate", limits=LIMITS)
    handle = await rt.resume(first.id, "and now?")
    assert (handle.id, handle.nickname) == (first.id, first.nickname)
    assert rt.status(first.id) in (Status.PENDING_INIT, Status.RUNNING)  # at once, not its earlier end
    assert rt.result(first.id) is None
    result = (await rt.wait([first.id], timeout=30))[first.id]
    assert (result.status, result.text) == ("completed", "resumed: and now?")
    assert rt.status(first.id) is Status.COMPLETED
    stored = rt.result(first.id)
    assert stored is not None
    assert stored.text == "resumed: and now?"
    again = await rt.spawn("listen", limits=LIMITS)
    with pytest.raises(SpawnError, match=r"is still (pending_init|running); use send_input"):
        await rt.resume(again.id, "too soon")
    await rt.close(again.id)


async def test_events_tell_the_tree(rt: Runtime) -> None:
    seen: list[Event] = []

    async def collect() -> None:
        async for ev in rt.events():
            seen.append(ev)

    reader = asyncio.ensure_future(collect())
    await asyncio.sleep(0)
    result = await rt.run("delegate", limits=LIMITS)
    await rt.events_delivered()
    await _until(lambda: any(e.kind == "subagent_completed" and e.agent_id == result.id for e in seen),
                 "the root's completion event")
    reader.cancel()
    root = [e.kind for e in seen if e.agent_id == result.id]
    kid = [e.kind for e in seen if e.parent_id == result.id]
    for kinds in (root, kid):
        for k in ("subagent_spawned", "run_start", "turn_start", "run_end", "subagent_completed"):
            assert k in kinds
    assert root.index("run_start") < root.index("tool_start") < root.index("tool_end") < root.index("run_end")
    spawned = next(e for e in seen if e.kind == "subagent_spawned" and e.parent_id == result.id)
    assert spawned.depth == 1
    assert spawned.nickname


async def test_a_signal_to_no_running_agent_is_a_clear_error(temporal_env: WorkflowEnvironment) -> None:
    engine = TemporalEngine(temporal_env.client, TemporalTarget(task_queue="nobody"))
    with pytest.raises(SpawnError, match="is not running on the Temporal engine"):
        await engine.send_input(str(uuid.uuid4()), "hello")  # the store may lag: the server has the last word


# -- approvals: the worker in permission mode default, the client's approver answers -------------------------
@tool(category="edit")
def stamp(name: str) -> str:
    """Stamp a thing (an edit: permission mode default asks first).

    Args:
        name: what to stamp.
    """
    return f"stamped {name}"


def _asking(req: ModelRequest) -> ModelResponse:
    """A root stamps ``a`` three times, then spawns a child that stamps ``a``; it answers with every result."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    if req.agent.depth > 0:
        return ModelResponse(tool_calls=[ToolCall("stamp", {"name": "a"})]) if turns == 0 else ModelResponse(
            text=req.messages[-1].tool_results[0].content)
    if turns < 3:
        return ModelResponse(tool_calls=[ToolCall("stamp", {"name": "a"})])
    if turns == 3:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
            "agent_type": "general-purpose", "prompt": "stamp", "description": "a stamper"})])
    return ModelResponse(text=" | ".join(r.content.splitlines()[-1] for m in req.messages for r in m.tool_results))


@pytest_asyncio.fixture(loop_scope="session", params=["local", "temporal"])
async def asking(request: pytest.FixtureRequest, temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
                 ) -> AsyncIterator[tuple[Runtime, list[ApprovalRequest], list[Event]]]:
    """A runtime whose agents run in permission mode default, with an approver that denies the first request
    ("not yet") and allows the next ones always; what it was asked; the events."""
    asked: list[ApprovalRequest] = []
    events: list[Event] = []

    def person(req: ApprovalRequest) -> Decision:
        asked.append(req)
        return Decision.deny("not yet") if len(asked) == 1 else Decision.allow_always()

    store_url = f"sqlite:///{tmp_path / 'state.db'}"
    asking_model = FunctionModel(_asking, name="asking")
    if request.param == "local":
        async with Runtime(model=asking_model, workdir=workdir, store=store_url, tools=[stamp],
                           permission_mode="default", approver=person, on_event=events.append) as local:
            yield local, asked, events
        return
    worker_rt = Runtime(model=asking_model, workdir=workdir, store=store_url, tools=[stamp], permission_mode="default")
    queue = f"contract-ask-{uuid.uuid4()}"
    url = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", queue).url
    try:
        remote = Runtime(workdir=workdir, store=store_url, engine=url, approver=person, on_event=events.append)
        async with build_worker(temporal_env.client, worker_rt, queue), remote:
            yield remote, asked, events
    finally:
        await worker_rt.aclose()


async def test_approvals_deny_allow_always_and_the_tree(
        asking: tuple[Runtime, list[ApprovalRequest], list[Event]]) -> None:
    rt, asked, events = asking
    result = await asyncio.wait_for(rt.run("stamp", limits=LIMITS), 60)
    await rt.events_delivered()
    assert result.text == ("stamp was not run: the user denied it: not yet. Do not retry the same call; adjust your "
                           "approach. | stamped a | stamped a | stamped a")
    # asked twice: the "allow always" answer covers the root's next call and the child's
    assert [(r.tool, r.arguments, r.mode, r.always_rule) for r in asked] == [("stamp", {"name": "a"}, "default",
                                                                             "stamp")] * 2
    assert asked[0].describe() == f'{result.nickname} [general-purpose] wants to run stamp(name="a")'
    requested = [e for e in events if e.kind == "approval_requested"]
    decided = [e.data for e in events if e.kind == "approval_decided"]
    assert [e.agent_id for e in requested] == [result.id, result.id]
    assert requested[0].data["reason"] == "permission mode 'default' asks before file edits"
    assert [(d["decision"], d["by"], d["message"], d["rule"]) for d in decided] == [
        ("denied", "approver", "not yet", None), ("allowed always", "approver", None, "stamp")]
    audit = [a.data["decision"] for a in rt.store.audit_of(result.id) if a.kind == "approval"]
    assert audit == ["denied", "allowed always"]
