"""The sub-agent tools inside an agent workflow: children are child workflows.

``spawn_agent`` asks the worker to check and record the child (``plan_spawn``), then starts it as a
child workflow whose id is its run id: a foreground call waits for its result; a background one
returns at once and the child announces itself (``announce`` signal) when it ends.  ``wait`` waits on
the children's handles (durably: a timeout is a workflow timer), ``send_input`` signals a child,
``close_agent`` cancels one (its workflow cancels its own children in turn), ``list_agents`` lists them.
``resume_agent`` is not supported on this engine yet: a tool error says so.

The texts the model reads are those of the local engine (``runtime/control.py``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Protocol

from temporalio import workflow

from .shapes import WORKFLOW_NAME, AgentJob, AgentOutcome, Prepared, SpawnPlan, SpawnReply

__all__ = ["AGENT_TOOL_NAMES", "AgentTools"]

AGENT_TOOL_NAMES = frozenset({"spawn_agent", "send_input", "wait", "close_agent", "resume_agent", "list_agents"})
_NOTE = "runs in the background; its result will be announced to you, or collect it with wait"


@dataclass
class _Child:
    run: Prepared
    handle: workflow.ChildWorkflowHandle[Any, AgentOutcome]

    @property
    def key(self) -> str:
        return f"{self.run.run_id}:1"

    def outcome(self) -> AgentOutcome | str | None:
        """The child's outcome, the error that ended its workflow, or ``None`` while it runs."""
        h = self.handle
        if not h.done():
            return None
        if h.cancelled():
            return f"{self.run.nickname} ({self.run.run_id}) was closed"
        e = h.exception()
        if e is not None:
            return f"{self.run.nickname} ({self.run.run_id}) failed: {getattr(e, 'cause', None) or e}"
        return h.result()


def _text(o: AgentOutcome | str) -> str:
    return o if isinstance(o, str) else o.compressed


class Host(Protocol):
    """What the agent tools use of their workflow (:class:`~.workflow.AgentWorkflow`)."""

    def opts(self, kind: str) -> dict[str, Any]: ...

    def withdraw(self, key: str) -> None: ...


class AgentTools:
    """The agent tools of one agent workflow (``wf``: the workflow, for its inbox and activity options)."""

    def __init__(self, wf: Host, run: Prepared) -> None:
        self.wf = wf
        self.run = run
        self.children: dict[str, _Child] = {}

    async def call(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Carry out one agent tool call: ``(content, is_error)``."""
        try:
            if name == "spawn_agent":
                return await self.spawn(args)
            if name == "wait":
                return await self.wait(args)
            if name == "send_input":
                return await self.send_input(args)
            if name == "close_agent":
                return await self.close(args)
            if name == "list_agents":
                return self.list(), False
            return ("resume_agent is not supported on the Temporal engine yet; spawn a new agent with the "
                    "context it needs"), True
        except _ToolError as e:
            return str(e), True

    def _child(self, ref: Any) -> _Child:
        if not isinstance(ref, str) or not ref:
            raise _ToolError("agent_id must be the id or nickname of one of your sub-agents")
        for c in self.children.values():
            if ref in (c.run.run_id, c.run.nickname) or (len(ref) >= 4 and c.run.run_id.startswith(ref)):
                return c
        known = ", ".join(f"{c.run.nickname} ({c.run.run_id})" for c in self.children.values()) or "none"
        raise _ToolError(f"no sub-agent of yours has the id or nickname {ref!r}; yours: {known}")

    async def spawn(self, args: dict[str, Any]) -> tuple[str, bool]:
        reply = await workflow.execute_activity("subagents.plan_spawn", SpawnPlan(self.run, args),
                                                result_type=SpawnReply, **self.wf.opts("store"))
        if reply.child is None:
            return reply.error or "the sub-agent could not be spawned", True
        child = reply.child
        handle = await workflow.start_child_workflow(
            WORKFLOW_NAME, AgentJob(prepared=child), id=child.run_id, result_type=AgentOutcome,
            parent_close_policy=(workflow.ParentClosePolicy.ABANDON if child.background
                                 else workflow.ParentClosePolicy.REQUEST_CANCEL))
        c = self.children[child.run_id] = _Child(child, handle)
        if child.background:
            out: dict[str, Any] = {"agent_id": child.run_id, "nickname": child.nickname, "status": "running",
                                   "permission_mode": child.mode, "note": _NOTE}
            if child.notes:
                out["narrowed"] = "; ".join(child.notes)
            return json.dumps(out), False
        await asyncio.wait([handle])
        o = c.outcome()
        assert o is not None
        return _text(o), isinstance(o, str)

    async def wait(self, args: dict[str, Any]) -> tuple[str, bool]:
        ids, timeout = args.get("agent_ids"), args.get("timeout_s")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
            raise _ToolError("timeout_s must be a number of seconds")
        kids = [self._child(a) for a in ids] if ids else list(self.children.values())
        if not kids:
            return "you have no sub-agents to wait for", False
        any_ = args.get("return_when") == "any"
        timed_out = False
        try:
            await workflow.wait_condition(
                lambda: (any if any_ else all)(k.handle.done() for k in kids),
                timeout=None if timeout is None else float(timeout))
        except TimeoutError:
            timed_out = True
        finished = [(k, o) for k in kids if (o := k.outcome()) is not None]
        running = [k for k in kids if not k.handle.done()]
        for k, _ in finished:
            self.wf.withdraw(k.key)
        head = (f"{len(finished)} finished, {len(running)} still running"
                + (f" (timed out after {timeout}s)" if timed_out else ""))
        if running:
            head += ": " + ", ".join(f"{k.run.nickname} ({k.run.run_id})" for k in running[:50])
        return "\n\n".join([f"[wait: {head}; timed_out={str(timed_out).lower()}]",
                            *(_text(o) for _, o in finished)]), False

    async def send_input(self, args: dict[str, Any]) -> tuple[str, bool]:
        c = self._child(args.get("agent_id"))
        message = args.get("message")
        if not isinstance(message, str) or not message.strip():
            raise _ToolError("send_input needs a message (the text to tell the sub-agent)")
        if c.handle.done():
            raise _ToolError(f"{c.run.nickname} ({c.run.run_id}) has already finished; its result is with you "
                             "(or collect it with wait)")
        await c.handle.signal("send_input", f"[message from your parent agent {self.run.nickname}]\n{message}")
        return f"message queued for {c.run.nickname} ({c.run.run_id}); it reads it at its next tool boundary", False

    async def close(self, args: dict[str, Any]) -> tuple[str, bool]:
        c = self._child(args.get("agent_id"))
        already = c.handle.done()
        if not already:
            c.handle.cancel()
            await asyncio.wait([c.handle])
        self.wf.withdraw(c.key)
        o = c.outcome()
        prefix = "already finished" if already else "closed (with its descendants)"
        return f"{c.run.nickname} {prefix}.\n" + (_text(o) if o is not None else ""), False

    def list(self) -> str:
        if not self.children:
            return "you have no sub-agents"
        lines = []
        for c in self.children.values():
            o = c.outcome()
            status = "running" if o is None else o if isinstance(o, str) else o.result.get("status", "?")
            lines.append(f"- {c.run.nickname} ({c.run.run_id}) {c.run.agent_type}: {status}")
        return "\n".join(lines)

    async def cancel_children(self) -> None:
        """The run is being closed: close its running children too, and wait until they have ended."""
        running = [c.handle for c in self.children.values() if not c.handle.done()]
        for h in running:
            h.cancel()
        if running:
            await asyncio.wait(running)


class _ToolError(Exception):
    """Bad arguments to an agent tool: its message goes back to the model as a tool error."""
