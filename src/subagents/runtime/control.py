"""``ManagerControl``: the :class:`~subagents.tools.agents.AgentControl` the sub-agent tools call.

It turns tool calls into manager operations on behalf of the calling agent and renders what the
model sees: compressed results, wait summaries, the agent list.  Refusals become tool errors.
"""

from __future__ import annotations

import json
import math
import weakref
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

from ..exceptions import SpawnError, ToolError, UserError
from ..tools.control import TeamControl
from .limits import Limits
from .node import AgentNode
from .prompts import compressed_result
from .recovery import adopt_children
from .result import RunResult
from .structured import output_spec

if TYPE_CHECKING:
    from .manager import AgentManager

__all__ = ["WAIT_BUDGET", "ManagerControl"]

WAIT_BUDGET = 45_000
"""Characters of results one ``wait`` returns (the tool output cap is 50,000)."""

_js = encode_basestring_ascii  # a str as json.dumps writes it
_BACKGROUND_NOTE = _js("runs in the background; its result will be announced to you, or collect it with wait")


LABEL_MAX = 200
"""Characters of a ``spawn_agent`` label (it names the task in announcements and listings)."""


def _label(label: str | None) -> str | None:
    if label is None:
        return None
    if not isinstance(label, str):
        raise ToolError(f"label must be a short text, got {type(label).__name__}; e.g. label='scan the tests'")
    one_line = " ".join(label.split())
    if not one_line:
        return None
    if len(one_line) > LABEL_MAX:
        raise ToolError(f"label is {len(one_line)} characters; keep it under {LABEL_MAX} (a few words naming the "
                        "task; the task itself goes in prompt)")
    return one_line


def _cleanup(cleanup: str | None) -> str:
    if cleanup is None:
        return "keep"
    if cleanup not in ("keep", "delete"):
        raise ToolError(f"cleanup must be 'keep' (the run's record and transcript are archived later) or 'delete' "
                        f"(removed once its result was delivered), got {cleanup!r}")
    return cleanup


def _run_timeout(seconds: object) -> float:
    ok = isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds) and seconds > 0
    if not ok:
        raise ToolError(f"run_timeout_s must be a positive number of seconds, got {seconds!r}; "
                        "e.g. run_timeout_s=300 stops the sub-agent after five minutes with its partial work")
    return float(seconds)  # type: ignore[arg-type]


class ManagerControl:
    """The sub-agent tools' way into the manager (one per manager, held by every agent's tool context).

    It refers to its manager weakly: the manager holds it, and so does every agent the manager holds,
    so a strong reference would make each runtime one reference cycle, freed only by a full garbage
    collection (tests/runtime/test_gc.py).
    """

    __slots__ = ("mgr",)

    def __init__(self, mgr: AgentManager) -> None:
        self.mgr: AgentManager = weakref.proxy(mgr)

    @property
    def teams(self) -> TeamControl:
        """The model's team tools (the runtime's team service is made on first use)."""
        from .team_control import team_tools

        return team_tools(self.mgr)

    def _caller(self, caller_id: str) -> AgentNode:
        node = self.mgr.nodes.get(caller_id)
        if node is None:
            raise ToolError(f"the calling agent {caller_id!r} is not known to the manager")
        return node

    def _child(self, caller: AgentNode, ref: str) -> AgentNode:
        node = self.mgr.find(ref)
        if node is None and not caller.children_complete:  # restored: load finished children on demand
            adopt_children(self.mgr, caller)
            node = self.mgr.find(ref)
        if node is None:
            raise ToolError(f"no agent with id or nickname {ref!r}; call list_agents to see the agents you can reach")
        n: AgentNode | None = node
        while n is not None and n.parent_id is not None:
            if n.parent_id == caller.id:
                return node
            n = self.mgr.nodes.get(n.parent_id)
        raise ToolError(f"agent {node.nickname} ({node.id}) is not one of your sub-agents; "
                        "you can only steer agents you spawned (or their descendants)")

    async def spawn_agent(self, caller_id: str, agent_type: str, prompt: str, description: str,
                          background: bool | None, model: str | None, isolation: str | None = None, *,
                          label: str | None = None, cleanup: str | None = None,
                          run_timeout_s: float | None = None, output_schema: dict[str, Any] | None = None) -> str:
        caller = self._caller(caller_id)
        if model is not None and "@" in model:
            raise ToolError(f"model {model!r} names a server: an agent may choose a model, not where the runtime "
                            "sends the request (and the API key). Pass the model name alone, e.g. "
                            f"{model.split('@', 1)[0]!r}; a server is configured by the user in [providers.*] "
                            "base_url or an agent definition")
        limits = Limits(timeout_s=_run_timeout(run_timeout_s)) if run_timeout_s is not None else None
        try:
            spec = output_spec(output_schema=output_schema)
        except UserError as e:
            raise ToolError(f"{e}. Fix output_schema and spawn again.") from None
        try:
            node = self.mgr.spawn(agent_type=agent_type, prompt=prompt, parent_id=caller.id,
                                  description=description, background=background, model=model, isolation=isolation,
                                  label=_label(label), cleanup=_cleanup(cleanup), limits=limits, inline=True)
        except SpawnError as e:
            raise ToolError(str(e)) from None
        self.mgr.recorder.attach_output(node, spec)
        if node.background:
            ahead = self.mgr.slots.ahead(node)
            if not node.narrowed:  # the common cases: json.dumps of the dict below, by template
                head = f'{{"agent_id": {_js(node.id)}, "nickname": {_js(node.nickname)}, "status": '
                if ahead is None:
                    return f'{head}"running", "permission_mode": {_js(node.mode)}, "note": {_BACKGROUND_NOTE}}}'
                return (f'{head}"queued", "permission_mode": {_js(node.mode)}, "note": {_BACKGROUND_NOTE}, '
                        f'"queued": "queued: {ahead} agents ahead of it; it starts when a slot frees (max_threads='
                        f'{self.mgr.cfg.max_threads})"}}')
            out = {"agent_id": node.id, "nickname": node.nickname, "status": "running" if ahead is None else "queued",
                   "permission_mode": node.mode,
                   "note": "runs in the background; its result will be announced to you, or collect it with wait"}
            if ahead is not None:
                out["queued"] = (f"queued: {ahead} agents ahead of it; it starts when a slot frees (max_threads="
                                 f"{self.mgr.cfg.max_threads})")
            if node.narrowed:
                out["narrowed"] = "; ".join(node.narrowed)
            return json.dumps(out)
        result = await self.mgr.wait_one(node, settle=False)  # (the parent's turn goes on; its root yields)
        text = compressed_result(result, self.mgr.cfg.result_max_chars)
        return f"[narrowed: {'; '.join(node.narrowed)}]\n{text}" if node.narrowed else text

    async def send_input(self, caller_id: str, agent_id: str, message: str) -> str:
        caller = self._caller(caller_id)
        node = self._child(caller, agent_id)
        try:
            self.mgr.send_input(node.id, message, sender=f"parent agent {caller.nickname}")
        except SpawnError as e:
            raise ToolError(str(e)) from None
        return f"message queued for {node.nickname} ({node.id}); it reads it at its next tool boundary"

    async def wait(self, caller_id: str, agent_ids: list[str] | None, timeout_s: float | None,
                   return_when: str) -> str:
        caller = self._caller(caller_id)
        if agent_ids:
            nodes = [self._child(caller, a) for a in agent_ids]
        else:
            adopt_children(self.mgr, caller)
            nodes = [self.mgr.nodes[c] for c in caller.children if c in self.mgr.nodes]
        if not nodes:
            return "you have no sub-agents to wait for"
        results, running, timed_out = await self.mgr.wait([n.id for n in nodes], timeout_s,
                                                          any_=return_when == "any")
        finished = [(n, results[n.id]) for n in nodes if n.id in results]
        for n, _ in finished:
            self.mgr.withdraw_announcement(caller, n.id)
        head = (f"{len(results)} finished, {len(running)} still running"
                + (f" (timed out after {timeout_s}s)" if timed_out else ""))
        if running:
            nick = {n.id: n.nickname for n in nodes}
            shown = running[:50]
            head += ": " + ", ".join(f"{nick[i]} ({i})" for i in shown)
            if len(running) > len(shown):
                head += f" and {len(running) - len(shown)} more"
        return "\n\n".join([f"[wait: {head}; timed_out={str(timed_out).lower()}]",
                             *self._results_text(finished)])

    def _results_text(self, finished: list[tuple[AgentNode, RunResult]]) -> list[str]:
        """The finished children's results, fitted into one tool output: full compressed results while
        they fit, then one line each, then a count of those not shown (``wait`` on their ids shows them)."""
        if not finished:
            return []
        per_child = WAIT_BUDGET // len(finished)
        if per_child >= 1_500:
            cap = min(self.mgr.cfg.result_max_chars, per_child - 400)
            return [compressed_result(r, cap) for _, r in finished]
        shown = finished[: WAIT_BUDGET // 160]
        width = max(60, WAIT_BUDGET // len(shown) - 100)
        lines = []
        for n, r in shown:
            text = " ".join(r.text.split())
            text = text if len(text) <= width else text[: width - 1] + "…"
            lines.append(f"- {n.nickname} ({n.id}) {r.status}/{r.outcome}: {text or '(no output)'}")
        out = ["(many results: one line each; wait(agent_ids=[...]) on fewer ids shows them in full, "
               "rt.result(id) has the whole text)", "\n".join(lines)]
        if len(finished) > len(shown):
            out.append(f"[{len(finished) - len(shown)} more finished results not shown; "
                       "call wait(agent_ids=[...]) with their ids (from list_agents) to read them]")
        return out

    async def close_agent(self, caller_id: str, agent_id: str) -> str:
        caller = self._caller(caller_id)
        node = self._child(caller, agent_id)
        already = node.status.is_final()
        result = await self.mgr.close(node.id)
        self.mgr.withdraw_announcement(caller, node.id)
        prefix = "already finished" if already else "closed (with its descendants)"
        return f"{node.nickname} {prefix}.\n" + compressed_result(result, self.mgr.cfg.result_max_chars)

    async def resume_agent(self, caller_id: str, agent_id: str, message: str) -> str:
        caller = self._caller(caller_id)
        node = self._child(caller, agent_id)
        try:
            self.mgr.resume(node.id, message)
        except SpawnError as e:
            raise ToolError(str(e)) from None
        if node.background:
            return json.dumps({"agent_id": node.id, "nickname": node.nickname, "status": "running",
                               "note": "resumed in the background; its result will be announced"})
        result = await self.mgr.wait_one(node)
        return compressed_result(result, self.mgr.cfg.result_max_chars)

    async def list_agents(self, caller_id: str) -> str:
        caller = self._caller(caller_id)
        mgr = self.mgr
        adopt_children(mgr, caller)
        tree = [n for n in mgr.nodes.values() if n.root_id == caller.root_id]
        nick = {n.id: n.nickname for n in tree}
        lines = [f"{'  ' * n.depth}- {n.nickname} ({n.id}) type={n.info.agent_type} status={n.status} "
                 f"depth={n.depth} parent={nick.get(n.parent_id or '', '-')}" + (" [you]" if n is caller else "")
                 for n in sorted(tree, key=lambda n: (n.depth, n.nickname))]
        slots = mgr.cfg.max_threads - mgr.running_slots
        depth_left = mgr.cfg.max_depth - caller.depth
        lines.append(f"capacity: {slots} of {mgr.cfg.max_threads} thread slots free; "
                     f"you are at depth {caller.depth}, {depth_left} more level(s) of sub-agents allowed")
        return "\n".join(lines)
