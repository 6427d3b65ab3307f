"""Approvals on the Temporal engine, adversarially: what a person approved is what runs, and an answer reaches only
the request it was meant for.

1. The worker runs an approved call a second time (with the decision) and its ``PreToolUse`` hooks run again.  A
   hook whose rewrite is not deterministic (a counter, the time, a file) must not get a call run with arguments
   nobody approved: the workflow asks again about the call as it now is, and refuses it with a reason that says
   so when its arguments change again.  A person's "no" stands on that run, even where a ``PermissionRequest``
   hook, or an "allow always" rule another call of the run got meanwhile, would allow the call by then.
2. Some OpenAI-compatible servers number each answer's calls from 0: a later turn's call can wait under the id of
   an earlier request.  A decision that names its request (its ``created_at``, the ``request:`` of ``subagents runs
   approvals``) is refused when another request waits under that id: through the ``decide`` update,
   ``TemporalEngine.decide`` and ``subagents runs approve --request``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from subagents import HookInput, HookResult, Limits, Runtime
from subagents.authority.approvals import ApprovalRequest, Decision
from subagents.cli.main import main
from subagents.config import user_config_dir
from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.worker import build_worker
from subagents.exceptions import UserError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.base import tool
from subagents.trust import add_trusted

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

LIMITS = Limits(max_turns=10)
TOUCHED: list[str] = []
PEEKED: list[str] = []


@dataclass
class HookState:
    """How the worker's ``PreToolUse`` hook rewrites ``touch``'s name: not at all (``mode=""``), with a counter
    bumped on every run (``"counter"``), or with what a "file" holds now (``"file"``: ``suffix``)."""

    mode: str = ""
    runs: int = 0
    suffix: str = "old"
    permits: bool = False  # the worker's PermissionRequest hook allows calls from now on

    def reset(self) -> None:
        self.mode, self.runs, self.suffix, self.permits = "", 0, "old", False


HOOK = HookState()


@tool(category="edit")
def touch(name: str) -> str:
    """Touch a thing (an edit: permission mode default asks first).

    Args:
        name: what to touch.
    """
    TOUCHED.append(name)
    return f"touched {name}"


@tool(category="read")
def peek(name: str) -> str:
    """Look at a thing (a read: parallel-safe; the worker's ask rule ``peek`` asks first).

    Args:
        name: what to look at.
    """
    PEEKED.append(name)
    return f"peeked {name}"


def rewrite(inp: HookInput) -> HookResult | None:
    """A PreToolUse hook whose rewrite is not deterministic (see :class:`HookState`)."""
    name = str((inp.arguments or {}).get("name", ""))
    if HOOK.mode == "counter":
        HOOK.runs += 1
        return HookResult(arguments={"name": f"{name}@{HOOK.runs}"})
    if HOOK.mode == "file":
        return HookResult(arguments={"name": f"{name}@{HOOK.suffix}"})
    return None


def permit(inp: HookInput) -> HookResult | None:
    """A PermissionRequest hook that allows every call once ``HOOK.permits`` (a file appeared, office hours began)."""
    return HookResult("allow", "auto-approved") if HOOK.permits else None


def _script(req: ModelRequest) -> ModelResponse:
    """``touch X`` words, one call a turn; a task starting with ``same:`` gives every call the id ``call_0`` (as
    servers that number each answer's calls from 0 do); ``peek:X,Y`` peeks both in one turn (concurrently); then
    the answer is every tool result, joined."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    task = req.messages[0].text
    if task.startswith("peek:"):
        words = [] if turns else task[5:].split(",")
        return ModelResponse(tool_calls=[ToolCall("peek", {"name": n}) for n in words],
                             text="" if words else " | ".join(r.content for m in req.messages for r in m.tool_results))
    same = task.startswith("same:")
    words = task.removeprefix("same:").split(",")
    if turns < len(words):
        args = {"name": words[turns].split()[1]}
        return ModelResponse(tool_calls=[ToolCall("touch", args, id="call_0") if same else ToolCall("touch", args)])
    return ModelResponse(text=" | ".join(r.content for m in req.messages for r in m.tool_results))


@dataclass
class Person:
    """An approver giving one answer; records what it was asked; ``meanwhile`` runs while it decides."""

    answer: Decision
    asked: list[ApprovalRequest] = field(default_factory=list)
    meanwhile: Callable[[], None] | None = None

    async def __call__(self, req: ApprovalRequest) -> Decision:
        self.asked.append(req)
        if self.meanwhile is not None:
            self.meanwhile()
        return self.answer

    def names(self) -> list[str]:
        return [str(r.arguments["name"]) for r in self.asked]


@dataclass
class Setup:
    engine: TemporalEngine
    root: Path
    url: str
    store_url: str

    def client(self, person: Person) -> Runtime:
        return Runtime(workdir=self.root, store=self.store_url, engine=self.url, approver=person)


@pytest_asyncio.fixture(loop_scope="session")
async def setup(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Setup]:
    root = tmp_path / "project"
    (root / ".subagents").mkdir(parents=True)
    target = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", f"brk-{uuid.uuid4()}")
    store = f"sqlite:///{tmp_path / 'state.db'}"
    config = root / ".subagents" / "config.toml"
    config.write_text('[permissions]\nask = ["peek"]\n')
    add_trusted(root, user_config_dir())  # engine and store addresses (and the rules) from a project need trust
    worker_rt = Runtime(model=FunctionModel(_script, name="toucher"), workdir=root, store=store, tools=[touch, peek],
                        permission_mode="default", hooks={"PreToolUse": [rewrite], "PermissionRequest": [permit]})
    # the user's project: the CLI finds the engine and the store here (written after the worker read its own)
    config.write_text(f'[engine]\nurl = "{target.url}"\n\n[store]\nurl = "{store}"\n')
    TOUCHED.clear()
    PEEKED.clear()
    HOOK.reset()
    try:
        async with build_worker(temporal_env.client, worker_rt, target.task_queue):
            yield Setup(TemporalEngine(temporal_env.client, target), root, target.url, store)
    finally:
        HOOK.reset()
        await worker_rt.aclose()


async def _pending(engine: TemporalEngine, run_id: str, name: str) -> dict[str, Any]:
    """The request waiting in ``run_id``, once it is the one for ``touch(name)``."""
    deadline = time.monotonic() + 30
    while True:
        pending = await engine.approvals(run_id)
        if pending and pending[0]["arguments"] == {"name": name}:
            (req,) = pending
            return req
        assert time.monotonic() < deadline, f"no approval request for {name} came (pending: {pending})"
        await asyncio.sleep(0.05)


async def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- 1. what runs is what was approved -------------------------------------------------------------------------
async def test_a_hook_that_rewrites_differently_on_the_second_run_gets_the_new_call_asked_about(setup: Setup) -> None:
    """The "file" the hook reads changes while the person decides: the worker's second run would touch
    ``a@new``, which nobody saw.  It is asked about (a new request), and what runs is what that answer allowed."""
    HOOK.mode = "file"

    def the_file_changes() -> None:
        HOOK.suffix = "new"

    person = Person(Decision.allow(), meanwhile=the_file_changes)
    async with setup.client(person) as rt:
        result = await asyncio.wait_for(rt.run("touch a", limits=LIMITS), 60)
    assert set(TOUCHED) <= set(person.names()), f"ran {TOUCHED}, approved only {person.names()}"
    assert person.names() == ["a@old", "a@new"]
    assert TOUCHED == ["a@new"]
    assert result.text == "touched a@new"


async def test_a_hook_that_rewrites_differently_every_run_never_runs_unapproved_arguments(setup: Setup) -> None:
    """A counter in the hook: every run of the call has new arguments.  Nothing the person did not see runs; after
    asking again once, the call is refused with a reason the model can act on."""
    HOOK.mode = "counter"
    person = Person(Decision.allow())
    async with setup.client(person) as rt:
        result = await asyncio.wait_for(rt.run("touch a", limits=LIMITS), 60)
        approvals = [a for a in rt.store.audit_of(result.id) if a.kind == "approval"]
    assert set(TOUCHED) <= set(person.names()), f"ran {TOUCHED}, approved only {person.names()}"
    assert TOUCHED == []
    assert person.names() == ["a@1", "a@2"]
    assert result.text.startswith("touch was not run: its arguments changed after they were approved")
    assert "PreToolUse hook" in result.text
    assert approvals == []  # the worker's guard ran no call on those answers


async def test_allow_always_covers_what_its_rule_covers_even_when_the_hook_rewrites(setup: Setup) -> None:
    """"Allow always" for ``touch`` (the whole tool, as locally) covers the rewritten call: it runs without asking
    again, and the rule the worker keeps is the one the person allowed."""
    HOOK.mode = "counter"
    person = Person(Decision.allow_always())
    async with setup.client(person) as rt:
        result = await asyncio.wait_for(rt.run("touch a,touch b", limits=LIMITS), 60)
        rules = [a.data["rule"] for a in rt.store.audit_of(result.id) if a.kind == "approval"]
    assert person.names() == ["a@1"]
    assert TOUCHED == ["a@2", "b@3"]
    assert rules == ["touch"]


async def test_a_denial_stays_a_denial_when_the_hook_rewrites_differently(setup: Setup) -> None:
    """Only an allow is bound to the arguments it saw: a "no" refuses the call whatever it became (no new ask)."""
    HOOK.mode = "counter"
    person = Person(Decision.deny("no"))
    async with setup.client(person) as rt:
        result = await asyncio.wait_for(rt.run("touch a", limits=LIMITS), 60)
    assert (person.names(), TOUCHED) == (["a@1"], [])
    assert result.text.startswith("touch was not run: the user denied it: no.")


async def test_a_person_s_denial_is_not_overturned_by_a_permission_request_hook_on_the_second_run(
        setup: Setup) -> None:
    """The PermissionRequest hook did not decide, so the person was asked and said no; by the time the worker runs
    the call again with that "no", the hook would allow it.  The person's answer stands, as locally (where the
    hook runs once)."""
    def the_hook_would_allow_now() -> None:
        HOOK.permits = True

    person = Person(Decision.deny("no"), meanwhile=the_hook_would_allow_now)
    async with setup.client(person) as rt:
        result = await asyncio.wait_for(rt.run("touch a", limits=LIMITS), 60)
    assert (person.names(), TOUCHED) == (["a"], []), "the call ran although the person denied it"
    assert result.text.startswith("touch was not run: the user denied it: no.")


async def test_an_explicit_denial_stands_when_another_call_s_allow_always_arrived_first(setup: Setup) -> None:
    """Two concurrent calls wait; someone allows ``peek(y)`` always (the rule ``peek``), then someone denies
    ``peek(x)``.  The worker runs ``peek(x)`` again with that "no": the run's new rule must not run it anyway."""
    run_id = await setup.engine.start("peek:x,y", limits=LIMITS)
    deadline = time.monotonic() + 30
    while len(pending := await setup.engine.approvals(run_id)) < 2:
        assert time.monotonic() < deadline, f"two requests did not come (pending: {pending})"
        await asyncio.sleep(0.05)
    ids = {p["arguments"]["name"]: p["id"] for p in pending}
    await setup.engine.decide(run_id, ids["y"], Decision.allow_always("peek"))
    while PEEKED != ["y"]:
        assert time.monotonic() < deadline, "peek(y) did not run"
        await asyncio.sleep(0.05)
    await setup.engine.decide(run_id, ids["x"], Decision.deny("not x"))
    result = await asyncio.wait_for(setup.engine.result(run_id), 60)
    assert PEEKED == ["y"], "peek(x) ran although it was denied"
    assert "the user denied it: not x" in result.text


# -- 2. an answer reaches only the request it names ------------------------------------------------------------
async def test_an_answer_naming_an_earlier_request_never_reaches_a_later_call_under_its_id(setup: Setup) -> None:
    """``call_0`` asks about ``a``; someone denies it; the next turn's ``call_0`` asks about ``b``.  An allow meant
    for ``a`` (it names ``a``'s request) is refused, through the update and ``TemporalEngine.decide``; ``b`` still
    waits and is answered by a decision that names it."""
    run_id = await setup.engine.start("same:touch a,touch b", limits=LIMITS)
    seen = await _pending(setup.engine, run_id, "a")  # what a person looked at
    assert seen["id"] == "call_0"
    await setup.engine.decide(run_id, "call_0", Decision.deny("not a"))  # someone else answered it first
    later = await _pending(setup.engine, run_id, "b")
    assert later["id"] == "call_0"
    assert later["created_at"] != seen["created_at"]

    handle = setup.engine.client.get_workflow_handle(run_id)
    with contextlib.suppress(WorkflowUpdateFailedError):  # the person's late "allow" for a
        await handle.execute_update("decide", args=["call_0", {"behavior": "allow",
                                                                "created_at": seen["created_at"]}], result_type=str)
    assert [p["arguments"] for p in await setup.engine.approvals(run_id)] == [{"name": "b"}], \
        "the answer meant for touch(a) answered touch(b)"
    with pytest.raises(UserError, match=r"call_0.*now waits for another request: touch\(\{'name': 'b'\}\)"):
        await setup.engine.decide(run_id, "call_0", Decision.allow(), created_at=seen["created_at"])
    with pytest.raises(UserError, match="names no request"):
        await setup.engine.decide(run_id, "call_0", Decision.allow(), created_at="soon")  # type: ignore[arg-type]
    assert await setup.engine.decide(run_id, "call_0", Decision.deny("not b"),
                                     created_at=later["created_at"]) == "denied"
    result = await asyncio.wait_for(setup.engine.result(run_id), 60)
    assert TOUCHED == []
    assert result.text.count("the user denied it") == 2
    assert "not b" in result.text


async def test_runs_approve_request_refuses_an_answer_for_another_request(setup: Setup,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    run_id = await setup.engine.start("same:touch a,touch b", limits=LIMITS)
    where = ("--cwd", str(setup.root))
    seen = await _pending(setup.engine, run_id, "a")
    code, out, _ = await _cli(capsys, "runs", "approvals", run_id, *where)
    assert code == 0
    assert out.startswith("call_0  touch({'name': 'a'})  why: ")
    assert out.rstrip("\n").endswith(f"  request: {seen['created_at']!r}")
    stamp_a = out.rstrip("\n").rsplit("request: ", 1)[1]
    code, out, _ = await _cli(capsys, "runs", "approve", run_id, "call_0", "deny", "--request", stamp_a, *where)
    assert (code, out.split(": ", 1)[1]) == (0, "call_0 denied\n")

    later = await _pending(setup.engine, run_id, "b")
    code, out, err = await _cli(capsys, "runs", "approve", run_id, "call_0", "allow", "--request", stamp_a, *where)
    assert code == 2
    assert "now waits for another request: touch({'name': 'b'})" in err
    assert "subagents runs approvals" in err
    assert "Traceback" not in out + err
    code, out, err = await _cli(capsys, "runs", "approve", run_id, "call_0", "allow", "--request", "yesterday",
                                *where)
    assert code == 2
    assert "--request" in err
    assert "Traceback" not in out + err
    assert [p["arguments"] for p in await setup.engine.approvals(run_id)] == [{"name": "b"}]

    code, out, _ = await _cli(capsys, "runs", "approve", run_id, "call_0", "allow", "--request",
                              repr(later["created_at"]), *where)
    assert (code, out.split(": ", 1)[1]) == (0, "call_0 allowed once\n")
    result = await asyncio.wait_for(setup.engine.result(run_id), 60)
    assert TOUCHED == ["b"]
    assert result.text.endswith(" | touched b")
