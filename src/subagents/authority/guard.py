"""``Authority`` (one per runtime) and ``AgentGuard`` (one per agent): the policy's narrow interface to the loop.

The loop hands every tool call to its agent's guard, which, in order:

1. checks the fence and the arguments (the registry);
2. runs the ``PreToolUse`` hooks (block, allow, or replace the arguments);
3. decides by rules and mode (:mod:`.permissions`): allow, deny, or ask;
4. for ``ask``: runs the ``PermissionRequest`` hooks, else asks the approver (:mod:`.approvals`),
   pausing the agent's clock (and its parents') while a person decides;
5. runs the tool; 6. runs the ``PostToolUse`` hooks (their reason or context is appended to the result).

Refusals are tool errors the model reads; nothing here raises into the loop.  The guard also runs
``UserPromptSubmit`` / ``SubagentStart`` when an agent starts and ``Stop`` / ``SubagentStop`` when it
gives its final answer.  With no rules and no hooks, a call costs one dict lookup more than before.
"""

from __future__ import annotations

import copy
import itertools
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..messages import ToolResultBlock, ToolUseBlock
from ..models.base import AgentInfo
from ..tools.base import ToolContext, ToolRegistry
from .approvals import ApprovalBroker, ApprovalRequest, Decision
from .permissions import Permissions, Verdict
from .rules import Rule, escape, parse_rule

if TYPE_CHECKING:
    from .hooks import HookOutcome, Hooks

__all__ = ["AgentGuard", "Authority"]

Emit = Callable[[AgentInfo, str, dict[str, Any]], None]
Audit = Callable[[str, str, dict[str, Any]], None]

_EDIT_TOOLS = frozenset({"write_file", "edit_file"})
_ids = itertools.count(1)


def _weakly(fn: Callable[..., Any], gone: Any) -> Callable[..., Any]:
    """``fn``, holding its object weakly when it is a bound method (``gone`` once the object is freed)."""
    if not hasattr(fn, "__self__") or not hasattr(fn, "__func__"):
        return fn
    ref = weakref.WeakMethod(fn)

    def call(*args: Any) -> Any:
        m = ref()
        return gone if m is None else m(*args)

    return call


class Authority:
    """What every guard of a runtime shares: rules, the approver, hooks, and the runtime's callbacks."""

    __slots__ = ("audit", "broker", "chain", "emit", "hold_clock", "hooks", "interactive", "permissions", "root")

    def __init__(self, permissions: Permissions, broker: ApprovalBroker, *, root: str, hooks: Hooks | None = None,
                 emit: Emit | None = None, audit: Audit | None = None,
                 chain: Callable[[str], tuple[AgentInfo, ...]] | None = None,
                 hold_clock: Callable[[str, bool], None] | None = None, interactive: bool = False) -> None:
        self.permissions = permissions
        self.broker = broker
        self.root = root
        self.hooks = hooks
        self.emit: Emit = emit or (lambda info, kind, data: None)
        self.audit: Audit = audit or (lambda run_id, kind, data: None)
        # the runtime passes methods of its agent tree, which holds the agents whose guards hold this
        # authority: held weakly, so a runtime is no reference cycle (tests/runtime/test_gc.py)
        self.chain: Callable[[str], tuple[AgentInfo, ...]] = _weakly(chain, ()) if chain else (lambda agent_id: ())
        self.hold_clock: Callable[[str, bool], None] = (_weakly(hold_clock, None) if hold_clock
                                                        else (lambda agent_id, hold: None))
        self.interactive = interactive

    def guard(self, info: AgentInfo, mode: str, root_id: str, context: ToolContext | None = None) -> AgentGuard:
        return AgentGuard(self, info, mode, root_id, context)

    def has_hooks(self, event: str) -> bool:
        return self.hooks is not None and self.hooks.has(event)


class AgentGuard:
    """The policy for one agent: its mode, its tree (for "allow always" rules) and the shared authority."""

    __slots__ = ("auth", "context", "info", "mode", "root_id")

    def __init__(self, auth: Authority, info: AgentInfo, mode: str, root_id: str,
                 context: ToolContext | None = None) -> None:
        self.auth = auth
        self.info = info
        self.mode = mode
        self.root_id = root_id
        self.context = context  # the agent's tool context: its seed-001 fields go into every hook's input

    # -- tool calls -------------------------------------------------------------------------------
    async def run_call(self, call: ToolUseBlock, registry: ToolRegistry, ctx: ToolContext) -> ToolResultBlock:
        """Steps 1-6 of the module docstring for one call; always returns a result block."""
        tool, err = registry.check(call)
        if tool is None:
            return ToolResultBlock(call.id, err or "", True)
        auth = self.auth
        args = call.arguments
        hook_allowed, hook_asked = False, ""  # hook_asked: the reason of a hook's "ask"
        if auth.hooks is not None and auth.hooks.has("PreToolUse"):
            out = await self._hooks("PreToolUse", match=call.name, tool=call.name, arguments=args)
            if out.decision == "block":
                self._audit("hook_blocked", call.name, args, reason=out.reason)
                return ToolResultBlock(call.id, f"{call.name} was not run: a PreToolUse hook blocked it: "
                                                f"{out.reason or 'no reason given'}", True)
            if out.arguments is not None and out.arguments != args:
                bad = registry.invalid_arguments(tool, out.arguments)
                if bad:
                    return ToolResultBlock(call.id, f"{call.name} was not run: a PreToolUse hook replaced its "
                                                    f"arguments with invalid ones ({bad})", True)
                args = out.arguments
            hook_allowed = out.decision == "allow"
            hook_asked = (out.reason or "no reason given") if out.ask else ""
        verdict = auth.permissions.decide(self.mode, call.name, tool.category.value, args, root_id=self.root_id,
                                          root=auth.root)
        if verdict.action == "deny":
            self._audit("denied", call.name, args, reason=verdict.reason, rule=verdict.rule and verdict.rule.text)
            return ToolResultBlock(call.id, f"{call.name} was not run: {verdict.reason}. Do not retry the same "
                                            "call; continue without it or explain what you need.", True)
        if hook_asked and verdict.action == "allow":  # Claude Code's "ask" outranks the rules' and mode's allow
            verdict = Verdict("ask", f"a PreToolUse hook asks for a person's decision: {hook_asked}")
        if verdict.action == "ask" and not hook_allowed:
            args = copy.deepcopy(args)  # the guard's own: what the person approves runs, whoever holds the call's
            refusal = await self._ask(call.name, args, verdict, hook_asked=bool(hook_asked))
            if refusal is not None:
                return ToolResultBlock(call.id, refusal, True)
        run = call if args is call.arguments else ToolUseBlock(call.id, call.name, args)
        res = await registry.run(tool, run, ctx)
        if auth.hooks is not None and auth.hooks.has("PostToolUse"):
            out = await self._hooks("PostToolUse", match=call.name, tool=call.name, arguments=args,
                                    result=res.content, is_error=res.is_error)
            notes = [n for n in (out.reason if out.decision == "block" else "", out.context) if n]
            if notes:
                res = ToolResultBlock(res.tool_use_id, res.content + "\n\n[hook feedback: " + " ".join(notes) + "]",
                                      res.is_error)
        return res

    async def _ask(self, tool: str, args: dict[str, Any], verdict: Verdict, *, hook_asked: bool = False) -> str | None:
        """Get a decision for an ``ask`` verdict; ``None`` when allowed, else the refusal for the model."""
        auth = self.auth
        req = ApprovalRequest(f"ap-{next(_ids)}", self.info, auth.chain(self.info.id), tool, args, verdict.reason,
                              self.mode, _always_rule(tool, args), hook_asked=hook_asked)
        auth.emit(self.info, "approval_requested", req.to_dict())
        t0 = time.monotonic()
        auth.hold_clock(self.info.id, True)
        try:
            decision = await self._decision(req, tool, args)
        finally:
            auth.hold_clock(self.info.id, False)
        waited = time.monotonic() - t0
        rule = _session_rule(decision.rule, req.always_rule) if decision.allowed and decision.always else None
        if rule is not None:
            auth.permissions.add_session_rule(self.root_id, rule)
        data = {"id": req.id, "tool": tool, "decision": decision.label(), "by": decision.decided_by,
                "message": decision.message, "waited_s": round(waited, 3), "reason": verdict.reason,
                "rule": rule.text if rule is not None else None, "arguments": args}
        auth.emit(self.info, "approval_decided", data)
        auth.audit(self.info.id, "approval", data)
        if decision.allowed:
            return None
        return self._refusal(tool, verdict, decision, req.always_rule)

    async def _decision(self, req: ApprovalRequest, tool: str, args: dict[str, Any]) -> Decision:
        """A PermissionRequest hook's decision if one decides, else the approver's."""
        auth = self.auth
        if auth.hooks is not None and auth.hooks.has("PermissionRequest"):
            out = await self._hooks("PermissionRequest", match=tool, tool=tool, arguments=args)
            if out.decision == "allow":
                return Decision("allow", decided_by="hook")
            if out.decision == "block":
                return Decision("deny", message=out.reason or None, decided_by="hook")

        def recheck() -> bool:
            v = auth.permissions.decide(self.mode, tool, "", args, root_id=self.root_id, root=auth.root)
            return v.action == "allow" and v.rule is not None and v.rule.source == "approval"

        return await auth.broker.decide(req, recheck)

    def _refusal(self, tool: str, verdict: Verdict, d: Decision, always_rule: str) -> str:
        if d.decided_by == "no approver":
            wider = "autoEdit" if tool in _EDIT_TOOLS else "yolo"
            return (f"{tool} was not run: {verdict.reason}, and no one can approve it here (no approver is "
                    f"configured and this is not an interactive terminal). The user can allow it with "
                    f"--permission-mode {wider} (Runtime(permission_mode={wider!r})), an allow rule such as "
                    f"{always_rule!r} in [permissions] allow of .subagents/config.toml (or --allow), or an "
                    "approver (Runtime(approver=...)). Do not retry this call; continue without it or say what "
                    "you need.")
        why = d.message or "no reason given"
        who = {"hook": "a PermissionRequest hook", "timeout": "the approval timed out:"}.get(d.decided_by, "the user")
        verb = "" if d.decided_by == "timeout" else " denied it:"
        return f"{tool} was not run: {who}{verb} {why}. Do not retry the same call; adjust your approach."

    # -- lifecycle hooks --------------------------------------------------------------------------
    async def on_start(self, prompt: str) -> tuple[str, str | None]:
        """``UserPromptSubmit`` (root) or ``SubagentStart`` (child): ``(prompt, None)`` or ``(prompt, reason)``."""
        event = "UserPromptSubmit" if self.info.depth == 0 else "SubagentStart"
        if not self.auth.has_hooks(event):
            return prompt, None
        out = await self._hooks(event, match=self.info.agent_type, prompt=prompt)
        if out.decision == "block":
            self._audit("hook_blocked", None, None, reason=out.reason, event=event)
            return prompt, f"blocked by a {event} hook: {out.reason or 'no reason given'}"
        return (prompt + "\n\n" + out.context if out.context else prompt), None

    async def on_final(self, text: str, again: bool) -> str | None:
        """``Stop`` (root) or ``SubagentStop`` (child): a reason to go on instead of ending, or ``None``."""
        event = "Stop" if self.info.depth == 0 else "SubagentStop"
        if not self.auth.has_hooks(event):
            return None
        out = await self._hooks(event, match=self.info.agent_type, result=text, extra={"stop_hook_active": again})
        return (out.reason or "a Stop hook asked you to continue") if out.decision == "block" else None

    async def _hooks(self, event: str, *, match: str | None, tool: str | None = None,
                     arguments: dict[str, Any] | None = None, result: str | None = None,
                     is_error: bool | None = None, prompt: str | None = None,
                     extra: dict[str, Any] | None = None) -> HookOutcome:
        from .hooks import HookInput

        hooks = self.auth.hooks
        assert hooks is not None
        i = self.info
        inp = HookInput(event=event, agent_id=i.id, nickname=i.nickname, agent_type=i.agent_type, depth=i.depth,
                        parent_id=i.parent_id, cwd=self.auth.root, tool=tool, arguments=arguments, result=result,
                        is_error=is_error, prompt=prompt, permission_mode=self.mode,
                        extra={"session_id": self.root_id,
                               **(self.context.shared_fields() if self.context is not None else {}), **(extra or {})})
        out = await hooks.run(event, inp, match=match)
        for e in out.errors:
            data = {"event": event, "tool": tool, "hook": e.spec.command or getattr(e.spec.callback, "__name__", "?"),
                    "source": e.spec.source, "message": e.message, "on_error": e.spec.on_error}
            self.auth.emit(i, "hook_error", data)
            self.auth.audit(i.id, "hook_error", data)
        return out

    def _audit(self, kind: str, tool: str | None, args: dict[str, Any] | None, **data: Any) -> None:
        payload = {"tool": tool, "arguments": args, **data}
        self.auth.emit(self.info, "tool_" + kind if not kind.startswith("hook") else kind, payload)
        self.auth.audit(self.info.id, kind, payload)


def _session_rule(chosen: str | None, always_rule: str) -> Rule | None:
    """The rule an "allow always" answer adds: the approver's, else the request's; ``None`` when neither parses
    (a blank command gives ``bash()``): the call is then allowed once, and nothing wider is remembered."""
    for text in (chosen, always_rule):
        if text:
            try:
                return parse_rule(text, "approval")  # a non-string from the approver is a ValueError too
            except ValueError:  # a malformed rule from the approver: remember the call itself instead
                continue
    return None


def _always_rule(tool: str, args: dict[str, Any]) -> str:
    """What "allow always" adds: the exact command for ``bash``, the whole tool otherwise."""
    if tool == "bash" and isinstance(args.get("command"), str):
        return f"bash({escape(args['command'])})"
    return tool
