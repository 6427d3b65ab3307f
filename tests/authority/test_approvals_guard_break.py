"""A PreToolUse hook's "ask" and the arguments a person approved, against the guard (helper "approvals")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents.authority.approvals import ApprovalRequest, Decision
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event

ASK = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                              "permissionDecisionReason": "confirm writes to prod"}}


def writes(*paths: str) -> FunctionModel:
    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        if len(done) < len(paths):
            return ModelResponse("", [ToolCall("write_file", {"path": paths[len(done)], "content": "x"})])
        return ModelResponse("\n".join(done))

    return FunctionModel(fn)


async def test_a_hooks_ask_is_put_to_the_person_even_when_an_allow_always_rule_covers_the_call(
        tmp_path: Path) -> None:
    asked: list[str] = []

    def hook(inp: Any) -> Any:
        return ASK if (inp.arguments or {}).get("path") == "prod.txt" else None

    def approver(req: ApprovalRequest) -> Decision:
        asked.append(req.arguments["path"])
        return Decision.allow_always() if req.arguments["path"] == "a.txt" else Decision.deny("no prod")

    async with Runtime(writes("a.txt", "prod.txt"), workdir=tmp_path, store="memory://", approver=approver,
                       hooks={"PreToolUse": [hook]}) as rt:
        await rt.run("go")
    assert asked == ["a.txt", "prod.txt"]
    assert not (tmp_path / "prod.txt").exists()


async def test_the_call_the_person_approved_runs_even_if_its_dict_is_edited_while_they_decide(
        tmp_path: Path) -> None:
    held: list[dict[str, Any]] = []

    def listener(ev: Event) -> None:
        if ev.kind == "tool_start":
            held.append(ev.data["arguments"])  # the call's own dict (the conversation holds it too)

    async def approver(req: ApprovalRequest) -> Decision:
        shown = req.arguments["path"]
        held[0]["path"] = "other.txt"  # edited while the person decides
        return Decision.allow() if shown == "a.txt" else Decision.deny()

    async with Runtime(writes("a.txt"), workdir=tmp_path, store="memory://", approver=approver,
                       on_event=listener) as rt:
        await rt.run("go")
    assert (tmp_path / "a.txt").exists()
    assert not (tmp_path / "other.txt").exists()


async def test_allow_always_answers_are_let_go_with_their_tree(tmp_path: Path) -> None:
    """``Permissions.forget`` was never called: every root's "allow always" rules lived as long as the runtime
    (a long-lived ``subagents serve`` kept them all).  They are let go when the tree leaves memory."""
    async with Runtime(writes("a.txt"), workdir=tmp_path, store="memory://",
                       approver=lambda req: Decision.allow_always()) as rt:
        assert rt.manager.retention is not None
        assert rt.manager.authority is not None
        rt.manager.retention.keep_trees = 2
        roots = [(await rt.run("go")).id for _ in range(5)]
        perms = rt.manager.authority.permissions
        kept = [r for r in roots if perms.session_rules(r)]
    assert kept == roots[-2:]  # the two trees still in memory keep theirs: the others' are gone
