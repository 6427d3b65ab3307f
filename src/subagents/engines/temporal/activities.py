"""The activities of the Temporal engine: every step of an agent that touches the world.

An :class:`AgentActivities` lives in a worker and holds that worker's runtime (a
:class:`~subagents.runtime.runtime.Runtime` that is never entered: no recovery, no sweeper — the
workflows own the runs).  Its activities reuse the runtime's pieces, so a run on a worker is
configured exactly as a local one:

- ``prepare`` / ``plan_spawn``: the spawn pipeline (validate, resolve the definition, the tool fence
  and mode from ``runtime/factory.py``, the layered system prompt, the limits) and the run record;
- ``call_model``: records the messages the workflow appended, calls the model, records its reply;
- ``call_tool``: one tool call through the agent's guard (rules, mode, hooks) and fenced registry;
  a failure is a tool error for the model, never an activity failure;
- ``finish``: the final status, stats and (atomically) the announcement for a background child's parent.

The runs are recorded with the owner ``temporal:<task queue>``: no process holds them (a worker may
die, the workflow goes on elsewhere), so the local recovery must never adopt them.

Every store write is idempotent (records and transcript entries are keyed; announcements by their
key), so an activity that Temporal retries after a worker died writes the same rows again.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from temporalio import activity

from ...definitions.model import AgentDefinition
from ...exceptions import ConfigError, DefinitionError, ModelError, SpawnError
from ...messages import Message, ToolUseBlock, Usage, message_from_dict, message_to_dict
from ...models.base import AgentInfo, Model, ModelRequest
from ...runtime.factory import Grant, check_priced
from ...runtime.limits import Limits
from ...runtime.prompts import announcement_text, compressed_result
from ...runtime.recorder import final_fields, limits_dict
from ...runtime.result import RunResult
from ...runtime.runtime import Runtime
from ...store.base import AnnouncementRecord, RunRecord
from ...tools.base import ToolContext, ToolRegistry
from .asking import NeedsApproval, added_rules, request_payload, run_authority
from .shapes import (
    ActivityOptions,
    AgentOutcome,
    AgentStart,
    Announcement,
    ApprovalNote,
    Fence,
    ModelCall,
    ModelReply,
    Prepared,
    Resumed,
    ResumeStart,
    SpawnPlan,
    SpawnReply,
    ToolRun,
    ToolRunReply,
    WorkflowFinish,
)

__all__ = ["AgentActivities", "limits_from"]

_CACHE = 256


def limits_from(d: dict[str, Any]) -> Limits:
    """A :class:`Limits` from its stored dict (``None`` fields are unlimited)."""
    return Limits(**{k: d.get(k) for k in ("max_turns", "max_tokens", "timeout_s", "max_cost_usd")})


class AgentActivities:
    """The activities of one worker, bound to its runtime (see the module docstring)."""

    def __init__(self, rt: Runtime, owner: str = "temporal:subagents") -> None:
        self.rt = rt
        self.owner = owner  # the runs' owner in the store: the Temporal engine, not this process
        self.mgr = rt.manager
        self._grants: OrderedDict[tuple[object, ...], Grant] = OrderedDict()

    def activities(self) -> list[Any]:
        """The activity callables to register on a worker."""
        return [self.prepare, self.plan_spawn, self.prepare_resume, self.call_model, self.call_tool, self.finish,
                self.request_approval, self.started]

    # -- fences -------------------------------------------------------------------------------------
    def _definition(self, agent_type: str) -> AgentDefinition:
        try:
            return self.rt.definitions.get(agent_type)
        except DefinitionError as e:
            raise SpawnError(str(e)) from None

    def grant(self, fence: Fence) -> Grant:
        """The mode and fenced registry of an agent (computed by the runtime's factory, cached by fence)."""
        key = (fence.agent_type, fence.depth, fence.parent_mode,
               None if fence.parent_grantable is None else tuple(fence.parent_grantable))
        hit = self._grants.get(key)
        if hit is not None:
            return hit
        parent = (None if fence.parent_grantable is None
                  else ToolRegistry(self.mgr.tools, allow=fence.parent_grantable, agent_type="parent"))
        g = self.mgr.factory.authority(self._definition(fence.agent_type), fence.parent_mode, parent, fence.depth)
        self._grants[key] = g
        if len(self._grants) > _CACHE:
            self._grants.popitem(last=False)
        return g

    def _prepared(self, *, run_id: str, prompt: str, d: AgentDefinition, fence: Fence, parent: Prepared | None,
                  model: str | None, limits: Limits, label: str, background: bool, start: AgentStart | None,
                  nickname: str | None = None, root_id: str | None = None, runs: int = 1) -> Prepared:
        grant = self.grant(fence)
        mdl = self.mgr.factory.model_for(d, None, model)
        check_priced(mdl, limits, self.mgr.cfg.prices)
        cfg = self.mgr.cfg
        if nickname is None and parent is None:
            nickname = self.mgr.nicknames.take_root(d.name, d.nickname_candidates, self.rt.store)
        elif nickname is None:
            nickname = self.mgr.nicknames.take(d.name, d.nickname_candidates)
        system = self.mgr.factory.system_prompt(cfg.base_prompt, d, is_child=parent is not None, mode=grant.mode,
                                                briefing=cfg.briefing, notes=tuple(grant.notes))
        base = cfg.base_prompt
        reg = grant.registry
        options = parent.options if parent is not None else start.options if start is not None else None
        return Prepared(
            run_id=run_id, nickname=nickname, agent_type=d.name, prompt=prompt, system=system,
            system_prefix=len(base) if base and system.startswith(base) else 0, mode=grant.mode, fence=fence,
            tools=list(reg.allowed), grantable=list(reg.grantable),
            parallel_safe=[n for n, t in reg.allowed.items() if t.parallel_safe], limits=limits_dict(limits),
            model=model, result_max_chars=cfg.result_max_chars,
            root_id=root_id or (parent.root_id if parent is not None else run_id), depth=fence.depth,
            parent_id=parent.run_id if parent is not None else None, background=background, label=label,
            notes=list(grant.notes), runs=runs, session_rules=list(parent.session_rules) if parent is not None else [],
            max_threads=cfg.max_threads, when_full=cfg.when_full,
            options=options if options is not None else ActivityOptions())

    def _system(self, p: Prepared) -> str:
        """The run's system prompt, recomputed from its fence (runs travel without it: a fan-out's
        workflow task would otherwise carry it once per child)."""
        grant = self.grant(p.fence)
        cfg = self.mgr.cfg
        return self.mgr.factory.system_prompt(cfg.base_prompt, self._definition(p.agent_type),
                                              is_child=p.parent_id is not None, mode=grant.mode,
                                              briefing=cfg.briefing, notes=tuple(grant.notes))

    def _record(self, p: Prepared, model_name: str) -> None:
        self.rt.store.create_run(RunRecord(
            run_id=p.run_id, agent_id=p.run_id, nickname=p.nickname, agent_type=p.agent_type, task=p.prompt,
            child_session_key=f"agent:{p.agent_type}:subagent:{p.run_id}",
            parent_id=p.parent_id, root_id=p.root_id, depth=p.depth, label=p.label, model=model_name,
            background=p.background, created_at=time.time(), system_prompt=p.system, limits=p.limits,
            permission_mode=p.mode, runs=1, owner=self.owner))

    # -- activities ---------------------------------------------------------------------------------
    @activity.defn(name="subagents.prepare")
    async def prepare(self, start: AgentStart) -> Prepared:
        """A root run: resolve and record it (``running``).  A bad request fails the workflow, not retried."""
        try:
            if not start.prompt.strip():
                raise SpawnError("the prompt is empty; give the agent a task to do")
            d = self._definition(start.agent_type)
            wanted = self.mgr.factory.limits(self.mgr.cfg.default_limits, d).merged(limits_from(start.limits))
            p = self._prepared(run_id=start.run_id, prompt=start.prompt, d=d, fence=Fence(d.name, 0),
                               parent=None, model=start.model, limits=wanted, label=start.label or start.prompt[:60],
                               background=start.background, start=start)
        except (SpawnError, ConfigError) as e:
            from temporalio.exceptions import ApplicationError

            raise ApplicationError(str(e), type="SpawnError", non_retryable=True) from None
        existing = self.rt.store.get_run(p.run_id)
        if existing is None:
            self._record(p, self._model_name(p))
        self.rt.store.update_run(p.run_id, {"status": "running", "started_at": time.time()})
        self.rt.store.flush()
        return replace(p, system="")

    @activity.defn(name="subagents.plan_spawn")
    async def plan_spawn(self, plan: SpawnPlan) -> SpawnReply:
        """Check a ``spawn_agent`` call, then record the child (``running``: its workflow starts next)."""
        parent, a = plan.parent, plan.arguments
        try:
            agent_type, prompt = a.get("agent_type"), a.get("prompt")
            if not isinstance(agent_type, str) or not isinstance(prompt, str) or not prompt.strip():
                raise SpawnError("spawn_agent needs agent_type (a string) and prompt (the whole task, not empty)")
            model = a.get("model")
            if model is not None and (not isinstance(model, str) or "@" in model):
                raise SpawnError(f"model {model!r} must be a model name such as 'anthropic:claude-haiku-4-5' "
                                 "(an agent may choose a model, not a server)")
            if a.get("team") is not None or a.get("isolation") is not None:
                raise SpawnError("team and isolation are not supported on the Temporal engine yet; spawn a plain "
                                 "sub-agent (omit team, name and isolation)")
            d = self._definition(agent_type)
            wanted = self.mgr.factory.limits(self.mgr.cfg.child_limits, d)
            child = self._prepared(
                run_id=_new_id(parent.run_id, activity.info()),
                prompt=prompt, d=d, fence=Fence(d.name, parent.depth + 1, parent.mode, parent.grantable),
                parent=parent, model=model, limits=_capped(wanted, limits_from(parent.limits)),
                label=str(a.get("description") or prompt[:60]), background=bool(a.get("background", False)),
                start=None)
        except (SpawnError, ConfigError) as e:
            return SpawnReply(error=str(e))
        self._record(child, self._model_name(child))
        if not plan.queued:  # a queued child stays pending_init until the root grants it a slot (``started``)
            self.rt.store.update_run(child.run_id, {"status": "running", "started_at": time.time()})
        self.rt.store.flush()  # durable before Temporal records the activity as done
        return SpawnReply(child=replace(child, system=""))

    @activity.defn(name="subagents.started")
    async def started(self, run_id: str) -> None:
        """A queued child got its slot: recorded ``running`` from now."""
        self.rt.store.update_run(run_id, {"status": "running", "started_at": time.time()})
        self.rt.store.flush()

    def _fence_of(self, rec: RunRecord) -> Fence:
        """The fence a recorded run had: a child's is its parent's mode and grantable tools (recomputed)."""
        if rec.parent_id is None:
            return Fence(rec.agent_type, rec.depth)
        parent = self.rt.store.get_run(rec.parent_id)
        if parent is None:
            raise SpawnError(f"the parent {rec.parent_id} of agent {rec.nickname} ({rec.run_id}) is not in the store")
        g = self.grant(self._fence_of(parent))
        return Fence(rec.agent_type, rec.depth, g.mode, list(g.registry.grantable))

    @activity.defn(name="subagents.prepare_resume")
    async def prepare_resume(self, r: ResumeStart) -> Resumed:
        """Reopen a finished run: its transcript, the announcements that waited for it and the new message;
        recorded ``running`` again (``runs`` + 1).  A run unknown or still running fails the workflow."""
        store = self.rt.store
        try:
            rec = store.get_run(r.run_id)
            if rec is None:
                raise SpawnError(f"no agent run has the id {r.run_id!r}; see `subagents runs list`")
            if not rec.is_final:
                raise SpawnError(f"agent {rec.nickname} ({rec.run_id}) is still {rec.status}; "
                                 "use send_input to give it more instructions, or wait for it")
            waiting = store.pending_announcements(parent_id=rec.run_id)
            if not r.message.strip() and not waiting:
                raise SpawnError("the message is empty; say what the resumed agent should do")
            d = self._definition(rec.agent_type)
            limits = limits_from(rec.limits).merged(limits_from(r.limits))
            p = self._prepared(run_id=rec.run_id, prompt=rec.task, d=d, fence=self._fence_of(rec), parent=None,
                               model=None, limits=limits, label=rec.label, background=rec.background, start=None,
                               nickname=rec.nickname, root_id=rec.root_id, runs=rec.runs + 1)
        except (SpawnError, ConfigError) as e:
            from temporalio.exceptions import ApplicationError

            raise ApplicationError(str(e), type="SpawnError", non_retryable=True) from None
        p.parent_id, p.options = rec.parent_id, r.options
        texts = [a.text for a in waiting]
        prompt = "\n\n".join([*texts, r.message] if r.message.strip() else texts)
        store.update_run(rec.run_id, {"status": "running", "started_at": time.time(), "runs": p.runs})
        store.flush()
        messages = [message_to_dict(m) for m in store.transcript(rec.run_id)]
        return Resumed(replace(p, system=""), messages, prompt, [a.id for a in waiting])

    def _model(self, p: Prepared) -> Model:
        return self.mgr.factory.model_for(self._definition(p.agent_type), None, p.model)

    def _model_name(self, p: Prepared) -> str:
        return str(getattr(self._model(p), "name", ""))

    @activity.defn(name="subagents.call_model")
    async def call_model(self, call: ModelCall) -> ModelReply:
        """Record the new messages, call the model, record and return its reply."""
        p = call.run
        msgs = [message_from_dict(m) for m in call.messages]
        store = self.rt.store
        if call.record_from < len(msgs):
            store.append_messages(p.run_id, call.record_from, msgs[call.record_from:], call.delivered, time.time())
        model = self._model(p)
        info = AgentInfo(p.run_id, p.nickname, p.agent_type, p.depth, p.parent_id)
        specs = self.grant(p.fence).registry.specs()
        req = ModelRequest(info, p.system or self._system(p), msgs, specs, None, p.system_prefix)
        try:
            r = await model.request(req)
        except ModelError as e:
            store.add_audit(p.run_id, "model_end", {"model": model.name, "error": str(e)}, time.time())
            return ModelReply(error=str(e))
        except (TypeError, ValueError, KeyError, AttributeError, RuntimeError) as e:
            store.add_audit(p.run_id, "model_end", {"model": model.name, "error": f"{type(e).__name__}: {e}"},
                            time.time())
            return ModelReply(error=f"model {model.name!r} failed: {type(e).__name__}: {e}")
        content: list[Any] = []
        if r.text:
            from ...messages import TextBlock

            content.append(TextBlock(r.text))
        content.extend(ToolUseBlock(c.id, c.name, c.arguments) for c in r.tool_calls)
        m = Message("assistant", content)
        cost = self.mgr.cfg.prices.cost_of(model, r.usage) if r.usage is not None else None
        # the local engine's model_end event, as an audit row the client's event poll publishes (remote_events.py)
        store.add_audit(p.run_id, "model_end", {
            "model": model.name, "response_model": r.model, "stop_reason": r.stop_reason,
            "usage": r.usage.to_dict() if r.usage is not None else None, "cost_usd": cost,
            "tool_calls": len(r.tool_calls)}, time.time())
        store.append_messages(p.run_id, len(msgs), (m,))
        store.flush()
        return ModelReply(message=message_to_dict(m), text=r.text, usage=(r.usage or Usage()).to_dict(),
                          cost_usd=cost, cost_known=r.usage is None or cost is not None)

    @activity.defn(name="subagents.call_tool")
    async def call_tool(self, run: ToolRun) -> ToolRunReply:
        """Run one tool call through the agent's guard and fence; every failure is a tool error."""
        p = run.run
        grant = self.grant(p.fence)
        info = AgentInfo(p.run_id, p.nickname, p.agent_type, p.depth, p.parent_id)
        ctx = ToolContext(agent=info, workspace=self.rt.workspace, todos=[], control=None,
                          bash_timeout_s=self.mgr.cfg.bash_timeout_s, sandbox=self.mgr.sandbox,
                          shell_writable=p.mode != "plan")
        block = ToolUseBlock(run.call_id, run.name, run.arguments)
        base = self.mgr.authority
        if base is None:
            res = await grant.registry.execute(block, ctx)
            return ToolRunReply(res.content, res.is_error)
        auth = run_authority(base, p, run.decision, lambda: self._chain(p))
        try:
            res = await auth.guard(info, p.mode, p.root_id).run_call(block, grant.registry, ctx)
        except NeedsApproval as e:  # nothing ran: the workflow asks a person, then calls again with the answer
            return ToolRunReply("", approval=request_payload(e.request, p, run.call_id, root=base.root,
                                                             timeout_s=base.broker.timeout_s))
        return ToolRunReply(res.content, res.is_error, rules=added_rules(auth, p))

    def _chain(self, p: Prepared) -> tuple[AgentInfo, ...]:
        """The agents above ``p``, root first (from the store: only asked for when a call needs a person)."""
        out: list[AgentInfo] = []
        parent = p.parent_id
        while parent is not None and len(out) < 64:
            rec = self.rt.store.get_run(parent)
            if rec is None:
                break
            out.append(AgentInfo(rec.run_id, rec.nickname, rec.agent_type, rec.depth, rec.parent_id))
            parent = rec.parent_id
        return tuple(reversed(out))

    @activity.defn(name="subagents.request_approval")
    async def request_approval(self, note: ApprovalNote) -> None:
        """Record an approval request where clients look for it: an audit row on the tree's root run."""
        self.rt.store.add_audit(note.run.root_id, "approval_requested", note.request, time.time())
        self.rt.store.flush()

    @activity.defn(name="subagents.finish")
    async def finish(self, fin: WorkflowFinish) -> AgentOutcome:
        """Record the end of a run and build what its parent receives (result text, announcement)."""
        p = fin.run
        r = RunResult.from_dict(fin.result)
        cap = p.result_max_chars
        text = compressed_result(r, cap)
        if p.notes:
            text = f"[narrowed: {'; '.join(p.notes)}]\n{text}"
        ann = None
        if p.background and p.parent_id is not None:
            ann = Announcement(f"{p.run_id}:{p.runs}", p.run_id, announcement_text(r, p.label, cap), text, r.status)
        store = self.rt.store
        if fin.pending or fin.delivered:
            msgs = [message_from_dict(m) for m in fin.pending]
            if msgs:
                store.append_messages(p.run_id, fin.record_from, msgs, fin.delivered, time.time())
            else:
                for key in fin.delivered:
                    store.mark_delivered(key, time.time())
        record = None if ann is None else AnnouncementRecord(ann.key, p.parent_id or "", p.run_id, ann.text,
                                                             time.time())
        store.finish_run(p.run_id, final_fields(r), record)
        store.flush()
        return AgentOutcome(result=fin.result, compressed=text, announcement=ann)


def _new_id(parent_id: str, info: activity.Info) -> str:
    """The child's run id: a UUID derived from the parent's run and this activity (a retry gets the same)."""
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"subagents:{parent_id}:{info.workflow_run_id}:{info.activity_id}"))


def _capped(wanted: Limits, left: Limits) -> Limits:
    """``wanted``, never above what the parent has (field by field; ``None`` is unlimited)."""
    out: dict[str, Any] = {}
    for k in ("max_turns", "max_tokens", "timeout_s", "max_cost_usd"):
        w, lft = getattr(wanted, k), getattr(left, k)
        out[k] = w if lft is None or k == "max_turns" else lft if w is None else min(w, lft)
    return Limits(**out)
