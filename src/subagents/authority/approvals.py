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
import copy
import inspect
import json
import re
import time
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .._threads import call_in_thread
from ..models.base import AgentInfo

__all__ = ["ApprovalBroker", "ApprovalRequest", "Approver", "Decision", "visible"]

_RUN = re.compile(r"(.{1,2}?)\1{10,}", re.S)  # one or two characters repeated: padding that pushes text away
_RUN_SHOWN = 20  # a longer run is told by its length
_UNUSUAL = re.compile("[^ -~]")  # anything but printable ASCII: looked at one by one
_WORD = re.compile(r"\w+")
_LOOKALIKES = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC")  # scripts with letters drawn as Latin ones
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")  # Hangul fillers: letters that show as nothing


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
    hook_asked: bool = False
    """A ``PreToolUse`` hook asked for a person (Claude Code's ``"ask"``): no "allow always" rule answers it."""

    def __post_init__(self) -> None:
        # what the approver and the ``approval_requested`` listeners read is a copy: editing it (an approver that
        # redacts what it logs, a listener that trims event data) never changes the call that runs
        object.__setattr__(self, "arguments", _snapshot(self.arguments))

    def describe(self, limit: int = 120) -> str:
        """One line naming the agent, its parents and the call (its arguments cut after ``limit`` characters, the
        cut saying how many are not shown), as :func:`visible` shows text: what a person reads is what runs."""
        who = visible(" > ".join(a.nickname for a in (*self.chain, self.agent)) + f" [{self.agent.agent_type}]")
        return f"{who} wants to run {visible(self.tool)}({_args(self.arguments, limit)})"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "agent_id": self.agent.id, "nickname": self.agent.nickname,
                "agent_type": self.agent.agent_type, "depth": self.agent.depth,
                "chain": [a.nickname for a in self.chain], "tool": self.tool, "arguments": _snapshot(self.arguments),
                "reason": self.reason, "mode": self.mode, "always_rule": self.always_rule,
                "hook_asked": self.hook_asked}


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

_FAILURES = (Exception, SystemExit, KeyboardInterrupt, asyncio.CancelledError)
"""What an approver may raise and only deny its call with; another ``BaseException`` passes through (the Temporal
worker's approver leaves the guard with its request that way)."""


class ApprovalBroker:
    """Serialises requests to one approver; applies the timeout; turns failures into denials."""

    __slots__ = ("_lock", "approver", "timeout_s")

    def __init__(self, approver: Approver | None, *, timeout_s: float | None = None) -> None:
        self.approver = approver
        self.timeout_s = timeout_s
        self._lock: asyncio.Lock | None = None

    async def decide(self, req: ApprovalRequest, recheck: Callable[[], bool] | None = None) -> Decision:
        """The decision for ``req``; ``recheck()`` is asked once it is ``req``'s turn (True: allowed by now), unless
        a hook asked for a person (``req.hook_asked``: a rule allowing the call is what that "ask" outranks)."""
        approver = self.approver
        if approver is None:
            return Decision("deny", decided_by="no approver")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if recheck is not None and not req.hook_asked and recheck():
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
            except _FAILURES as e:  # the approver is user code: its failure is a denial, never a crash
                if isinstance(e, asyncio.CancelledError) and task is not None and task.cancelling() > cancels:
                    raise  # the asking call was cancelled (its run closed): that stays a cancellation
                # an approver raising CancelledError or KeyboardInterrupt of its own (as with hooks) ends no run
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


def _snapshot(arguments: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``arguments`` (a shallow one when some value cannot be copied)."""
    try:
        return copy.deepcopy(arguments)
    except Exception:  # an argument object that refuses copying: its top level at least is the request's own
        return dict(arguments)


def _is_async(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine (async functions, partials of them, async ``__call__``)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def visible(text: str, limit: int | None = None) -> str:
    """``text`` on one line, as a person deciding on it must see it: control characters (ESC, BEL, the C1 codes,
    newline, tab), invisible ones (zero-width, bidi overrides and isolates, variation selectors, Hangul fillers) and
    spaces other than U+0020 are written out (``\\x1b``, ``\\u202e``), a long run of the same one or two
    characters is told by its length (``«300 spaces»``, ``«5000 × \\n»``), and with ``limit`` the rest is cut,
    the cut saying how much is not shown.  Letters of any script are kept as they are, but for look-alikes hiding
    in a Latin word (:func:`_mixed`)."""
    text = _RUN.sub(_run, text)
    cut = f"… [{len(text) - limit} more characters not shown]" if limit is not None and len(text) > limit else ""
    if cut:
        text = text[:limit]
    return ("".join(map(_char, _WORD.sub(_mixed, text))) if _UNUSUAL.search(text) else text) + cut


def _mixed(m: re.Match[str]) -> str:
    """A word mixing Latin letters with letters of a script drawn alike (``gіthub``, a Cyrillic ``і``): those
    written out (``g\\u0456thub``); mathematical letters (``𝚛𝚖``) always.  A word of one script stays as it is."""
    word = m.group()
    if word.isascii():
        return word
    latin = any("a" <= c.lower() <= "z" for c in word)
    return "".join(_written_out(c) if not c.isascii() and _lookalike(c, latin) else c for c in word)


def _lookalike(c: str, latin: bool) -> bool:
    name = unicodedata.name(c, "")
    return name.startswith("MATHEMATICAL") or (latin and name.startswith(_LOOKALIKES))


def _run(m: re.Match[str]) -> str:
    run, unit = m.group(), m.group(1)
    if len(run) <= _RUN_SHOWN:
        return run
    n = len(run) // len(unit)
    return f"«{n} spaces»" if unit == " " else f"«{n} × {unit}»"


def _char(c: str) -> str:
    if " " <= c < "\x7f":
        return c
    if unicodedata.category(c)[0] in "CZ" or c in _INVISIBLE_LETTERS or "VARIATION SELECTOR" in unicodedata.name(c, ""):
        return _written_out(c)
    return c


def _written_out(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def _args(arguments: dict[str, Any], limit: int = 120) -> str:
    if set(arguments) == {"command"}:
        text = json.dumps(arguments["command"], ensure_ascii=False)
    else:
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items())
    return visible(text, limit)
