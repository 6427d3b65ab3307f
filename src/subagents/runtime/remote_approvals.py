"""Approvals of runs on a remote engine: the client that started a tree answers its calls that need a person.

A worker has no person to ask: when a call needs an approval, the agent's workflow records the request
(an ``approval_requested`` audit row on the tree's root run) and waits for a ``decide`` update
(``engines/temporal/approvals.py``).  :class:`RemoteApprovals` reads those rows for the trees its
:class:`~subagents.runtime.runtime.Runtime` started and answers each request as the local engine would:

- it publishes ``approval_requested`` (the request's ``to_dict()``), asks the runtime's approver
  (``Runtime(approver=...)``; the terminal prompt of ``subagents run``) through its broker — one
  request at a time, ``approval_timeout_s`` applied — and publishes ``approval_decided``;
- a request that an "allow always" answer of this tree already covers is allowed without asking (the
  broker's re-check, as locally: a rule covers the whole tree), unless a ``PreToolUse`` hook asked for a person;
- with no approver it denies at once (``no approver``): the agent reads the local "no one can approve it
  here" refusal and the CLI's notice prints;
- it sends the decision to the agent's workflow, naming the request it answers (``created_at``: the workflow
  refuses it if another request waits under that call id by then); a request someone else answered first (another
  client, ``TemporalEngine.decide``) or whose run has ended is skipped.

A request is told apart by its run, its call id and when it was made: a model may give a call of a later turn
the id of an earlier one (some OpenAI-compatible servers number the calls of each answer from 0), and that call
is asked too; an answer is sent only while the very request it answers still waits under its id.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..authority.approvals import ApprovalBroker, Decision
from ..authority.rules import Rule, parse_rule
from ..engines.base import Executor, RunHandle
from ..exceptions import UserError
from ..store.base import Store
from .events import Event, EventBus

if TYPE_CHECKING:
    from ..engines.temporal.client import TemporalEngine

__all__ = ["RemoteApprovals"]


class RemoteApprovals:
    """Answers the approval requests of the watched trees (see the module docstring)."""

    interval = 0.1
    """Seconds between two reads of the store."""

    def __init__(self, store: Store, bus: EventBus, broker: ApprovalBroker | None,
                 engine: Callable[[], Awaitable[TemporalEngine]], executor: Executor) -> None:
        self.store, self.bus, self.engine, self.executor = store, bus, engine, executor
        self.broker = broker or ApprovalBroker(None)
        self.roots: set[str] = set()
        self.seen: set[tuple[str, str, str]] = set()  # (run id, call id, created at) of the requests taken
        self.rules: dict[str, list[Rule]] = {}  # root id -> the "allow always" rules given to that tree
        self.tasks: set[RunHandle[None]] = set()
        self._polls = 0

    def watch(self, root_id: str) -> None:
        """Answer the requests of the tree under ``root_id`` from now on (until all its runs have ended)."""
        self.roots.add(root_id)

    async def run(self) -> None:
        """Poll until cancelled (the runtime's service); cancelling also drops the requests being asked."""
        try:
            while True:
                if self.roots:
                    self.poll()
                await asyncio.sleep(self.interval)
        finally:
            for t in list(self.tasks):
                t.cancel()

    def poll(self) -> None:
        """Take the requests recorded since the last poll; forget the trees that have ended."""
        self._polls += 1
        for root in sorted(self.roots):
            for a in self.store.audit_of(root):
                if a.kind != "approval_requested":
                    continue
                key = (str(a.data.get("run_id")), str(a.data.get("id")), repr(a.data.get("created_at")))
                if key not in self.seen:
                    self.seen.add(key)
                    self._start(a.data)
            if self._polls % 20 == 0:
                recs = self.store.list_runs(root_id=root, include_archived=True)
                if recs and all(r.is_final for r in recs) and any(r.run_id == root for r in recs):
                    self.roots.discard(root)
                    self.rules.pop(root, None)

    def _start(self, request: dict[str, Any]) -> None:
        async def body() -> None:
            try:
                await self.answer(request)
            finally:
                self.tasks.discard(handle)

        handle: RunHandle[None] = self.executor.start_service("subagents-remote-approval", body)
        self.tasks.add(handle)

    def _covered(self, root: str, request: dict[str, Any]) -> bool:
        if request.get("hook_asked"):  # a hook's "ask" outranks the rules: a person decides, as locally
            return False
        args = request.get("arguments") or {}
        return any(r.matches(str(request.get("tool")), args, allow=True, root=request.get("root"))
                   for r in self.rules.get(root, ()))

    async def answer(self, request: dict[str, Any]) -> None:
        """Decide one request (unless it is no longer pending) and send the decision to its workflow."""
        from ..engines.temporal.asking import request_from  # lazy: temporalio is the `temporal` extra

        run_id, call_id, root = str(request["run_id"]), str(request["id"]), str(request.get("root_id") or "")
        engine = await self.engine()
        if not await self._waiting(engine, request):
            return  # answered by someone else, timed out, or its run ended
        req = request_from(request)
        self._emit(request, "approval_requested", req.to_dict())
        t0 = time.monotonic()
        decision = await self.broker.decide(req, lambda: self._covered(root, request))
        if not await self._waiting(engine, request):
            return  # it timed out while the person decided: the answer is for no call (its id may be reused)
        if decision.allowed and decision.always:
            text = decision.rule or req.always_rule
            rule: Rule | None
            try:
                rule = parse_rule(text, "approval")
            except ValueError:  # a malformed rule from the approver: the worker remembers the call itself
                try:
                    rule, decision = parse_rule(req.always_rule, "approval"), Decision.allow_always(req.always_rule)
                except ValueError:  # no rule for the call either (a blank command): allowed once
                    rule, decision = None, Decision.allow()
            if rule is not None:
                self.rules.setdefault(root, []).append(rule)
        try:
            await engine.decide(run_id, call_id, decision, created_at=request.get("created_at"))
        except UserError:
            return  # decided elsewhere meanwhile, or the run ended (closed): nothing to tell
        self._emit(request, "approval_decided", {
            "id": call_id, "tool": req.tool, "decision": decision.label(), "by": decision.decided_by,
            "message": decision.message, "waited_s": round(time.monotonic() - t0, 3), "reason": req.reason,
            "rule": (decision.rule or req.always_rule) if decision.always else None, "arguments": req.arguments})

    @staticmethod
    async def _waiting(engine: TemporalEngine, request: dict[str, Any]) -> bool:
        """Whether ``request`` itself (not a later call given its id) still waits for a decision."""
        for p in await engine.approvals(str(request["run_id"])):
            if p.get("id") == request["id"]:
                return all(p[k] == request.get(k) for k in ("created_at", "tool", "arguments") if k in p)
        return False

    def _emit(self, request: dict[str, Any], kind: str, data: dict[str, Any]) -> None:
        if self.bus.active:
            self.bus.publish(Event(kind, str(request["run_id"]), request.get("parent_id"), int(request.get("depth", 0)),
                                   data, nickname=str(request.get("nickname", ""))))

    async def aclose(self) -> None:
        """Drop the requests being asked (their runs wait for another client, or their timeout)."""
        for t in list(self.tasks):
            await self.executor.stop_service(t)
