"""The sub-agent tools inside an agent workflow: children are child workflows.

``spawn_agent`` asks the worker to check and record the child (``plan_spawn``), then starts it as a
child workflow whose id is its run id: a foreground call waits for its result; a background one
returns at once and the child announces itself (``announce`` signal) when it ends.  ``wait`` waits on
the children's handles (durably: a timeout is a workflow timer), ``send_input`` signals a child,
``close_agent`` cancels one (its workflow cancels its own children in turn), ``list_agents`` lists them.
``resume_agent`` starts a finished child's workflow again under its id (``prepare_resume`` reopens it
with its recorded conversation and the new message).

When the run continues as new, its children go with it (:meth:`AgentTools.carry`): a child still running
is then reached by its workflow id, and its end is learnt from its announcement (which carries the
result ``wait`` hands over).

The texts the model reads are those of the local engine (``runtime/control.py``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

from temporalio import workflow

from .ends import shielded
from .shapes import (
    WORKFLOW_NAME,
    AgentJob,
    AgentOutcome,
    Announcement,
    ChildState,
    Prepared,
    ResumeStart,
    SpawnPlan,
    SpawnReply,
)
from .slots import TreeSlots

__all__ = ["AGENT_TOOL_NAMES", "AgentTools"]

AGENT_TOOL_NAMES = frozenset({"spawn_agent", "send_input", "wait", "close_agent", "resume_agent", "list_agents"})
_STARTING = 25
_ANNOUNCE_S = 120.0  # how long a closed carried-over child may take to announce its end
_NOTE = "runs in the background; its result will be announced to you, or collect it with wait"


@dataclass
class _Child:
    """A sub-agent: started by this run (``handle``), or carried over from an earlier history of it
    (``handle`` is ``None``: it is reached by id, and its end is learnt from its announcement)."""

    s: ChildState
    handle: workflow.ChildWorkflowHandle[Any, AgentOutcome] | None = None

    @property
    def key(self) -> str:
        return f"{self.s.run_id}:{self.s.runs}"

    @property
    def name(self) -> str:
        return f"{self.s.nickname} ({self.s.run_id})"

    def settled(self, announced: Announcement | None) -> bool:
        """Whether the child has ended; its state then holds what the parent reads."""
        s, h = self.s, self.handle
        if s.ended:
            return True
        if h is None:
            if announced is None or announced.key != self.key:
                return False
            s.text, s.status, s.failed = announced.compressed or announced.text, announced.status, False
        elif not h.done():
            return False
        elif h.cancelled():
            s.text, s.status, s.failed = f"{self.name} was closed", "shutdown", True
        elif (e := h.exception()) is not None:
            s.text, s.status, s.failed = f"{self.name} failed: {getattr(e, 'cause', None) or e}", "errored", True
        else:
            o = h.result()
            s.text, s.status, s.failed = o.compressed, str(o.result.get("status", "?")), False
        s.ended = True
        return True


class Host(Protocol):
    """What the agent tools use of their workflow (:class:`~.workflow.AgentWorkflow`)."""

    def opts(self, kind: str) -> dict[str, Any]: ...

    def withdraw(self, key: str) -> None: ...

    def announced(self, child_id: str) -> Announcement | None: ...

    def carve(self) -> dict[str, Any] | str: ...

    @property
    def slots(self) -> TreeSlots: ...


class AgentTools:
    """The agent tools of one agent workflow (``wf``: the workflow, for its inbox and activity options);
    ``carried``: the children of the run's earlier histories (continue-as-new)."""

    def __init__(self, wf: Host, run: Prepared, carried: list[ChildState] | None = None) -> None:
        self.wf = wf
        self.run = run
        self.children: dict[str, _Child] = {c.run_id: _Child(c) for c in carried or ()}
        # children being recorded and started at once: a workflow task then resolves at most this many
        # (a fan-out of 1,000 in one turn would otherwise make one task too slow to pass Temporal's
        # deadlock detector, and its replay too)
        self.starting = asyncio.Semaphore(_STARTING)

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
                return self.listing(), False
            return await self.resume(args)
        except _ToolError as e:
            return str(e), True

    def settled(self, c: _Child) -> bool:
        return c.settled(self.wf.announced(c.s.run_id) if c.handle is None else None)

    def carry(self) -> list[ChildState]:
        """The children's states, for the run's next history."""
        for c in self.children.values():
            self.settled(c)
        return [c.s for c in self.children.values()]

    def _child(self, ref: Any) -> _Child:
        if not isinstance(ref, str) or not ref:
            raise _ToolError("agent_id must be the id or nickname of one of your sub-agents")
        for c in self.children.values():
            if ref in (c.s.run_id, c.s.nickname) or (len(ref) >= 4 and c.s.run_id.startswith(ref)):
                return c
        known = ", ".join(c.name for c in self.children.values()) or "none"
        raise _ToolError(f"no sub-agent of yours has the id or nickname {ref!r}; yours: {known}")

    async def spawn(self, args: dict[str, Any]) -> tuple[str, bool]:
        async with self.starting:
            out = await self._start(args)
        if isinstance(out, tuple):
            return out
        assert out.handle is not None
        await asyncio.wait([out.handle])  # a foreground child: its result is the tool's
        self.settled(out)
        return out.s.text, out.s.failed

    async def _start(self, args: dict[str, Any]) -> tuple[str, bool] | _Child:
        """Record and start a child: the tool's answer (background, or an error), or the foreground child.
        Shielded: a run closed between recording the child and starting its workflow still starts it, so
        that the closing (cancel_children) ends it as closed instead of leaving its record running."""
        closing = False
        left = self.wf.carve()  # the child's limits are capped by what this tree has left now
        if isinstance(left, str):
            return left, True
        seat = await self.wf.slots.reserve(bool(args.get("background", False)))  # max_threads: the root decides
        if seat.refusal is not None:
            return seat.refusal, True
        plan = asyncio.ensure_future(workflow.execute_activity(
            "subagents.plan_spawn", SpawnPlan(replace(self.run, limits=left), args, queued=seat.ahead is not None),
            result_type=SpawnReply, **self.wf.opts("store")))
        reply, closing = await shielded(plan)
        if reply.child is None:
            self.wf.slots.release(seat.slot)
            if closing:
                raise asyncio.CancelledError()
            return reply.error or "the sub-agent could not be spawned", True
        child = replace(reply.child, slot=seat.slot, queued=seat.ahead is not None)
        start = asyncio.ensure_future(workflow.start_child_workflow(
            WORKFLOW_NAME, AgentJob(prepared=child), id=child.run_id, result_type=AgentOutcome,
            parent_close_policy=(workflow.ParentClosePolicy.ABANDON if child.background
                                 else workflow.ParentClosePolicy.REQUEST_CANCEL)))
        handle, late = await shielded(start)
        closing = closing or late
        c = self.children[child.run_id] = _Child(
            ChildState(child.run_id, child.nickname, child.agent_type, child.background), handle)
        self.wf.slots.named(seat, child)
        if closing:
            raise asyncio.CancelledError()
        if child.background:
            out: dict[str, Any] = {"agent_id": child.run_id, "nickname": child.nickname,
                                   "status": "running" if seat.ahead is None else "queued",
                                   "permission_mode": child.mode, "note": _NOTE}
            if seat.ahead is not None:
                out["queued"] = (f"queued: {seat.ahead} agents ahead of it; it starts when a slot frees "
                                 f"(max_threads={self.wf.slots.max_threads})")
            if child.notes:
                out["narrowed"] = "; ".join(child.notes)
            return json.dumps(out), False
        return c

    async def resume(self, args: dict[str, Any]) -> tuple[str, bool]:
        """``resume_agent``: a finished child goes on with its conversation and one more message (a new
        workflow run under its id); foreground: its result, background: it will be announced."""
        c = self._child(args.get("agent_id"))
        message = args.get("message")
        if not isinstance(message, str):
            raise _ToolError("resume_agent needs a message (what the resumed sub-agent should do)")
        if not self.settled(c):
            raise _ToolError(f"agent {c.name} is still running; use send_input to give it more instructions, "
                             "or wait for it")
        self.wf.withdraw(c.key)  # its last result is with you (or will be, with this tool's answer)
        job = AgentJob(resume=ResumeStart(c.s.run_id, message, {}, self.run.options))
        handle, closing = await shielded(asyncio.ensure_future(workflow.start_child_workflow(
            WORKFLOW_NAME, job, id=c.s.run_id, result_type=AgentOutcome,
            parent_close_policy=(workflow.ParentClosePolicy.ABANDON if c.s.background
                                 else workflow.ParentClosePolicy.REQUEST_CANCEL))))
        c = self.children[c.s.run_id] = _Child(
            ChildState(c.s.run_id, c.s.nickname, c.s.agent_type, c.s.background, runs=c.s.runs + 1), handle)
        if closing:  # closed while it started: it is a child now, so the closing ends it too
            raise asyncio.CancelledError()
        if c.s.background:
            return json.dumps({"agent_id": c.s.run_id, "nickname": c.s.nickname, "status": "running",
                               "note": "resumed in the background; its result will be announced"}), False
        await asyncio.wait([handle])
        self.settled(c)
        return c.s.text, c.s.failed

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
            await workflow.wait_condition(lambda: (any if any_ else all)([self.settled(k) for k in kids]),
                                          timeout=None if timeout is None else float(timeout))
        except TimeoutError:
            timed_out = True
        finished = [k for k in kids if self.settled(k)]
        running = [k for k in kids if not k.s.ended]
        for k in finished:
            self.wf.withdraw(k.key)
        head = (f"{len(finished)} finished, {len(running)} still running"
                + (f" (timed out after {timeout}s)" if timed_out else ""))
        if running:
            head += ": " + ", ".join(k.name for k in running[:50])
        return "\n\n".join([f"[wait: {head}; timed_out={str(timed_out).lower()}]",
                            *(k.s.text for k in finished)]), False

    async def send_input(self, args: dict[str, Any]) -> tuple[str, bool]:
        c = self._child(args.get("agent_id"))
        message = args.get("message")
        if not isinstance(message, str) or not message.strip():
            raise _ToolError("send_input needs a message (the text to tell the sub-agent)")
        if self.settled(c):
            raise _ToolError(f"{c.name} has already finished; its result is with you (or collect it with wait)")
        text = f"[message from your parent agent {self.run.nickname}]\n{message}"
        if c.handle is not None:
            await c.handle.signal("send_input", text)
        else:
            await workflow.get_external_workflow_handle(c.s.run_id).signal("send_input", text)
        return f"message queued for {c.name}; it reads it at its next tool boundary", False

    async def close(self, args: dict[str, Any]) -> tuple[str, bool]:
        c = self._child(args.get("agent_id"))
        already = self.settled(c)
        if not already:
            await self._cancel([c])
        self.wf.withdraw(c.key)
        prefix = "already finished" if already else "closed (with its descendants)"
        return f"{c.s.nickname} {prefix}.\n" + (c.s.text if self.settled(c) else ""), False

    def listing(self) -> str:
        if not self.children:
            return "you have no sub-agents"
        lines = []
        for c in self.children.values():
            status = "running" if not self.settled(c) else c.s.text if c.s.failed else c.s.status
            lines.append(f"- {c.name} {c.s.agent_type}: {status}")
        return "\n".join(lines)

    async def cancel_children(self) -> None:
        """The run is being closed: close its running children too, and wait until they have ended."""
        await self._cancel([c for c in self.children.values() if not self.settled(c)])

    async def _cancel(self, kids: list[_Child]) -> None:
        """Cancel ``kids`` (running) and wait until they have ended (a carried child: its announcement)."""
        started = [c.handle for c in kids if c.handle is not None]
        for h in started:
            h.cancel()
        carried = [c for c in kids if c.handle is None]
        for c in carried:
            try:
                await workflow.get_external_workflow_handle(c.s.run_id).cancel()
            except Exception:  # it has ended meanwhile: its announcement is on its way
                workflow.logger.info("%s had ended before it was closed", c.name)
        if started:
            await asyncio.wait(started)
        if carried:
            try:
                await workflow.wait_condition(lambda: all([self.settled(c) for c in carried]), timeout=_ANNOUNCE_S)
            except TimeoutError:
                workflow.logger.warning("closed sub-agents did not announce their end within %ss", _ANNOUNCE_S)


class _ToolError(Exception):
    """Bad arguments to an agent tool: its message goes back to the model as a tool error."""

