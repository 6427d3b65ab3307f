"""The worker's half of an approval: a guard that returns the request instead of waiting for a person.

A worker has no person to ask.  When an agent's guard (``authority/guard.py``) reaches an ``ask``
verdict that no ``PermissionRequest`` hook decides, the approver built here raises
:class:`NeedsApproval` with the request: the ``call_tool`` activity ends at once and hands the
request to its workflow, which records it, waits (durably) for a decision delivered by the ``decide``
update, and runs the call again with that decision attached (:mod:`.approvals`).  On that second run the
same approver returns the decision, so the guard does what it does locally: runs the call or refuses it
with the local text, adds an "allow always" rule, and writes the ``approval`` audit row.

Rules added by "allow always" live in the run (``Prepared.session_rules``), not in the worker: each call
gets a private copy of the worker's rules with them, so any worker applies them and none keeps them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...authority.approvals import ApprovalBroker, ApprovalRequest, Approver, Decision
from ...authority.guard import Authority
from ...authority.permissions import Permissions
from ...authority.rules import parse_rule
from ...models.base import AgentInfo
from .shapes import Prepared

__all__ = ["NeedsApproval", "added_rules", "decision_from", "request_from", "request_payload", "run_authority"]


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


def _approver(decision: dict[str, Any] | None) -> Approver:
    def approve(req: ApprovalRequest) -> Decision:
        if decision is None:
            raise NeedsApproval(req)
        return decision_from(decision)

    return approve


def run_authority(base: Authority, p: Prepared, decision: dict[str, Any] | None,
                  chain: Callable[[], tuple[AgentInfo, ...]]) -> Authority:
    """The authority for one tool call of run ``p``: the worker's rules and hooks, the run's "allow always"
    rules, and an approver that answers with ``decision`` (``None``: it raises :class:`NeedsApproval`)."""
    perms = base.permissions
    if p.session_rules or decision is not None:  # a private copy: an "allow always" answer lands in it
        perms = Permissions(allow=perms.allow, ask=perms.ask, deny=perms.deny, shell_confined=perms.shell_confined)
        for text in p.session_rules:
            try:
                perms.add_session_rule(p.root_id, parse_rule(text, "approval"))
            except ValueError:  # the guard parsed it before it was recorded: never malformed in practice
                continue
    timeout = base.broker.timeout_s  # the worker's approval_timeout_s: <= 0 denies at once, as locally
    broker = ApprovalBroker(_approver(decision), timeout_s=timeout if timeout is not None and timeout <= 0 else None)
    return Authority(perms, broker, root=base.root, hooks=base.hooks, emit=base.emit, audit=base.audit,
                     chain=lambda agent_id: chain())


def added_rules(auth: Authority, p: Prepared) -> list[str]:
    """The "allow always" rules this call added (beyond those the run had)."""
    rules = [r.text for r in auth.permissions.session_rules(p.root_id)]
    return rules[len(p.session_rules):]


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
