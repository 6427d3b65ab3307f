"""The worker's half of an approval: a guard that returns the request instead of waiting for a person.

A worker has no person to ask.  When an agent's guard (``authority/guard.py``) reaches an ``ask``
verdict that no ``PermissionRequest`` hook decides, the approver built here raises
:class:`NeedsApproval` with the request: the ``call_tool`` activity ends at once and hands the
request to its workflow, which records it, waits (durably) for a decision delivered by the ``decide``
update, and runs the call again with that decision attached (:mod:`.approvals`).  On that second run the
same approver returns the decision, so the guard does what it does locally: runs the call or refuses it
with the local text, adds an "allow always" rule, and writes the ``approval`` audit row.

An allow holds for the call the person saw, not for whatever the guard asks about on the second run: the
``PreToolUse`` hooks run again there, and one whose rewrite is not deterministic (the time, a file, a counter)
may change the call.  The workflow attaches the request it asked about (``decision["approved"]``: tool,
arguments, "always" rule); a call that differs from it raises :class:`NeedsApproval` again (the workflow asks
about the call as it now is), unless the decision allowed it always and its rule covers the new call (as
locally, where the rule would allow it).  A denial refuses the call whatever it became.  A decision without
``approved`` (from a workflow of an earlier version) is applied as it is.  On that run a ``PermissionRequest``
hook's allow no longer decides (:class:`_AfterAPerson`): it did not decide the first time, so a person did, and
a hook that would allow by now (the time, a file) must not overturn their "no" (its block still refuses); nor
does an "allow always" rule the run got meanwhile (another call's answer): with a denial the run's rules are left
out.

Rules added by "allow always" live in the run (``Prepared.session_rules``), not in the worker: each call
gets a private copy of the worker's rules with them, so any worker applies them and none keeps them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

from ...authority.approvals import ApprovalBroker, ApprovalRequest, Approver, Decision
from ...authority.guard import Authority
from ...authority.hooks import HookInput, HookOutcome, Hooks
from ...authority.permissions import Permissions
from ...authority.rules import Rule, parse_rule
from ...models.base import AgentInfo
from .shapes import Prepared

__all__ = ["NeedsApproval", "added_rules", "decision_from", "request_from", "request_payload", "run_authority",
           "same_call"]


class NeedsApproval(BaseException):
    """Raised by the worker's approver to leave the guard with the request (a ``BaseException``: the broker
    turns an approver's ``Exception`` into a denial)."""

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(request.id)
        self.request = request


def decision_from(d: dict[str, Any]) -> Decision:
    """A :class:`Decision` from its fields (as the ``decide`` update carries them)."""
    return Decision(behavior="allow" if d.get("behavior") == "allow" else "deny", always=bool(d.get("always")),
                    rule=d.get("rule") or None, message=d.get("message") or None,
                    decided_by=str(d.get("decided_by") or "approver"))


def _approver(decision: dict[str, Any] | None, root: str) -> Approver:
    def approve(req: ApprovalRequest) -> Decision:
        if decision is None:
            raise NeedsApproval(req)
        d = decision_from(decision)
        approved = decision.get("approved")
        if not d.allowed or not isinstance(approved, dict) or same_call(approved, req.tool, req.arguments):
            return d
        rule = _covering_rule(d, approved, req, root)
        if rule is None:
            raise NeedsApproval(req)  # not the call the person allowed: they are asked about this one
        return Decision("allow", always=True, rule=rule.text, decided_by=d.decided_by)

    return approve


def same_call(approved: dict[str, Any], tool: str, arguments: Any) -> bool:
    """Whether ``tool(arguments)`` is the call of ``approved`` (a request as it travelled: JSON, so a tuple and a
    list of the same items are the same arguments)."""
    return approved.get("tool") == tool and _canonical(approved.get("arguments")) == _canonical(arguments)


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError):  # keys of mixed types, a cycle: compared as Python sees them
        return repr(value)


def _covering_rule(d: Decision, approved: dict[str, Any], req: ApprovalRequest, root: str) -> Rule | None:
    """The "allow always" rule the person gave, when it covers ``req`` (never for a call a hook asked about: its
    "ask" outranks every rule)."""
    if not d.always or req.hook_asked:
        return None
    try:
        rule = parse_rule(d.rule or str(approved.get("always_rule") or ""), "approval")
    except ValueError:
        return None
    return rule if rule.matches(req.tool, req.arguments, allow=True, root=root) else None


class _AfterAPerson(Hooks):
    """The worker's hooks on the run that carries a person's decision: a ``PermissionRequest`` allow is dropped."""

    __slots__ = ()

    async def run(self, event: str, inp: HookInput, *, match: str | None = None) -> HookOutcome:
        out = await super().run(event, inp, match=match)
        if event == "PermissionRequest" and out.decision == "allow":
            return dataclasses.replace(out, decision=None, reason="")
        return out


def _after_a_person(hooks: Hooks | None) -> Hooks | None:
    if hooks is None or not hooks.has("PermissionRequest"):
        return hooks
    return _AfterAPerson(hooks.specs, cwd=hooks.cwd, launcher=hooks.launcher, env=hooks.env)


def run_authority(base: Authority, p: Prepared, decision: dict[str, Any] | None,
                  chain: Callable[[], tuple[AgentInfo, ...]]) -> Authority:
    """The authority for one tool call of run ``p``: the worker's rules and hooks, the run's "allow always"
    rules, and an approver that answers with ``decision`` (``None``: it raises :class:`NeedsApproval`)."""
    perms = base.permissions
    # a person's "no" stands: an "allow always" rule the run got meanwhile (another call's answer) must not run it
    session = [] if decision is not None and decision.get("behavior") != "allow" else p.session_rules
    if session or decision is not None:  # a private copy: an "allow always" answer lands in it
        perms = Permissions(allow=perms.allow, ask=perms.ask, deny=perms.deny, shell_confined=perms.shell_confined)
        for text in session:
            try:
                perms.add_session_rule(p.root_id, parse_rule(text, "approval"))
            except ValueError:  # the guard parsed it before it was recorded: never malformed in practice
                continue
    timeout = base.broker.timeout_s  # the worker's approval_timeout_s: <= 0 denies at once, as locally
    broker = ApprovalBroker(_approver(decision, base.root),
                            timeout_s=timeout if timeout is not None and timeout <= 0 else None)
    hooks = base.hooks if decision is None else _after_a_person(base.hooks)
    return Authority(perms, broker, root=base.root, hooks=hooks, emit=base.emit, audit=base.audit,
                     chain=lambda agent_id: chain())


def added_rules(auth: Authority, p: Prepared) -> list[str]:
    """The "allow always" rules this call added (beyond those the run had)."""
    rules = [r.text for r in auth.permissions.session_rules(p.root_id)]
    return [r for r in rules if r not in p.session_rules]


def request_payload(req: ApprovalRequest, p: Prepared, call_id: str, *, root: str,
                    timeout_s: float | None) -> dict[str, Any]:
    """The request as it travels to the workflow and the clients: ``ApprovalRequest.to_dict()`` (the
    ``approval_requested`` event's data) with the call id as its id, and what a client needs to show it."""
    return {**req.to_dict(), "id": call_id, "run_id": p.run_id, "root_id": p.root_id, "parent_id": p.parent_id,
            "chain_agents": [{"id": a.id, "nickname": a.nickname, "agent_type": a.agent_type, "depth": a.depth,
                              "parent_id": a.parent_id} for a in req.chain],
            "root": root, "timeout_s": timeout_s, "created_at": time.time()}


def request_from(d: dict[str, Any]) -> ApprovalRequest:
    """The :class:`ApprovalRequest` a client's approver sees, from :func:`request_payload`'s dict."""
    agent = AgentInfo(str(d.get("agent_id") or d.get("run_id")), str(d.get("nickname", "")),
                      str(d.get("agent_type", "")), int(d.get("depth", 0)), d.get("parent_id"))
    chain = tuple(AgentInfo(str(a.get("id", "")), str(a.get("nickname", "")), str(a.get("agent_type", "")),
                            int(a.get("depth", 0)), a.get("parent_id")) for a in d.get("chain_agents") or ())
    return ApprovalRequest(str(d["id"]), agent, chain, str(d.get("tool", "")), dict(d.get("arguments") or {}),
                           str(d.get("reason", "")), str(d.get("mode", "")), str(d.get("always_rule", "")),
                           float(d.get("created_at") or time.time()), hook_asked=bool(d.get("hook_asked")))
