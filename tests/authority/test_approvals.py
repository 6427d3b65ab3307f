"""Approvals through a real Runtime: the approver sees every ask (grandchildren's too), one at a time."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from subagents import Limits, Outcome, Runtime
from subagents.authority.approvals import ApprovalRequest, Decision
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event


def results(req: ModelRequest) -> list[str]:
    return [r.content for m in req.messages for r in m.tool_results]


def writer(*paths: str) -> FunctionModel:
    """A root that writes each path in turn, then answers with every tool result."""

    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if len(done) < len(paths):
            p = paths[len(done)]
            return ModelResponse("", [ToolCall("write_file", {"path": p, "content": p})])
        return ModelResponse("\n---\n".join(done))

    return FunctionModel(fn)


async def test_allow_once_deny_with_a_message_and_allow_always(workdir: Path) -> None:
    asked: list[ApprovalRequest] = []
    answers = iter([Decision.allow(), Decision.deny("not that one"), Decision.allow_always()])

    async def approver(req: ApprovalRequest) -> Decision:
        asked.append(req)
        return next(answers)

    async with Runtime(writer("a.txt", "b.txt", "c.txt", "d.txt"), workdir=workdir, store="memory://",
                       approver=approver) as rt:
        r = await rt.run("write")
        audit = rt.store.audit_of(r.id)
    assert [q.arguments["path"] for q in asked] == ["a.txt", "b.txt", "c.txt"]  # d.txt: allowed always by then
    q = asked[0]
    assert (q.tool, q.mode, q.agent.id, q.chain, q.always_rule) == ("write_file", "default", r.id, (), "write_file")
    assert q.reason == "permission mode 'default' asks before file edits"
    assert (workdir / "a.txt").exists()
    assert not (workdir / "b.txt").exists()
    assert (workdir / "c.txt").exists()
    assert (workdir / "d.txt").exists()
    out = r.text.split("\n---\n")
    assert out[1] == ("write_file was not run: the user denied it: not that one. Do not retry the same call; "
                      "adjust your approach.")
    assert [(a.data["decision"], a.data["by"]) for a in audit] == [
        ("allowed once", "approver"), ("denied", "approver"), ("allowed always", "approver")]
    assert audit[2].data["rule"] == "write_file"


async def test_without_an_approver_the_call_is_denied_and_the_model_is_told_how_to_allow_it(workdir: Path) -> None:
    events: list[Event] = []
    async with Runtime(writer("a.txt"), workdir=workdir, store="memory://", on_event=events.append) as rt:
        r = await rt.run("write")
    assert r.outcome is Outcome.OK
    assert not (workdir / "a.txt").exists()
    assert r.text == (
        "write_file was not run: permission mode 'default' asks before file edits, and no one can approve it here "
        "(no approver is configured and this is not an interactive terminal). The user can allow it with "
        "--permission-mode autoEdit (Runtime(permission_mode='autoEdit')), an allow rule such as 'write_file' in "
        "[permissions] allow of .subagents/config.toml (or --allow), or an approver (Runtime(approver=...)). "
        "Do not retry this call; continue without it or say what you need.")
    decided = [e.data for e in events if e.kind == "approval_decided"]
    assert [(d["decision"], d["by"]) for d in decided] == [("denied", "no approver")]
    assert [e.kind for e in events if e.kind.startswith("approval")] == ["approval_requested", "approval_decided"]


async def test_rules_and_modes_decide_without_asking(workdir: Path) -> None:
    async def approver(req: ApprovalRequest) -> Decision:
        raise AssertionError(f"asked for {req.describe()}")

    async with Runtime(writer("docs/a.md"), workdir=workdir, store="memory://", approver=approver,
                       allow=["write_file(docs/**)"]) as rt:
        await rt.run("write")
    assert (workdir / "docs" / "a.md").read_text() == "docs/a.md"
    async with Runtime(writer("b.md"), workdir=workdir, store="memory://", approver=approver,
                       permission_mode="autoEdit") as rt:
        await rt.run("write")
    assert (workdir / "b.md").exists()
    async with Runtime(writer("c.md"), workdir=workdir, store="memory://", approver=approver,
                       permission_mode="plan", allow=["write_file"]) as rt:
        r = await rt.run("write")
    assert not (workdir / "c.md").exists()
    assert r.text.startswith("write_file was not run: permission mode 'plan' refuses file edits")


async def test_twenty_background_grandchildren_ask_one_at_a_time_each_once(workdir: Path) -> None:
    showing = 0
    most = 0
    asked: list[ApprovalRequest] = []

    async def approver(req: ApprovalRequest) -> Decision:
        nonlocal showing, most
        showing += 1
        most = max(most, showing)
        asked.append(req)
        await asyncio.sleep(0.002)
        showing -= 1
        return Decision.allow()

    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if req.agent.depth == 2:  # grandchildren write a file each
            if not done:
                return ModelResponse("", [ToolCall("write_file", {"path": f"out/{req.agent.id}.txt",
                                                                  "content": "x"})])
            return ModelResponse(done[0])
        n = 4 if req.agent.depth == 0 else 5
        if not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"p{i}",
                                                               "background": True}) for i in range(n)])
        if len(done) == n:
            return ModelResponse("", [ToolCall("wait", {})])
        return ModelResponse("all done")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", approver=approver,
                       max_threads=30) as rt:
        r = await rt.run("fan out")
        grandchildren = {n.id for n in rt.manager.nodes.values() if n.depth == 2}
    assert r.outcome is Outcome.OK
    assert most == 1
    assert len(asked) == 20
    assert {q.agent.id for q in asked} == grandchildren  # each asked once
    assert all(len(q.chain) == 2 and q.chain[0].id == r.id for q in asked)  # the chain of parents, root first
    assert len(list((workdir / "out").iterdir())) == 20


async def test_allow_always_lets_queued_requests_through_without_asking_again(workdir: Path) -> None:
    calls = 0

    async def approver(req: ApprovalRequest) -> Decision:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)  # the others queue meanwhile
        return Decision.allow_always()

    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if req.agent.depth == 1:
            return ModelResponse("", [ToolCall("write_file", {"path": f"{req.agent.id}.txt", "content": "x"})]
                                 ) if not done else ModelResponse(done[0])
        if not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": f"p{i}",
                                                               "background": True}) for i in range(4)])
        return ModelResponse("", [ToolCall("wait", {})]) if len(done) == 4 else ModelResponse("ok")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", approver=approver) as rt:
        await rt.run("go")
        decided = [a.data["by"] for n in rt.manager.nodes.values() for a in rt.store.audit_of(n.id)]
    assert calls == 1
    assert sorted(decided) == ["approver", "rule", "rule", "rule"]
    assert len([n for n in os.listdir(workdir) if n.endswith(".txt")]) == 4


async def test_a_slow_approver_times_out_and_a_failing_one_denies(workdir: Path) -> None:
    cfg = workdir / ".subagents" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text("[permissions]\napproval_timeout_s = 0.2\n")

    async def slow(req: ApprovalRequest) -> Decision:
        await asyncio.sleep(30)
        return Decision.allow()

    async with Runtime(writer("a.txt"), workdir=workdir, store="memory://", approver=slow) as rt:
        r = await rt.run("write")
    assert r.text == ("write_file was not run: the approval timed out: no decision within approval_timeout_s=0.2. "
                      "Do not retry the same call; adjust your approach.")
    cfg.unlink()

    def broken(req: ApprovalRequest) -> Decision:
        raise RuntimeError("the approval service is down")

    async with Runtime(writer("a.txt"), workdir=workdir, store="memory://", approver=broken) as rt:
        r = await rt.run("write")
    assert r.text == ("write_file was not run: the user denied it: the approver failed (RuntimeError: the approval "
                      "service is down). Do not retry the same call; adjust your approach.")
    assert not (workdir / "a.txt").exists()


async def test_time_spent_deciding_does_not_count_against_the_timeout(workdir: Path) -> None:
    async def approver(req: ApprovalRequest) -> Decision:
        await asyncio.sleep(0.6)
        return Decision.allow()

    seen: dict[str, Any] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        done = results(req)
        if req.agent.depth == 1:
            return ModelResponse("", [ToolCall("write_file", {"path": "a.txt", "content": "x"})]
                                 ) if not done else ModelResponse("child wrote")
        if not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "w"})])
        seen["child"] = done[0]
        return ModelResponse("ok")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", approver=approver) as rt:
        r = await rt.run("go", limits=Limits(timeout_s=0.4))
    assert r.outcome is Outcome.OK
    assert "outcome ok" in seen["child"]
    assert "child wrote" in seen["child"]
    assert (workdir / "a.txt").exists()
