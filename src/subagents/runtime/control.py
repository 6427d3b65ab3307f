"""``ManagerControl``: the :class:`~subagents.tools.agents.AgentControl` the sub-agent tools call.

It turns tool calls into manager operations on behalf of the calling agent and renders what the
model sees: compressed results, wait summaries, the agent list.  Refusals become tool errors.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Container
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

from ..exceptions import SpawnError, ToolError, UserError
from ..ids import MIN_REF, id_matches
from ..limits import MAX_TIMEOUT_S
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


INLINE_LEVELS = 16
"""A foreground child runs in its parent's task (``inline``), so a chain of nested foreground agents is one chain of
awaits, resumed through all its frames; every 16th level runs in a task of its own, which starts a new chain: a
``max_depth`` of 100 nests 100 deep instead of failing near depth 60 with a ``RecursionError``."""

LABEL_MAX = 200
"""Characters of a ``spawn_agent`` label (it names the task in announcements and listings)."""


def _one_line(text: str) -> str:
    """``text`` on one line: control and format characters (a terminal escape, NUL, a bidi override, a line
    separator) become spaces, and runs of whitespace one space."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(text.split())


def _label(label: str | None, description: str = "", prompt: str = "") -> str | None:
    """The task's name in announcements and listings: ``label``, else the description, else the start of the
    prompt, each on one line (see :func:`_one_line`); a given label over ``LABEL_MAX`` is refused, a long
    description or prompt is cut."""
    if label is not None and not isinstance(label, str):
        raise ToolError(f"label must be a short text, got {type(label).__name__}; e.g. label='scan the tests'")
    one_line = _one_line(label) if label else ""
    if len(one_line) > LABEL_MAX:
        raise ToolError(f"label is {len(one_line)} characters; keep it under {LABEL_MAX} (a few words naming the "
                        "task; the task itself goes in prompt)")
    if not one_line:  # (what the manager would take: the description, else the prompt's start)
        one_line = _one_line(description[:LABEL_MAX * 4]) if isinstance(description, str) else ""
        one_line = one_line or (_one_line(prompt[:60]) if isinstance(prompt, str) else "")
        if len(one_line) > LABEL_MAX:
            one_line = one_line[:LABEL_MAX - 1].rstrip() + "…"
    return one_line or None


def _cleanup(cleanup: str | None) -> str:
    if cleanup is None:
        return "keep"
    if cleanup not in ("keep", "delete"):
        raise ToolError(f"cleanup must be 'keep' (the run's record and transcript are archived later) or 'delete' "
                        f"(removed once its result was delivered), got {cleanup!r}")
    return cleanup


def _run_timeout(seconds: object) -> float:
    ok = isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds) and seconds > 0
    if not ok or seconds > MAX_TIMEOUT_S:  # type: ignore[operator]
        raise ToolError(f"run_timeout_s must be a positive number of seconds up to {MAX_TIMEOUT_S:.0f}, got "
                        f"{seconds!r}; "
                        "e.g. run_timeout_s=300 stops the sub-agent after five minutes with its partial work")
    return float(seconds)  # type: ignore[arg-type]


def _match(nodes: list[AgentNode], ref: str, held: Container[str]) -> AgentNode | None:
    """The one of ``nodes`` that ``ref`` names as :meth:`.AgentTree.find` does: a nickname (the agent that holds it
    first), else a unique start or end of an id (4+ characters)."""
    by_nick = [n for n in nodes if n.nickname == ref]
    if by_nick:
        return max(by_nick, key=lambda n: n.nickname in held)
    hits = [n for n in nodes if id_matches(n.id, ref)] if len(ref) >= MIN_REF else []
    return hits[0] if len(hits) == 1 else None


class ManagerControl:
    """The sub-agent tools' way into the manager (one per manager, held by every agent's tool context).

    It refers to its manager weakly: the manager holds it, and so does every agent the manager holds,
    so a strong reference would make each runtime one reference cycle, freed only by a full garbage
    collection (tests/runtime/test_gc.py).
    """

    __slots__ = ("closes", "mgr")

    def __init__(self, mgr: AgentManager) -> None:
        self.mgr: AgentManager = weakref.proxy(mgr)
        self.closes: dict[str, int] = {}  # agent id -> close_agent calls closing it now (see resume_agent)

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

    def _starter(self, caller_id: str) -> AgentNode:
        """The caller of a tool that starts an agent (``spawn_agent``, ``resume_agent``): refused while it is being
        closed, since ``close`` cancels the subtree it found when it began, and an agent started after that (by a
        call of the same turn that ran a moment later) would run on under a closed parent."""
        caller = self._caller(caller_id)
        if caller.closing or caller.status.is_final():
            raise ToolError(f"{caller.nickname} is being closed (status {caller.status}): it starts no more agents")
        return caller

    def _below(self, caller: AgentNode, node: AgentNode) -> bool:
        """Whether ``node`` is a descendant of ``caller`` (a child, a grandchild...)."""
        if node.root_id != caller.root_id:
            return False
        n: AgentNode | None = node
        while n is not None and n.parent_id is not None:
            if n.parent_id == caller.id:
                return True
            n = self.mgr.nodes.get(n.parent_id)
        return False

    def _child(self, caller: AgentNode, ref: str, _adopted: bool = False) -> AgentNode:
        """The descendant of ``caller`` that ``ref`` (an id, a nickname, a unique start or end of an id) names.

        A nickname or a short id is looked up among the caller's descendants only, so agents of other trees never
        make it ambiguous; an agent of another tree is unknown to the caller (its id is not shown), one of its own
        tree that is not below it (its parent, a sibling, itself) is refused as not its sub-agent."""
        mgr = self.mgr
        node = mgr.nodes.get(ref)
        if node is None:
            node = _match(mgr.tree.subtree(caller)[1:], ref, mgr.nicknames)  # (its descendants in memory)
            if node is None:
                other = mgr.find(ref)
                node = other if other is not None and other.root_id == caller.root_id else None
        if node is not None and self._below(caller, node):
            return node
        if not caller.children_complete and not _adopted:  # restored: load finished children on demand
            adopt_children(mgr, caller)
            return self._child(caller, ref, True)
        if node is None or node.root_id != caller.root_id:
            shown = ref if len(ref) <= 100 else ref[:100] + "..."
            raise ToolError(f"no agent with id or nickname {shown!r}; call list_agents to see the agents you can "
                            "reach")
        raise ToolError(f"agent {node.nickname} ({node.id}) is not one of your sub-agents; "
                        "you can only steer agents you spawned (or their descendants)")

    async def spawn_agent(self, caller_id: str, agent_type: str, prompt: str, description: str,
                          background: bool | None, model: str | None, isolation: str | None = None, *,
                          label: str | None = None, cleanup: str | None = None,
                          run_timeout_s: float | None = None, output_schema: dict[str, Any] | None = None) -> str:
        caller = self._starter(caller_id)
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
                                  label=_label(label, description, prompt), cleanup=_cleanup(cleanup), limits=limits,
                                  inline=(caller.depth + 1) % INLINE_LEVELS != 0)
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
        if agent_ids:  # each agent once, however often it is named (by id and by nickname, or 100,000 times)
            nodes = list({n.id: n for n in (self._child(caller, a) for a in dict.fromkeys(agent_ids))}.values())
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
        self.closes[node.id] = self.closes.get(node.id, 0) + 1
        try:
            result = await self.mgr.close(node.id)
        finally:
            if self.closes[node.id] == 1:
                del self.closes[node.id]
            else:
                self.closes[node.id] -= 1
        self.mgr.withdraw_announcement(caller, node.id)
        prefix = "already finished" if already else "closed (with its descendants)"
        return f"{node.nickname} {prefix}.\n" + compressed_result(result, self.mgr.cfg.result_max_chars)

    async def resume_agent(self, caller_id: str, agent_id: str, message: str) -> str:
        caller = self._starter(caller_id)
        node = self._child(caller, agent_id)
        up = self.mgr.nodes.get(node.parent_id) if node.parent_id else None
        while up is not None and up is not caller:  # a close under way cancels only what ran when it began
            if up.id in self.closes or (up.closing and not up.status.is_final()):
                raise ToolError(f"{up.nickname}, the parent of {node.nickname} (or its ancestor), is being closed: "
                                f"{node.nickname} is not resumed under it; wait for the close to end, then resume it")
            up = self.mgr.nodes.get(up.parent_id) if up.parent_id else None
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
        tree = sorted((n for n in mgr.nodes.values() if n.root_id == caller.root_id),
                      key=lambda n: (n.depth, n.nickname))
        nick = {n.id: n.nickname for n in tree}
        lines = [f"{'  ' * n.depth}- {n.nickname} ({n.id}) type={n.info.agent_type} status={n.status} "
                 f"depth={n.depth} parent={nick.get(n.parent_id or '', '-')}" + (" [you]" if n is caller else "")
                 for n in tree]
        if sum(len(x) + 1 for x in lines) > WAIT_BUDGET:  # a big tree: what fits, the capacity line last as always
            lines = _fitted_listing(tree, lines, caller)
        slots = mgr.cfg.max_threads - mgr.running_slots
        depth_left = mgr.cfg.max_depth - caller.depth
        lines.append(f"capacity: {slots} of {mgr.cfg.max_threads} thread slots free; "
                     f"you are at depth {caller.depth}, {depth_left} more level(s) of sub-agents allowed")
        return "\n".join(lines)


def _fitted_listing(tree: list[AgentNode], lines: list[str], caller: AgentNode) -> list[str]:
    """The lines of a listing too long for one tool output: the caller's, then the unfinished agents' (they can be
    steered), then finished ones, while they fit in ``WAIT_BUDGET``; shown in their order, then a count of the rest."""
    order = sorted(range(len(tree)), key=lambda i: (tree[i] is not caller, tree[i].status.is_final(), i))
    room, keep = WAIT_BUDGET - 300, set()
    for i in order:
        room -= len(lines[i]) + 1
        if room < 0:
            break
        keep.add(i)
    left = [n for i, n in enumerate(tree) if i not in keep]
    running = sum(1 for n in left if not n.status.is_final())
    return [*(lines[i] for i in sorted(keep)),
            f"[{len(left)} more agents of this tree not shown ({running} unfinished, {len(left) - running} finished; "
            "unfinished ones are listed first); wait(agent_ids=[...]) or close_agent with an id you know]"]
