"""``AgentWorkflow``: one agent run as a Temporal workflow (its id is the run id).

The workflow mirrors :class:`~subagents.runtime.loop.AgentCore` step by step, deterministically:

1. ``prepare`` (a root) — the worker resolves and records the run; a child arrives prepared by its parent.
2. Per turn: ``max_turns`` is checked *before* the model call; the model call is an activity that
   also records the messages appended since the last one; usage and cost are added and
   ``max_tokens`` / ``max_cost_usd`` checked.  ``timeout_s`` is a durable timer around the turns.
3. No tool calls: the final answer (unless inbox messages wait: they are appended, the run goes on).
4. Tool calls: consecutive parallel-safe calls run concurrently, the others in order.  The agent
   tools are carried out here (:mod:`.agent_tools`): ``spawn_agent`` starts a child workflow,
   ``wait`` waits on children, ``send_input`` signals one, ``close_agent`` cancels one.  Every
   other tool is a ``call_tool`` activity.  Failures are tool errors the model sees.
5. The tool results and the inbox (``send_input`` signals; background children's announcements,
   deduplicated by their idempotency key) form the next user message — the next tool boundary.
6. ``finish`` records the end; a background child then signals its parent ``announce`` once.

Cancellation (``close``) stops the run as ``cancelled`` and cancels its running children too.

Long runs keep their history bounded: before a model call, when Temporal suggests it (or after
``ActivityOptions.turns_per_history`` turns in this history), the workflow continues as new with its
state (:class:`~.shapes.Carry`: the conversation, the counts and usage, the inbox and the announcement
keys seen, its children); the run id stays, and the next history goes on from the same point.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from ...runtime.notices import fitted
    from .agent_tools import AGENT_TOOL_NAMES, AgentTools
    from .approvals import Approvals
    from .ends import CANCELS, Final, Stop, reraise_cancel, result_of, shielded
    from .limits import TreeBudget
    from .shapes import (
        WORKFLOW_NAME,
        AgentJob,
        AgentOutcome,
        Announcement,
        Carry,
        InboxItem,
        ModelCall,
        ModelReply,
        Prepared,
        Resumed,
        ResumeStart,
        WorkflowFinish,
    )
    from .slots import TreeSlots

__all__ = ["AgentWorkflow"]

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass
class _Inbox:
    items: list[tuple[str | None, str]] = field(default_factory=list)  # (announcement key or None, text)
    seen: set[str] = field(default_factory=set)


def _text(t: str) -> dict[str, Any]:
    return {"kind": "text", "text": t}


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """One agent run.  Signals: ``send_input(text)``, ``announce(Announcement)``; query: ``status()``."""

    def __init__(self) -> None:
        self.inbox = _Inbox()
        self.acks: list[str] = []  # announcements handed over, to mark delivered with the next recorded message
        self.messages: list[dict[str, Any]] = []
        self.recorded = 0
        self.status = "pending_init"
        self.turns = 0
        self.tool_calls = 0
        self.usage = dict.fromkeys(_USAGE_KEYS, 0)
        self.cost: float | None = None
        self.cost_known = True
        self.last_text = ""
        self.run_info: Prepared | None = None
        self.tools: AgentTools | None = None
        self.announcements: dict[str, Announcement] = {}  # by child id: how a carried-over child's end is learnt
        self.started = 0.0
        self.continued = 0
        self.turns_here = 0  # turns in this history
        self.approvals = Approvals(self)  # calls waiting for a person: the ``decide`` update, ``approvals`` query
        self.budget = TreeBudget()  # the tree's spend against the limits (engines/temporal/limits.py)
        self.slots = TreeSlots()  # max_threads: the root's ledger, or asking it (engines/temporal/slots.py)
        self.carried_limits: dict[str, Any] = {}

    # -- signals and queries ------------------------------------------------------------------------
    @workflow.signal(name="send_input")
    def send_input(self, text: str) -> None:
        """A message for the agent, read at its next tool boundary."""
        self.inbox.items.append((None, text))

    @workflow.signal(name="announce")
    def announce(self, ann: Announcement) -> None:
        """A background child's result; a key seen before (a repeat, or withdrawn by ``wait``) is dropped."""
        self.announcements[ann.child_id] = ann
        if ann.key in self.inbox.seen:
            return
        self.inbox.seen.add(ann.key)
        self.inbox.items.append((ann.key, ann.text))

    @workflow.signal(name="spent")
    def spent(self, spent: dict[str, Any]) -> None:
        """A descendant's model call (``{"tokens", "cost"}``), charged to this run's tree budget."""
        self.budget.charge(spent)
        self._tell_children()

    @workflow.signal(name="slots")
    def slots_signal(self, msg: dict[str, Any]) -> None:
        """The tree's slot ledger: asks, replies, grants and frees (engines/temporal/slots.py)."""
        self.slots.on_signal(msg)

    @workflow.signal(name="budget_out")
    def budget_out(self, out: dict[str, Any]) -> None:
        """An ancestor's budget is spent: this run stops before its next model call (its children too)."""
        self.budget.spent_above(out)
        self._tell_children()

    def _tell_children(self) -> None:
        if self.budget.out_sent or not (self.budget.bounded or self.budget.above):
            return
        running = [c.s.run_id for c in self.tools.children.values() if not c.s.ended] if self.tools else []
        self.budget.tell_children(self.usage, self.cost, running)

    def carve(self) -> dict[str, Any] | str:
        """The limits a child is carved from (what this tree has left), or why no child can be spawned."""
        elapsed = workflow.now().timestamp() - self.started - self.approvals.paused  # not while a person decided
        return self.budget.left(self.usage, self.cost, elapsed)

    @workflow.query(name="status")
    def get_status(self) -> str:
        return self.status

    @workflow.query(name="progress")
    def progress(self) -> dict[str, Any]:
        """``status``, ``turns``, ``tool_calls`` and ``continued`` (how many times the run continued as new)."""
        return {"status": self.status, "turns": self.turns, "tool_calls": self.tool_calls,
                "continued": self.continued}

    def announced(self, child_id: str) -> Announcement | None:
        return self.announcements.get(child_id)

    def withdraw(self, key: str) -> None:
        """``wait`` or ``close_agent`` handed this child's result over: its announcement counts as delivered."""
        waiting = any(k == key for k, _ in self.inbox.items)
        if key in self.inbox.seen and not waiting:
            return  # delivered (or withdrawn) before
        self.inbox.seen.add(key)
        self.inbox.items = [(k, t) for k, t in self.inbox.items if k != key]
        self.acks.append(key)

    def drain(self) -> list[dict[str, Any]]:
        self.acks.extend(key for key, _ in self.inbox.items if key is not None)
        texts = fitted([text for _, text in self.inbox.items])  # many results at once: one line each (.notices)
        self.inbox.items = []
        return [_text(t) for t in texts]

    # -- activities -----------------------------------------------------------------------------------
    def opts(self, kind: str) -> dict[str, Any]:
        assert self.run_info is not None
        o = self.run_info.options
        timeout = {"model": o.model_timeout_s, "tool": o.tool_timeout_s}.get(kind, o.store_timeout_s)
        return {"start_to_close_timeout": timedelta(seconds=timeout),
                "retry_policy": RetryPolicy(maximum_attempts=o.max_attempts,
                                            initial_interval=timedelta(milliseconds=200))}

    # -- the run --------------------------------------------------------------------------------------
    @workflow.run
    async def run(self, job: AgentJob) -> AgentOutcome:
        closed = Stop("cancelled", None, "closed before it finished")
        self.started = workflow.now().timestamp()
        p, cancelled = await self._begin(job)
        self.run_info = p
        self.budget.bind(p.limits, p.parent_id, self.carried_limits)
        self.slots.bind(p, self.continued, self.carried_limits.get("slots"))
        self.approvals.restore(p.parent_id, self.carried_limits.get("clock", {}))
        if self.tools is None:
            self.tools = AgentTools(self, p)
        if not self.messages:
            self.messages.append({"role": "user", "content": [_text(p.prompt)]})
        self.status = "running"
        assert self.tools is not None
        decision: Final | Stop = closed
        if not cancelled:
            try:
                if p.queued and not self.turns:  # no slot was free: wait for the root's grant
                    await self.slots.wait_turn(p, self.opts("store"))
                    self.started = workflow.now().timestamp()
                decision = await self._with_deadline(p)
            except CANCELS as e:
                if not is_cancelled_exception(e):
                    raise
                decision = closed
                await self.tools.cancel_children()
        # a close that lands while the end is being recorded must not stop the recording
        out, _ = await shielded(asyncio.ensure_future(self._end(p, decision, decision is closed)))
        return out

    async def _end(self, p: Prepared, decision: Final | Stop, closed: bool) -> AgentOutcome:
        """Record the run's end, free its slot, and announce a background run to its parent."""
        result = result_of(p, decision, turns=self.turns, tool_calls=self.tool_calls, usage=self.usage,
                           cost=self.cost, last_text=self.last_text,
                           duration_s=workflow.now().timestamp() - self.started)
        await self.budget.flush()
        fin = WorkflowFinish(p, result, self.messages[self.recorded:], self.recorded, self.acks)
        out: AgentOutcome = await workflow.execute_activity("subagents.finish", fin, result_type=AgentOutcome,
                                                            **self.opts("store"))
        self.status = result["status"]
        await self.slots.ended(p, closed)
        if out.announcement is not None and p.parent_id is not None:
            try:
                await workflow.get_external_workflow_handle(p.parent_id).signal("announce", out.announcement)
            except ApplicationError:
                workflow.logger.info("parent %s has ended: the announcement stays queued in the store", p.parent_id)
        return out

    def _restore(self, c: Carry) -> Prepared:
        """The state a previous history of this run carried over (continue-as-new)."""
        self.messages, self.recorded, self.acks = c.messages, c.recorded, c.acks
        early = self.inbox  # signals that reached this history before its run began (a repeated key is dropped)
        late = [(k, t) for k, t in early.items if k is None or k not in c.seen]
        self.inbox = _Inbox([(i.key, i.text) for i in c.inbox] + late, set(c.seen) | early.seen)
        self.turns, self.tool_calls, self.usage = c.turns, c.tool_calls, c.usage
        self.cost, self.cost_known, self.last_text = c.cost, c.cost_known, c.last_text
        self.started, self.continued = c.started, c.continued
        self.carried_limits = c.limits_state
        self.tools = AgentTools(self, c.run, c.children)
        return c.run

    async def _continue_if_long(self, p: Prepared) -> None:
        """Continue as new (raises) when this history is long enough; only at a turn boundary."""
        every = p.options.turns_per_history
        info = workflow.info()
        if self.turns_here == 0 or not (info.is_continue_as_new_suggested()
                                        or (every > 0 and self.turns_here >= every)):
            return
        assert self.tools is not None
        await self.budget.flush()
        await self.slots.flush()  # what the ledger owes is sent before its state is carried
        carry = Carry(p, self.messages, self.recorded, self.acks, [InboxItem(k, t) for k, t in self.inbox.items],
                      sorted(self.inbox.seen), self.turns, self.tool_calls, self.usage, self.cost, self.cost_known,
                      self.last_text, self.tools.carry(), self.started, self.continued + 1,
                      limits_state={**self.budget.state(), "slots": self.slots.state(),
                                    "clock": self.approvals.state()})
        workflow.continue_as_new(AgentJob(carry=carry))

    async def _begin(self, job: AgentJob) -> tuple[Prepared, bool]:
        """The run to go on with, and whether it was closed while being prepared (it is recorded, then ended)."""
        if job.carry is not None:
            return self._restore(job.carry), False
        if job.prepared is not None:
            return job.prepared, False
        if job.resume is None and job.start is None:
            raise ApplicationError("an agent workflow needs a start or a prepared run", non_retryable=True)
        try:
            return await (self._reopen(job.resume) if job.resume is not None else self._prepare(job)), False
        except CANCELS as e:  # closed at once, or while preparing: still recorded (and ended) in the store
            if not is_cancelled_exception(e):
                raise
            return await (self._reopen(job.resume) if job.resume is not None else self._prepare(job)), True

    async def _reopen(self, r: ResumeStart) -> Prepared:
        """A finished run resumed: its recorded conversation, then the new message."""
        got: Resumed = await workflow.execute_activity(
            "subagents.prepare_resume", r, result_type=Resumed,
            start_to_close_timeout=timedelta(seconds=r.options.store_timeout_s),
            retry_policy=RetryPolicy(maximum_attempts=r.options.max_attempts, non_retryable_error_types=["SpawnError"]))
        self.messages = [*got.messages, {"role": "user", "content": [_text(got.prompt)]}]
        self.recorded, self.acks = len(got.messages), list(got.delivered)
        return got.run

    async def _prepare(self, job: AgentJob) -> Prepared:
        assert job.start is not None
        o = job.start.options
        p: Prepared = await workflow.execute_activity(
            "subagents.prepare", job.start, result_type=Prepared,
            start_to_close_timeout=timedelta(seconds=o.store_timeout_s),
            retry_policy=RetryPolicy(maximum_attempts=o.max_attempts, non_retryable_error_types=["SpawnError"]))
        return p

    async def _with_deadline(self, p: Prepared) -> Final | Stop:
        timeout = p.limits.get("timeout_s")
        if timeout is None:
            return await self._turns(p)
        try:  # the clock stops while a person decides an approval
            return await self.approvals.within(self._turns(p), float(timeout), self.started)
        except TimeoutError:
            return Stop("timeout", "timeout_s", f"Exceeded timeout_s={timeout}")

    async def _turns(self, p: Prepared) -> Final | Stop:
        lim = p.limits
        while True:
            if lim.get("max_turns") is not None and self.turns + 1 > lim["max_turns"]:
                return Stop("limit", "max_turns", f"Exceeded max_turns={lim['max_turns']} (turns={self.turns + 1})")
            spent = self.budget.exhausted(self.usage, self.cost)
            if spent is not None:  # a sibling or a child spent the shared budget: no call that cannot be paid for
                return Stop("limit", spent[0], spent[1])
            await self._continue_if_long(p)
            self.turns += 1
            self.turns_here += 1
            call = ModelCall(p, self.messages, self.recorded, self.acks)
            try:
                reply = await workflow.execute_activity("subagents.call_model", call, result_type=ModelReply,
                                                        **self.opts("model"))
            except ActivityError as e:
                reraise_cancel(e)
                return Stop("error", None, f"the model call failed after retries: {e.cause or e}")
            if reply.error is not None or reply.message is None:
                return Stop("error", None, reply.error or "the model returned nothing")
            self.acks = []
            self.messages.append(reply.message)
            self.recorded = len(self.messages)
            stop = self._account(reply, lim)
            if stop is not None:
                return stop
            calls = [b for b in reply.message["content"] if b["kind"] == "tool_use"]
            if not calls:
                if self.inbox.items:
                    self.messages.append({"role": "user", "content": self.drain()})
                    continue
                return Final(reply.text)
            results = await self._run_tools(p, calls)
            self.messages.append({"role": "user", "content": results + self.drain()})

    def _account(self, reply: ModelReply, lim: dict[str, Any]) -> Stop | None:
        if reply.text:
            self.last_text = reply.text
        for k in _USAGE_KEYS:
            self.usage[k] += int(reply.usage.get(k, 0))
        if not reply.cost_known:
            self.cost_known, self.cost = False, None
        elif self.cost_known and reply.cost_usd is not None:
            self.cost = (self.cost or 0.0) + reply.cost_usd
        self.budget.report(reply.usage, reply.cost_usd)  # charged to the ancestors too
        over = self.budget.check(self.usage, self.cost)
        self._tell_children()
        return None if over is None else Stop("limit", over[0], over[1])

    async def _run_tools(self, p: Prepared, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        i = 0
        while i < len(calls):
            j = i
            while j < len(calls) and calls[j]["name"] in p.parallel_safe:
                j += 1
            group = calls[i:j] if j - i > 1 else [calls[i]]
            out.extend(await asyncio.gather(*(self._run_one(p, c) for c in group)))
            i += len(group)
        return out

    async def _run_one(self, p: Prepared, call: dict[str, Any]) -> dict[str, Any]:
        self.tool_calls += 1
        name, args = call["name"], call.get("arguments") or {}
        assert self.tools is not None
        if name in AGENT_TOOL_NAMES and name in p.tools:
            content, is_error = await self.tools.call(name, args)
        else:
            try:
                r = await self.approvals.call_tool(p, call["id"], name, args)
                content, is_error = r.content, r.is_error
            except ActivityError as e:
                reraise_cancel(e)
                content, is_error = f"tool {name!r} failed after retries: {e.cause or e}", True
        block: dict[str, Any] = {"kind": "tool_result", "tool_use_id": call["id"], "content": content}
        if is_error:
            block["is_error"] = True
        return block
