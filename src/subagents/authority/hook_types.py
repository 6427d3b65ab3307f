"""The types a hook sees and answers with (:class:`HookInput`, :class:`HookResult`) and what starts its process.

Their own module, so that the hook runner (``_hook_run``) and the hook chain (``hooks``) both use
them without importing each other.  ``subagents.authority.hooks`` re-exports them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ..models.base import AgentInfo

__all__ = ["STOP_EVENTS", "Decision", "HookInput", "HookResult", "ProcessLauncher", "input_dict"]

Decision = Literal["block", "allow"]
STOP_EVENTS = frozenset({"Stop", "SubagentStop"})


class ProcessLauncher(Protocol):
    """Starts a process confined like the ``bash`` tool; the process leads its own process group."""

    async def spawn(self, argv: Sequence[str], *, writable: bool = True, cwd: Path | None = None,
                    stdin: int | None = None, stdout: int | None = None, stderr: int | None = None,
                    env_extra: Mapping[str, str] | None = None) -> asyncio.subprocess.Process: ...


@dataclass(slots=True)
class HookInput:
    """What a hook is told about the event; :meth:`to_dict` is the JSON a command hook reads."""

    event: str
    agent_id: str
    nickname: str = ""
    agent_type: str = ""
    depth: int = 0
    parent_id: str | None = None
    cwd: str | Path = "."
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    result: str | None = None           # PostToolUse: the tool's result; Stop / SubagentStop: the final answer
    is_error: bool | None = None        # PostToolUse
    prompt: str | None = None           # UserPromptSubmit, SubagentStart
    permission_mode: str = "default"
    extra: dict[str, Any] = field(default_factory=dict)  # session_id, stop_hook_active, tool_use_id, ...

    @classmethod
    def for_agent(cls, event: str, agent: AgentInfo, *, cwd: str | Path, permission_mode: str = "default",
                  **fields: Any) -> HookInput:
        """The input for an event of ``agent`` (``fields``: tool, arguments, result, prompt, extra...)."""
        return cls(event, agent.id, agent.nickname, agent.agent_type, agent.depth, agent.parent_id, cwd,
                   permission_mode=permission_mode, **fields)

    def to_dict(self) -> dict[str, Any]:
        """Claude Code's fields (``hook_event_name``, ``tool_name``, ``tool_input``...) and our own."""
        return input_dict(self)

    def to_json(self) -> str:
        """The one JSON object a command hook gets on stdin."""
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str)


@dataclass(slots=True)
class HookResult:
    """What a Python hook answers (``None`` instead of a result: go on).

    ``decision``: ``"block"`` stops the chain and refuses (see the module docstring for what that means
    per event); ``"allow"`` skips asking the person (PreToolUse, PermissionRequest) unless a later hook
    blocks or replaces the arguments.  ``arguments`` replace the call's (PreToolUse only; on
    PermissionRequest they make the answer a hook error).  ``context`` is text for the model: added to
    the tool result (PostToolUse) or the prompt (UserPromptSubmit).  ``reason`` and ``context`` are cut
    at 10,000 characters.  ``stop`` is Claude Code's ``"continue": false``: on Stop / SubagentStop the
    agent ends; on any other event it blocks, like ``decision="block"``.
    """

    decision: Decision | None = None
    reason: str = ""
    arguments: dict[str, Any] | None = None
    context: str = ""
    stop: bool = False


_CLAUDE_MODES = {"autoEdit": "acceptEdits", "yolo": "bypassPermissions"}


def input_dict(inp: HookInput) -> dict[str, Any]:
    """The JSON a command hook reads: Claude Code's fields, then ours (which win a clash with ``extra``)."""
    extra = inp.extra
    d: dict[str, Any] = {
        "hook_event_name": inp.event,
        "session_id": extra.get("session_id", inp.agent_id if inp.parent_id is None else None),
        "cwd": str(inp.cwd),
        "permission_mode": _CLAUDE_MODES.get(inp.permission_mode, inp.permission_mode),
        "agent_id": inp.agent_id, "agent_type": inp.agent_type,
    }
    if inp.tool is not None:
        d["tool_name"] = inp.tool
        d["tool_input"] = inp.arguments if inp.arguments is not None else {}
    if inp.event == "PostToolUse" and inp.result is not None:
        d["tool_response"] = inp.result
    if inp.prompt is not None:
        d["prompt"] = inp.prompt
    if inp.event in STOP_EVENTS:
        d["stop_hook_active"] = bool(extra.get("stop_hook_active", False))
    d.update((k, v) for k, v in extra.items() if k not in d)
    d.update(event=inp.event, mode=inp.permission_mode, tool=inp.tool, arguments=inp.arguments,
             result=inp.result, is_error=inp.is_error,
             agent={"id": inp.agent_id, "nickname": inp.nickname, "type": inp.agent_type,
                    "depth": inp.depth, "parent_id": inp.parent_id})
    return d
