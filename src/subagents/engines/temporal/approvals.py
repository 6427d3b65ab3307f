"""Approvals inside an agent workflow: a call that needs a person waits, durably, for a ``decide`` update.

The ``call_tool`` activity never blocks on a person (:mod:`.asking`): when the agent's guard would ask,
it returns the request.  :meth:`Approvals.call_tool` then

1. keeps the request as pending (the ``approvals`` query lists them),
2. records it where clients see it (the ``request_approval`` activity: an ``approval_requested`` audit
   row on the tree's root run, which a client's :class:`~subagents.runtime.remote_approvals.RemoteApprovals`
   reads),
3. waits (``workflow.wait_condition``; no history grows while it waits) for the ``decide`` update —
   its validator refuses an id that is not pending or already decided, and a decision that names another
   request than the one waiting under that id (``created_at``: a model may give a later turn's call the id
   of an earlier one) — or, when the worker has an ``approval_timeout_s``, for that long (then it is a
   denial, as locally),
4. runs the call again with the decision and the request it answers attached: the guard then allows it
   (an "allow always" rule joins ``Prepared.session_rules``: the run's later calls and the children it
   starts after this have it, across continue-as-new too) or refuses it with the local engine's text.
   When the call is no longer the one the person allowed (a ``PreToolUse`` hook rewrote it differently on
   this run, :mod:`.asking`), the new call is asked about once more; if it changes again, it is refused.

While a person decides, the run's ``timeout_s`` clock stops, and its ancestors' too (``clock`` signals up
the tree), as locally: :meth:`Approvals.within` runs the turns against a deadline that moves by the time
held (``paused``, carried over a continue-as-new).

A close while waiting cancels the wait: the run ends as closed and the request is no longer pending.
A request is only ever pending inside a tool call, and the run continues as new only between turns, so
no request crosses a continue-as-new; the rules it added do (they are part of the carried run).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from temporalio import workflow

from .shapes import ApprovalNote, Prepared, ToolRun, ToolRunReply

__all__ = ["Approvals"]

_BEHAVIORS = ("allow", "deny")
_ASKS = 2  # requests for one call: the first, and one more when the call changed after it was allowed
T = TypeVar("T")


@dataclass
class _Pending:
    request: dict[str, Any]
    decision: dict[str, Any] | None = None


class Host(Protocol):
    """What approvals use of their workflow (:class:`~.workflow.AgentWorkflow`)."""

    def opts(self, kind: str) -> dict[str, Any]: ...


class Approvals:
    """The pending approvals of one agent workflow, its ``decide`` update and ``approvals`` query."""

    def __init__(self, wf: Host) -> None:
        self.wf = wf
        self.pending: dict[str, _Pending] = {}  # by call id
        self.holds = 0  # people deciding now (this run's requests and its descendants'): the clock is stopped
        self.held_at = 0.0
        self.paused = 0.0  # seconds the clock was stopped, in all
        self.parent_id: str | None = None
        workflow.set_update_handler("decide", self.decide, validator=self.validate)
        workflow.set_query_handler("approvals", self.listing)
        workflow.set_signal_handler("clock", self.clock)

    # -- the run's clock -------------------------------------------------------------------------------
    def clock(self, hold: bool) -> None:
        """Stop (``hold``) or restart the clock: a person decides a request of this run or a descendant's."""
        if hold:
            self.holds += 1
            if self.holds == 1:
                self.held_at = workflow.now().timestamp()
        elif self.holds:
            self.holds -= 1
            if not self.holds:
                self.paused += workflow.now().timestamp() - self.held_at

    def state(self) -> dict[str, Any]:
        """The clock, for the run's next history (a descendant's request may be waiting meanwhile)."""
        return {"holds": self.holds, "held_at": self.held_at, "paused": self.paused}

    def restore(self, parent_id: str | None, state: dict[str, Any]) -> None:
        self.parent_id = parent_id
        self.holds += int(state.get("holds", 0))
        self.held_at = float(state.get("held_at", self.held_at))
        self.paused += float(state.get("paused", 0.0))

    async def _hold(self, hold: bool) -> None:
        self.clock(hold)
        if self.parent_id is not None:
            try:
                await workflow.get_external_workflow_handle(self.parent_id).signal("clock", hold)
            except Exception:  # the parent has ended: no clock left to stop there
                workflow.logger.info("%s has ended: its clock was not held", self.parent_id)

    async def within(self, turns: Coroutine[Any, Any, T], timeout_s: float, started: float) -> T:
        """``turns``, stopped with :class:`TimeoutError` ``timeout_s`` after ``started`` plus the time a person
        spent deciding (the clock stops while one does)."""
        task = asyncio.ensure_future(turns)
        try:
            while not task.done():
                if self.holds:
                    await workflow.wait_condition(lambda: task.done() or not self.holds)
                    continue
                left = started + timeout_s + self.paused - workflow.now().timestamp()
                if left <= 0:
                    task.cancel()
                    await asyncio.wait([task])
                    raise TimeoutError
                try:
                    await workflow.wait_condition(lambda: task.done() or self.holds > 0, timeout=left)
                except TimeoutError:
                    continue
        except asyncio.CancelledError:  # the run is being closed: its turns stop too
            task.cancel()
            await asyncio.wait([task])
            raise
        return task.result()

    # -- the update and the query --------------------------------------------------------------------
    def validate(self, call_id: str, decision: dict[str, Any]) -> None:
        """Refuse a decision for a call that is not waiting for one (unknown, decided, or ended), or that names
        (``created_at``) another request than the one waiting under ``call_id``."""
        p = self.pending.get(call_id)
        if p is None:
            waiting = ", ".join(sorted(self.pending)) or "none"
            raise ValueError(f"no approval {call_id!r} is pending in this run (pending: {waiting}); it was decided, "
                             "timed out or its run ended")
        if not isinstance(decision, dict) or decision.get("behavior") not in _BEHAVIORS:
            raise ValueError("a decision needs behavior 'allow' or 'deny' (and optionally always, rule, message, "
                             "created_at)")
        _check_request(call_id, p.request, decision.get("created_at"))
        if p.decision is not None:
            raise ValueError(f"approval {call_id!r} has already been decided ({_label(p.decision)})")

    def decide(self, call_id: str, decision: dict[str, Any]) -> str:
        """Deliver a decision; returns what it is (``allowed once``, ``allowed always``, ``denied``)."""
        clean = {"behavior": decision["behavior"], "always": bool(decision.get("always")),
                 "rule": decision.get("rule") or None, "message": decision.get("message") or None,
                 "decided_by": str(decision.get("decided_by") or "approver")}
        self.pending[call_id].decision = clean
        return _label(clean)

    def listing(self) -> list[dict[str, Any]]:
        """The requests waiting for a decision (their ``ApprovalRequest.to_dict()`` fields, id = call id)."""
        return [p.request for p in self.pending.values() if p.decision is None]

    # -- a tool call -----------------------------------------------------------------------------------
    async def call_tool(self, p: Prepared, call_id: str, name: str, args: dict[str, Any]) -> ToolRunReply:
        """Run one tool call (the ``call_tool`` activity), asking a person first when the guard says so."""
        decision: dict[str, Any] | None = None
        asked: list[dict[str, Any]] = []  # the requests put to a person for this call
        while True:
            r: ToolRunReply = await workflow.execute_activity(
                "subagents.call_tool", ToolRun(p, call_id, name, args, decision), result_type=ToolRunReply,
                **self.wf.opts("tool"))
            p.session_rules.extend(x for x in r.rules if x not in p.session_rules)
            if r.approval is None:
                return r
            if asked and _same_call(asked[-1], r.approval):  # the guard asked again despite the answer: never loop
                return ToolRunReply(f"{name} was not run: it still needed an approval after one was given", True)
            if len(asked) >= _ASKS:  # it changed again after the person allowed the changed call
                return ToolRunReply(f"{name} was not run: its arguments changed after they were approved (a "
                                    "PreToolUse hook rewrites them differently each time the call is run, so no "
                                    "answer can hold for the call that would run). Do not retry the same call; "
                                    "continue without it or explain what you need.", True)
            asked.append(r.approval)
            decision = {**await self._ask(p, call_id, r.approval),
                        "approved": {k: r.approval.get(k) for k in ("tool", "arguments", "always_rule")}}

    async def _ask(self, p: Prepared, call_id: str, request: dict[str, Any]) -> dict[str, Any]:
        pending = self.pending[call_id] = _Pending(request)
        try:
            await workflow.execute_activity("subagents.request_approval", ApprovalNote(p, request),
                                            **self.wf.opts("store"))
            t = request.get("timeout_s")
            timeout = None if t is None else float(t)
            await self._hold(True)
            try:
                await workflow.wait_condition(lambda: pending.decision is not None, timeout=timeout)
            except TimeoutError:
                return {"behavior": "deny", "message": f"no decision within approval_timeout_s={timeout:g}",
                        "decided_by": "timeout"}
            finally:
                await asyncio.shield(self._hold(False))
            assert pending.decision is not None
            return pending.decision
        finally:
            del self.pending[call_id]


def _same_call(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two requests (as they travelled: JSON) are for the same call."""
    return bool(a.get("tool") == b.get("tool") and a.get("arguments") == b.get("arguments"))


def _check_request(call_id: str, request: dict[str, Any], named: Any) -> None:
    """Refuse a decision naming (``created_at``, as ``subagents runs approvals`` shows it) another request than
    ``request``; ``None`` names none (the caller takes whatever waits under ``call_id``)."""
    if named is None:
        return
    try:
        want = float(named)
    except (TypeError, ValueError):
        raise ValueError(f"created_at {named!r} names no request: give the request's created_at (the 'request:' "
                         "of `subagents runs approvals`)") from None
    have = request.get("created_at")
    if isinstance(have, int | float) and float(have) == want:
        return
    call = f"{request.get('tool')}({request.get('arguments')})"
    if len(call) > 300:  # a long command: enough to tell it from the one the answer was for
        call = f"{call[:300]}... ({len(call) - 300} more characters)"
    raise ValueError(f"approval {call_id!r} now waits for another request: {call}, requested at {have!r}, not the "
                     f"one requested at {want!r} that this answer is for (a later call got the same id). Nothing "
                     "was decided; look again with `subagents runs approvals`")


def _label(d: dict[str, Any]) -> str:
    if d.get("behavior") != "allow":
        return "denied"
    return "allowed always" if d.get("always") else "allowed once"
