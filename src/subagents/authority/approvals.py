"""Approvals: a call that needs a person waits for a :class:`Decision` from the runtime's approver.

Every agent's requests — background grandchildren's included — go to the one approver of the
runtime (``Runtime(approver=...)``, or the terminal prompt of ``subagents run``).  Requests are shown
one at a time, in order, each once; a request still queued when an "allow always" decision adds a
rule that covers it is allowed without asking again.  No approver: denied, with a message that says
how to allow the call.  ``timeout_s``: a decision not made in time is a denial.

>>> import asyncio
>>> from subagents.models import AgentInfo
>>> async def approver(req: ApprovalRequest) -> Decision:
...     return Decision.deny("not on Fridays") if req.tool == "bash" else Decision.allow()
>>> broker = ApprovalBroker(approver)
>>> req = ApprovalRequest("r1", AgentInfo("a1", "ada", "general-purpose"), (), "bash", {"command": "ls"},
...                       "permission mode 'default' asks before running 'bash'", "default", "bash(ls)")
>>> asyncio.run(broker.decide(req)).message
'not on Fridays'
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .._threads import call_in_thread
from ..models.base import AgentInfo

__all__ = ["ApprovalBroker", "ApprovalRequest", "Approver", "Decision"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A call waiting for a person: who asks (the agent and its chain of parents, root first), what, and why."""

    id: str
    agent: AgentInfo
    chain: tuple[AgentInfo, ...]
    tool: str
    arguments: dict[str, Any]
    reason: str
    mode: str
    always_rule: str
    created_at: float = field(default_factory=time.time)

    def describe(self) -> str:
        """One line naming the agent, its parents and the call."""
        who = " > ".join(a.nickname for a in (*self.chain, self.agent))
        return f"{who} [{self.agent.agent_type}] wants to run {self.tool}({_args(self.arguments)})"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "agent_id": self.agent.id, "nickname": self.agent.nickname,
                "agent_type": self.agent.agent_type, "depth": self.agent.depth,
                "chain": [a.nickname for a in self.chain], "tool": self.tool, "arguments": self.arguments,
                "reason": self.reason, "mode": self.mode, "always_rule": self.always_rule}


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's (or a hook's) answer: ``Decision.allow()``, ``Decision.allow_always()``, ``Decision.deny(msg)``.

    ``allow_always(rule)`` adds ``rule`` (default: the request's ``always_rule``) as an allow rule for
    the rest of the run tree; a deny ``message`` goes back to the model with the refusal.
    """

    behavior: Literal["allow", "deny"]
    always: bool = False
    rule: str | None = None
    message: str | None = None
    decided_by: str = "approver"

    @classmethod
    def allow(cls) -> Decision:
        return cls("allow")

    @classmethod
    def allow_always(cls, rule: str | None = None) -> Decision:
        return cls("allow", always=True, rule=rule)

    @classmethod
    def deny(cls, message: str | None = None) -> Decision:
        return cls("deny", message=message)

    @property
    def allowed(self) -> bool:
        return self.behavior == "allow"

    def label(self) -> str:
        if self.behavior == "deny":
            return "denied"
        return "allowed always" if self.always else "allowed once"


Approver = Callable[[ApprovalRequest], "Awaitable[Decision] | Decision"]


class ApprovalBroker:
    """Serialises requests to one approver; applies the timeout; turns failures into denials."""

    __slots__ = ("_lock", "approver", "timeout_s")

    def __init__(self, approver: Approver | None, *, timeout_s: float | None = None) -> None:
        self.approver = approver
        self.timeout_s = timeout_s
        self._lock: asyncio.Lock | None = None

    async def decide(self, req: ApprovalRequest, recheck: Callable[[], bool] | None = None) -> Decision:
        """The decision for ``req``; ``recheck()`` is asked once it is ``req``'s turn (True: allowed by now)."""
        approver = self.approver
        if approver is None:
            return Decision("deny", decided_by="no approver")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if recheck is not None and recheck():
                return Decision("allow", decided_by="rule")
            if self.timeout_s is not None and self.timeout_s <= 0:
                return Decision("deny", decided_by="timeout")
            task = asyncio.current_task()
            cancels = task.cancelling() if task is not None else 0
            deadline = asyncio.timeout(self.timeout_s)
            try:
                async with deadline:
                    # a sync approver runs in a daemon thread, so one that hangs cannot stop the loop
                    # (and with it the timeout and every other agent)
                    out = approver(req) if _is_async(approver) else await call_in_thread(approver, req)
                    decision: object = await out if inspect.isawaitable(out) else out
            except TimeoutError:
                return Decision("deny", message=f"no decision within approval_timeout_s={self.timeout_s:g}",
                                decided_by="timeout")
            except (Exception, SystemExit) as e:  # the approver is user code: its failure is a denial, never a crash
                return Decision("deny", message=f"the approver failed ({type(e).__name__}: {e})",
                                decided_by="approver error")
            # an approver that swallowed the cancellation still answered too late: the timeout denies, and a
            # cancelled run stays cancelled (its call never runs)
            if task is not None and task.cancelling() > cancels:
                raise asyncio.CancelledError
            if deadline.expired():
                return Decision("deny", message=f"no decision within approval_timeout_s={self.timeout_s:g}",
                                decided_by="timeout")
        if not isinstance(decision, Decision) or decision.behavior not in ("allow", "deny"):
            return Decision("deny", message=f"the approver returned {decision!r}, not a Decision that allows or "
                            "denies", decided_by="approver error")
        return decision


def _is_async(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine (async functions, partials of them, async ``__call__``)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _args(arguments: dict[str, Any], limit: int = 120) -> str:
    if set(arguments) == {"command"}:
        text = json.dumps(arguments["command"], ensure_ascii=False)
    else:
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"
