"""Adversarial approvals: what a person approved is what runs, concurrent asks keep their own answers, an
"allow always" covers only what its rule covers, a cancelled or closed run never runs a call it was asking
about, and an approver that misbehaves (raises anything, answers garbage) denies without ending the run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from subagents import Outcome, Runtime, tool
from subagents.authority.approvals import ApprovalBroker, ApprovalRequest, Decision
from subagents.models import AgentInfo, FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.tools.base import ToolCategory


def results(req: ModelRequest) -> list[str]:
    return [r.content for m in req.messages for r in m.tool_results]


def write_once(path: str, content: str = "x") -> FunctionModel:
    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if not done:
            return ModelResponse("", [ToolCall("write_file", {"path": path, "content": content})])
        return ModelResponse("final: " + done[0])

    return FunctionModel(fn)


def ask_rule(workdir: Path, *rules: str) -> None:
    cfg = workdir / ".subagents" / "config.toml"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text("[permissions]\nask = [" + ", ".join(f'"{r}"' for r in rules) + "]\n")


# -- what was approved is what runs -------------------------------------------------------------------------
async def test_an_approver_that_edits_the_request_does_not_change_the_call_that_runs(workdir: Path) -> None:
    """The request's arguments were the very dict the call ran with: an approver that redacted what it showed
    (or a buggy one) rewrote the call behind the person's back: ``evil.txt`` was written, ``a.txt`` was not."""

    async def approver(req: ApprovalRequest) -> Decision:
        req.arguments["path"] = "evil.txt"  # e.g. "normalising" what it logs
        req.arguments["content"] = "REDACTED"
        return Decision.allow()

    async with Runtime(write_once("a.txt", "the real content"), workdir=workdir, store="memory://",
                       approver=approver) as rt:
        r = await rt.run("write")
    assert r.outcome is Outcome.OK
    assert not (workdir / "evil.txt").exists()
    assert (workdir / "a.txt").read_text() == "the real content"


async def test_a_listener_that_edits_the_requested_event_does_not_change_the_call(workdir: Path) -> None:
    """``approval_requested`` carried the live arguments too: a listener trimming event data changed the call."""

    def listener(ev: Event) -> None:
        if ev.kind == "approval_requested":
            ev.data["arguments"]["path"] = "elsewhere.txt"

    async def approver(req: ApprovalRequest) -> Decision:
        return Decision.allow() if req.arguments["path"] == "a.txt" else Decision.deny("not that one")

    async with Runtime(write_once("a.txt"), workdir=workdir, store="memory://", approver=approver,
                       on_event=listener) as rt:
        await rt.run("write")
    assert (workdir / "a.txt").exists()
    assert not (workdir / "elsewhere.txt").exists()


# -- concurrent asks ----------------------------------------------------------------------------------------
async def test_parallel_calls_of_one_turn_each_get_their_own_answer(workdir: Path) -> None:
    """Read tools run in parallel; an ask rule makes each ask.  The answers must not cross: the approver allows
    ``s1``, denies ``s2`` (answering slowly, so both wait at once), and each result is its own call's, even when
    the model gave every call the same id."""
    ask_rule(workdir, "secret")
    ran: list[str] = []
    showing, most = 0, 0

    @tool(category=ToolCategory.READ)
    async def secret(name: str) -> str:
        """Read a secret."""
        ran.append(name)
        return f"value of {name}"

    async def approver(req: ApprovalRequest) -> Decision:
        nonlocal showing, most
        showing += 1
        most = max(most, showing)
        await asyncio.sleep(0.05)
        showing -= 1
        return Decision.allow() if req.arguments["name"] == "s1" else Decision.deny(f"no {req.arguments['name']}")

    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if not done:
            return ModelResponse("", [ToolCall("secret", {"name": n}, id="call_0")  # one id, repeated
                                      for n in ("s2", "s1", "s2", "s1")])
        return ModelResponse("\n".join(done))

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", approver=approver,
                       tools=[secret]) as rt:
        r = await rt.run("read")
    out = r.text.split("\n")
    assert [o.startswith("value of s1") for o in out] == [False, True, False, True]
    assert all("the user denied it: no s2" in o for o in out[::2])
    assert sorted(ran) == ["s1", "s1"]
    assert most == 1


async def test_a_narrow_allow_always_lets_through_only_the_waiting_calls_it_covers(workdir: Path) -> None:
    """Three calls wait at once; the first answer is "allow always" with the rule ``probe(staging)``: the other
    ``staging`` call goes through by that rule, the ``prod`` one is still asked (and here refused)."""
    ask_rule(workdir, "probe")
    ran: list[str] = []
    asked: list[str] = []

    @tool(category=ToolCategory.READ)
    async def probe(target: str) -> str:
        """Probe a target."""
        ran.append(target)
        return f"probed {target}"

    async def approver(req: ApprovalRequest) -> Decision:
        asked.append(req.arguments["target"])
        await asyncio.sleep(0.05)
        if req.arguments["target"] == "staging":
            return Decision.allow_always("probe(staging)")
        return Decision.deny("not prod")

    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if not done:
            return ModelResponse("", [ToolCall("probe", {"target": t}) for t in ("staging", "prod", "staging")])
        return ModelResponse("\n".join(done))

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", approver=approver,
                       tools=[probe]) as rt:
        r = await rt.run("probe")
        by = [a.data["by"] for a in rt.store.audit_of(r.id) if a.kind == "approval"]
    assert asked == ["staging", "prod"]
    assert ran == ["staging", "staging"]
    assert sorted(by) == ["approver", "approver", "rule"]
    assert "not prod" in r.text.split("\n")[1]


# -- cancelled or closed while asking -----------------------------------------------------------------------
async def test_a_run_cancelled_while_its_call_waits_never_runs_it(workdir: Path) -> None:
    asked = asyncio.Event()
    answered: list[str] = []

    async def approver(req: ApprovalRequest) -> Decision:
        asked.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            answered.append("cancelled")
            return Decision.allow()  # a late "yes": it must not let the call run
        return Decision.allow()

    async with Runtime(write_once("a.txt"), workdir=workdir, store="memory://", approver=approver) as rt:
        task = asyncio.ensure_future(rt.run("write"))
        await asyncio.wait_for(asked.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    assert answered == ["cancelled"]
    assert not (workdir / "a.txt").exists()


async def test_closing_a_child_that_waits_for_a_person_frees_the_queue_for_the_others(workdir: Path) -> None:
    """A background child's request is being shown when the child is closed: its call never runs, and the
    root's own request, queued behind it, is then asked and allowed (nothing hangs)."""
    child_asking = asyncio.Event()
    asked: list[int] = []

    async def approver(req: ApprovalRequest) -> Decision:
        asked.append(req.agent.depth)
        if req.agent.depth == 1:
            child_asking.set()
            await asyncio.sleep(30)
        return Decision.allow()

    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if req.agent.depth == 1:
            if not done:
                return ModelResponse("", [ToolCall("write_file", {"path": "child.txt", "content": "c"})])
            return ModelResponse("child: " + done[0])
        if not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "w",
                                                               "background": True})])
        if len(done) == 1:
            return ModelResponse("", [ToolCall("write_file", {"path": "root.txt", "content": "r"})])
        if len(done) == 2:
            return ModelResponse("", [ToolCall("wait", {})])
        return ModelResponse("done")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", approver=approver) as rt:
        task = asyncio.ensure_future(rt.run("go"))
        await asyncio.wait_for(child_asking.wait(), 10)
        child = next(n.id for n in rt.manager.nodes.values() if n.depth == 1)
        await asyncio.wait_for(rt.close(child), 10)
        r = await asyncio.wait_for(task, 10)
    assert r.outcome is Outcome.OK
    assert (workdir / "root.txt").read_text() == "r"
    assert not (workdir / "child.txt").exists()
    assert sorted(asked) == [0, 1]


# -- approvers that misbehave --------------------------------------------------------------------------------
def request() -> ApprovalRequest:
    return ApprovalRequest("r1", AgentInfo("a1", "ada", "general-purpose"), (), "bash", {"command": "ls"}, "why",
                           "default", "bash(ls)")


async def _raise_cancelled(req: ApprovalRequest) -> Decision:
    raise asyncio.CancelledError


def _raise_interrupt(req: ApprovalRequest) -> Decision:
    raise KeyboardInterrupt


async def _raise_interrupt_async(req: ApprovalRequest) -> Decision:
    raise KeyboardInterrupt


@pytest.mark.parametrize("approver", [_raise_cancelled, _raise_interrupt, _raise_interrupt_async])
async def test_an_approver_raising_cancelled_error_or_keyboard_interrupt_denies(approver: Any) -> None:
    """Docs: "an approver that raises ... denies the call".  These escaped the broker: the run raised
    ``CancelledError`` (as if its caller had cancelled it), or ``KeyboardInterrupt`` ended the program."""
    d = await ApprovalBroker(approver).decide(request())
    assert (d.allowed, d.decided_by) == (False, "approver error")


async def test_in_a_run_an_approver_raising_cancelled_error_denies_and_the_run_goes_on(workdir: Path) -> None:
    async with Runtime(write_once("a.txt"), workdir=workdir, store="memory://", approver=_raise_cancelled) as rt:
        r = await asyncio.wait_for(rt.run("write"), 20)
    assert r.outcome is Outcome.OK
    assert r.text.startswith("final: write_file was not run: the user denied it: the approver failed (CancelledError")
    assert not (workdir / "a.txt").exists()


async def test_the_callers_cancellation_still_cancels_an_approver_that_raises_cancelled_error() -> None:
    started = asyncio.Event()

    async def approver(req: ApprovalRequest) -> Decision:
        started.set()
        await asyncio.sleep(30)  # its CancelledError here is the caller's
        return Decision.allow()

    task = asyncio.ensure_future(ApprovalBroker(approver).decide(request()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("answer", [None, True, "allow", {"behavior": "allow"}, Decision.allow, 1])
async def test_an_answer_that_is_no_decision_denies(answer: object) -> None:
    approvers: list[Any] = [lambda req: answer, _async_returning(answer)]
    for approver in approvers:
        d = await ApprovalBroker(approver).decide(request())
        assert (d.allowed, d.decided_by) == (False, "approver error")


def _async_returning(answer: object) -> Any:
    async def approver(req: ApprovalRequest) -> object:
        return answer

    return approver


async def test_a_sync_approver_returning_a_coroutine_is_awaited() -> None:
    async def later() -> Decision:
        return Decision.deny("thought about it")

    d = await ApprovalBroker(lambda req: later()).decide(request())
    assert (d.allowed, d.message) == (False, "thought about it")


# -- a remote engine's requests, answered by the client that started the tree -------------------------------------
class FakeEngine:
    """The workflow's side: ``pending`` is what its ``approvals`` query lists; ``decide`` records the answers."""

    def __init__(self, *pending: dict[str, Any]) -> None:
        self.pending = list(pending)
        self.decided: list[tuple[str, Decision]] = []

    async def approvals(self, run_id: str) -> list[dict[str, Any]]:
        return list(self.pending)

    async def decide(self, run_id: str, call_id: str, decision: Decision, *, created_at: float | None = None) -> str:
        self.decided.append((call_id, decision))
        return decision.label()


class Taken:
    """An executor that keeps the requests a poll takes instead of answering them."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start_service(self, name: str, body: Any) -> object:
        self.started.append(name)
        body().close()  # never run: only counted
        return object()


def remote_request(command: str, at: float, **extra: Any) -> dict[str, Any]:
    return {"run_id": "r1", "id": "call_0", "root_id": "r1", "tool": "bash", "arguments": {"command": command},
            "always_rule": f"bash({command})", "reason": "permission mode 'default' asks", "mode": "default",
            "created_at": at, **extra}


def remote(engine: FakeEngine, approver: Any, executor: Any = None) -> Any:
    from subagents.runtime.events import EventBus
    from subagents.runtime.remote_approvals import RemoteApprovals
    from subagents.store.memory import MemoryStore

    async def get_engine() -> Any:
        return engine

    return RemoteApprovals(MemoryStore(), EventBus(), ApprovalBroker(approver), get_engine, executor)


def test_a_later_call_given_the_id_of_an_earlier_one_is_asked_too() -> None:
    """Requests were told apart by (run id, call id) only: a second-turn call reusing the id ``call_0`` of a first-turn
    one was taken as already seen and never asked; its run waited for an answer that never came."""
    ra = remote(FakeEngine(), None, Taken())
    ra.watch("r1")
    ra.store.add_audit("r1", "approval_requested", remote_request("ls", 1.0), 1.0)
    ra.poll()
    ra.store.add_audit("r1", "approval_requested", remote_request("rm -rf build", 2.0), 2.0)
    ra.store.add_audit("r1", "approval_requested", remote_request("rm -rf build", 2.0), 2.5)  # a retried record
    ra.poll()
    assert len(ra.executor.started) == 2


async def test_an_answer_is_not_sent_to_a_later_call_that_took_the_id_of_the_one_answered() -> None:
    """The person saw ``ls``; while they decided, that request timed out and a later call ``rm -rf build`` waits
    under the same call id: their "yes" was sent by id and ran the command they never saw."""
    first, later = remote_request("ls", 1.0), remote_request("rm -rf build", 2.0)
    engine = FakeEngine(first)

    async def approver(req: ApprovalRequest) -> Decision:
        engine.pending = [later]  # meanwhile: the first timed out, the later call asks under the same id
        return Decision.allow()

    await remote(engine, approver).answer(first)
    assert engine.decided == []


async def test_the_answer_for_the_request_still_waiting_is_sent() -> None:
    first = remote_request("ls", 1.0)
    engine = FakeEngine(first)
    await remote(engine, lambda req: Decision.allow()).answer(first)
    assert [(c, d.label()) for c, d in engine.decided] == [("call_0", "allowed once")]


async def test_a_remote_request_a_hook_asked_for_is_asked_despite_an_allow_always_rule() -> None:
    from subagents.authority.rules import parse_rule

    asked: list[str] = []
    req = remote_request("ls", 1.0, hook_asked=True)
    engine = FakeEngine(req)

    def approver(r: ApprovalRequest) -> Decision:
        asked.append(r.arguments["command"])
        return Decision.deny("not now")

    ra = remote(engine, approver)
    ra.rules["r1"] = [parse_rule("bash(ls)", "approval")]
    await ra.answer(req)
    assert asked == ["ls"]
    assert [d.label() for _, d in engine.decided] == ["denied"]


async def test_the_broker_asks_for_a_hook_asked_request_even_when_a_rule_covers_it_by_now() -> None:
    """The guard's re-check (an "allow always" rule covers the call by now) answered a request a PreToolUse hook
    asked a person about: the hook's "ask" outranks the rules (docs/permissions.md)."""
    asked: list[str] = []

    def approver(r: ApprovalRequest) -> Decision:
        asked.append(r.tool)
        return Decision.deny()

    hooked = ApprovalRequest("r2", AgentInfo("a1", "ada", "general-purpose"), (), "bash", {"command": "ls"}, "why",
                             "default", "bash(ls)", hook_asked=True)
    d = await ApprovalBroker(approver).decide(hooked, lambda: True)
    assert (d.allowed, asked) == (False, ["bash"])
    d = await ApprovalBroker(approver).decide(request(), lambda: True)  # no hook asked: the rule answers
    assert (d.allowed, d.decided_by, asked) == (True, "rule", ["bash"])
