"""Restart recovery of ``spawn_agent`` calls a crash left without a result.

A parent's transcript may end with ``spawn_agent`` calls whose tool results were never recorded
while the children they started were: the child's record (and maybe its final status) is in the
store.  Such a call must not come back as *interrupted* — the model would spawn again and the
child's work would run twice — but with what the call returns live: a foreground child's result
(once it ends), a background child's id.  :func:`pending_spawns` finds those children.

A call is matched to a child of the parent whose id the parent's transcript never mentions (every
earlier spawn, wait and announcement names the child's id) and whose task is the call's prompt, in
call order.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..messages import Message, ToolResultBlock
from .node import AgentNode
from .prompts import compressed_result
from .result import RunResult

if TYPE_CHECKING:
    from ..store.base import RunRecord
    from .manager import AgentManager

__all__ = ["pending_spawns", "spawn_result"]


def _mentioned(messages: list[Message]) -> str:
    parts: list[str] = []
    for m in messages:
        for b in m.content:
            if b.kind == "text":
                parts.append(b.text)
            elif b.kind == "tool_result":
                parts.append(b.content)
    return "\n".join(parts)


def pending_spawns(mgr: AgentManager, node: AgentNode, last: Message) -> dict[str, RunRecord]:
    """Tool-use id -> the record of the child that ``last``'s unanswered ``spawn_agent`` call started."""
    calls = [b for b in last.tool_uses if b.name == "spawn_agent"]
    if not calls:
        return {}
    store = mgr.store
    seen = _mentioned(node.core.messages)
    free = [r for r in (store.get_run(c) for c in store.child_ids(node.id)) if r is not None and r.run_id not in seen]
    out: dict[str, RunRecord] = {}
    for b in calls:
        prompt = b.arguments.get("prompt")
        match = next((r for r in free if r.task == prompt), None)
        if match is not None:
            out[b.id] = match
            free.remove(match)
    return out


def spawn_result(mgr: AgentManager, call_id: str, rec: RunRecord, result: RunResult | None) -> ToolResultBlock:
    """What the ``spawn_agent`` call returns live: a background child's id, a foreground child's result."""
    if rec.background:
        return ToolResultBlock(call_id, json.dumps({
            "agent_id": rec.run_id, "nickname": rec.nickname, "status": rec.status if rec.is_final else "running",
            "permission_mode": rec.permission_mode,
            "note": "runs in the background; its result will be announced to you, or collect it with wait"}))
    assert result is not None
    return ToolResultBlock(call_id, compressed_result(result, mgr.cfg.result_max_chars))
