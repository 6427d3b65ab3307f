"""The MCP tools of ``subagents serve``, over one :class:`~subagents.Runtime` the server keeps open.

The MCP client stands where a parent agent stands: it spawns root agents, steers them and collects their
results, with the model-facing agent tools' semantics and wording (:mod:`subagents.tools.agents`).  Each
method is one tool: its docstring is the tool's description, its ``Annotated`` parameters its input
schema, and it returns a short text plus structured content (:mod:`subagents.serve.shapes`).  A bad
argument, an unknown id or a refused operation is an MCP tool error whose text says what to do.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, ParamSpec

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from ..exceptions import SubagentsError
from ..runtime.limits import Limits
from ..runtime.prompts import compressed_result
from ..runtime.result import RunResult
from ..runtime.runtime import Runtime
from ..store.base import RunRecord
from .shapes import AgentOut, ListOut, SpawnOut, StatusOut, WaitOut, result_out

__all__ = ["TOOL_NAMES", "AgentService"]

MAX_AGENTS = 64
"""``subagents serve --max-agents``'s default: agents the clients may have running at once (each spends model calls;
their own sub-agents are bounded by ``--max-threads``)."""
TOOL_NAMES = ("spawn_agent", "send_input", "wait", "close_agent", "resume_agent", "list_agents", "status", "result")
WAIT_BUDGET = 45_000  # characters of results one wait returns, like the model-facing wait
RESULT_MAX_CHARS = 200_000  # what ``result`` returns of one text

P = ParamSpec("P")
AgentId = Annotated[str, Field(description="The agent's id (from spawn_agent or list_agents) or its nickname.")]


def _tool(fn: Callable[P, Awaitable[CallToolResult]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Turn the runtime's refusals (unknown id, bad type, finished agent...) into MCP tool errors: results
    with ``isError`` whose text is the refusal, which says what to do."""
    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except (SubagentsError, ToolError) as e:
            return CallToolResult(content=[TextContent(type="text", text=str(e))], is_error=True)

    return call


def _reply(text: str, data: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(data))


class AgentService:
    """The eight tools; ``rt`` is the server's runtime, open for the server's whole life."""

    def __init__(self, rt: Runtime, *, max_agents: int = MAX_AGENTS) -> None:
        self.rt = rt
        self.max_agents = max_agents
        # the root agents each client started, oldest first, by its MCP session id (stdio has one client: "")
        self.spawned: dict[str, list[str]] = {}

    def _mine(self, ctx: Context[Any, Any] | None) -> list[str]:
        """The root agents the client making this call started (its HTTP session's: the transport sent the call
        to the session its ``mcp-session-id`` names)."""
        headers = ctx.headers if ctx is not None else None
        return self.spawned.setdefault((headers or {}).get("mcp-session-id", ""), [])

    def _room(self, also: str | None = None) -> None:
        """Refuse a start while ``max_agents`` of the agents the clients started still run (``also``: being resumed)."""
        nodes = self.rt.manager.nodes
        live = {i for ids in self.spawned.values() for i in ids
                if i != also and (n := nodes.get(i)) is not None and not n.status.is_final()}
        if len(live) >= self.max_agents:
            raise ToolError(f"{len(live)} agents are running, the most this server runs at once (subagents serve "
                            f"--max-agents {self.max_agents}); wait for one to finish (wait) or close one "
                            "(close_agent), then start this one")

    @property
    def _cap(self) -> int:
        return self.rt.settings.result_max_chars

    # -- finding agents -------------------------------------------------------------------------
    def _record(self, ref: str) -> RunRecord | None:
        """A run the store holds (from this server or an earlier process) by id or nickname (the latest)."""
        self.rt.store.flush()
        rec = self.rt.store.get_run(ref)
        if rec is not None:
            return rec
        by_nick = [r for r in self.rt.runs(include_archived=True) if r.nickname == ref]
        return by_nick[-1] if by_nick else None

    def _resolve(self, ref: str) -> str:
        """The full id of agent ``ref``; a tool error naming ``list_agents`` when there is none."""
        ref = ref.strip()
        node = self.rt.manager.find(ref) if ref else None
        if node is not None:
            return node.id
        rec = self._record(ref) if ref else None
        if rec is None:
            shown = ref if len(ref) <= 100 else ref[:100] + "..."
            raise ToolError(f"no agent with id or nickname {shown!r}; call list_agents to see the agents "
                            "(list_agents(all_runs=true) also shows earlier sessions' runs)")
        return rec.run_id

    def _status_out(self, agent_id: str) -> StatusOut:
        node = self.rt.manager.find(agent_id)
        if node is not None:
            res = node.result if node.status.is_final() else None
            return StatusOut(agent_id=node.id, nickname=node.nickname, agent_type=node.info.agent_type,
                             status=str(node.status), outcome=str(res.outcome) if res else None,
                             result=result_out(res) if res else None)
        rec = self._record(agent_id)
        if rec is None:  # deleted between the lookup and now
            raise ToolError(f"agent {agent_id} is no longer recorded (its cleanup policy deleted it)")
        res = self.rt.result(rec.run_id)
        return StatusOut(agent_id=rec.run_id, nickname=rec.nickname, agent_type=rec.agent_type, status=rec.status,
                         outcome=rec.outcome, result=result_out(res) if res else None)

    # -- the tools ------------------------------------------------------------------------------
    @_tool
    async def spawn_agent(
        self,
        prompt: Annotated[str, Field(description="The complete task; the agent sees nothing else of your "
                                                 "conversation.")],
        agent_type: Annotated[str, Field(description="The kind of agent: general-purpose, explore (read-only), "
                                                     "plan, verify, coordinator, or a project-defined type.")]
        = "general-purpose",
        description: Annotated[str, Field(description="A short (3-5 word) label for the task.")] = "",
        background: Annotated[bool, Field(description="Return at once with the agent's id; collect the result "
                                                      "later with wait or result.")] = False,
        model: Annotated[str | None, Field(description="Optional model override, e.g. "
                                                       "anthropic:claude-haiku-4-5.")] = None,
        max_turns: Annotated[int | None, Field(ge=1, description="Stop the agent after this many model "
                                                                 "turns.")] = None,
        timeout_s: Annotated[float | None, Field(gt=0, description="Stop the agent after this many "
                                                                   "seconds.")] = None,
        ctx: Context[Any, Any] | None = None,
    ) -> Annotated[CallToolResult, SpawnOut]:
        """Start an agent with a fresh conversation to do one task (it may spawn sub-agents of its own).

        In the foreground (default) this call returns when the agent ends, with its final answer and a
        line of stats. With background=true it returns the agent's id at once: the agent keeps running
        between calls; collect its result with wait or result, steer it with send_input or close_agent.
        Its record is in the project's run store (subagents runs list).
        """
        if model is not None and "@" in model:
            raise ToolError(f"model {model!r} names a server: choose a model, not where the requests (and the API "
                            f"key) go. Pass the model name alone, e.g. {model.split('@', 1)[0]!r}; servers are "
                            "configured in [providers.*] base_url or in an agent definition")
        if not prompt.strip():
            raise ToolError("the prompt is empty; say what the agent should do")
        limits = Limits(max_turns=max_turns, timeout_s=timeout_s) if max_turns or timeout_s else None
        self._room()
        h = await self.rt.spawn(prompt, agent_type, background=background, label=description or None,
                                limits=limits, model=model)
        self._mine(ctx).append(h.id)
        if not background:  # as the model's foreground spawn: a cancelled call closes the agent
            return self._finished(h.id, await self.rt.manager.wait_one(self.rt.manager.tree.require(h.id)), h.queued)
        state = "queued" if h.queued else "running"
        text = (f"started {h.agent_type} agent {h.nickname} (id {h.id}) in the background; status {state}. "
                f"Collect its result with wait(agent_ids=[{h.id!r}]) or result({h.id!r}); steer it with "
                "send_input or close_agent.")
        return _reply(text, SpawnOut(agent_id=h.id, nickname=h.nickname, agent_type=h.agent_type, status=state,
                                     queued=h.queued, result=None))

    def _finished(self, agent_id: str, r: RunResult, queued: bool = False) -> CallToolResult:
        return _reply(compressed_result(r, self._cap),
                      SpawnOut(agent_id=agent_id, nickname=r.nickname, agent_type=r.agent, status=str(r.status),
                               queued=queued, result=result_out(r)))

    @_tool
    async def send_input(
        self, agent_id: AgentId,
        message: Annotated[str, Field(description="What to tell the agent.")],
    ) -> Annotated[CallToolResult, StatusOut]:
        """Send more instructions to a running agent; it reads them at its next tool boundary."""
        aid = self._resolve(agent_id)
        if self.rt.manager.find(aid) is None:
            raise ToolError(self._not_here(aid, "send it input"))
        await self.rt.send_input(aid, message)
        out = self._status_out(aid)
        return _reply(f"message queued for {out['nickname']} ({aid}); it reads it at its next tool boundary", out)

    def _not_here(self, aid: str, what: str) -> str:
        rec = self._record(aid)
        if rec is not None and rec.is_final:
            return (f"agent {rec.nickname} ({aid}) has already finished (status {rec.status}); "
                    "use resume_agent(agent_id, message) to give it more work")
        return (f"agent {aid} is run by another process ({rec.owner if rec else 'unknown'}), so this server "
                f"cannot {what}; use that process, or 'subagents runs cancel {aid}' from a shell")

    @_tool
    async def wait(
        self,
        agent_ids: Annotated[list[str] | None, Field(description="Ids or nicknames; omit to wait for every "
                                                                 "agent you started here.")] = None,
        timeout_s: Annotated[float | None, Field(ge=0, description="Give up after this many seconds; the "
                                                                   "reply lists who is still running. Keep it "
                                                                   "under your client's tool timeout.")] = None,
        return_when: Annotated[Literal["all", "any"], Field(description="'all' (default), or 'any' to return "
                                                                        "as soon as one finishes.")] = "all",
        ctx: Context[Any, Any] | None = None,
    ) -> Annotated[CallToolResult, WaitOut]:
        """Wait for agents to finish and collect their results (no polling needed)."""
        ids = list(dict.fromkeys(self._resolve(a) for a in agent_ids)) if agent_ids else list(self._mine(ctx))
        if not ids:
            return _reply("you have started no agents to wait for; start one with spawn_agent",
                          WaitOut(results=[], running=[], timed_out=False))
        if return_when == "any":
            results = await self._wait_any(ids, timeout_s)
        else:
            results = await self.rt.wait(ids, timeout_s)
        finished = [results[i] for i in ids if i in results]
        running = [i for i in ids if i not in results]
        timed_out = bool(running) and timeout_s is not None and (return_when == "all" or not finished)
        head = f"{len(finished)} finished, {len(running)} still running"
        if timed_out:
            head += f" (timed out after {timeout_s:g}s)"
        if running:
            head += ": " + ", ".join(self._label(i) for i in running[:50])
        cap = max(300, min(self._cap, WAIT_BUDGET // max(1, len(finished)) - 400))
        text = "\n\n".join([f"[wait: {head}; timed_out={str(timed_out).lower()}]",
                            *(compressed_result(r, cap) for r in finished)])
        return _reply(text, WaitOut(results=[result_out(r) for r in finished], running=running, timed_out=timed_out))

    async def _wait_any(self, ids: list[str], timeout_s: float | None) -> dict[str, RunResult]:
        """The agents of ``ids`` that have finished, once one has (or ``timeout_s`` passed): those of this
        server, and those of the store (an earlier session, another process) raced against them."""
        done = {i: r for i in ids if (r := self.rt.result(i)) is not None}
        if done:
            return done
        here = [i for i in ids if self.rt.manager.find(i) is not None]
        waits: list[Awaitable[dict[str, RunResult]]] = [self.rt.wait([i], timeout_s) for i in ids if i not in here]
        if here:
            waits.append(self._wait_here(here, timeout_s))
        pending = {asyncio.ensure_future(w) for w in waits}
        try:
            while pending and not done:
                finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    done.update(task.result())
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        return done

    async def _wait_here(self, ids: list[str], timeout_s: float | None) -> dict[str, RunResult]:
        return (await self.rt.manager.wait(ids, timeout_s, any_=True))[0]

    def _label(self, aid: str) -> str:
        node = self.rt.manager.find(aid)
        return f"{node.nickname} ({aid})" if node is not None else aid

    @_tool
    async def close_agent(self, agent_id: AgentId) -> Annotated[CallToolResult, StatusOut]:
        """Stop an agent and all of its descendants now; its partial result is kept."""
        aid = self._resolve(agent_id)
        node = self.rt.manager.find(aid)
        if node is None:
            rec = self._record(aid)
            if rec is None or not rec.is_final:
                raise ToolError(self._not_here(aid, "close it"))
            out = self._status_out(aid)
            return _reply(f"{rec.nickname} had already finished ({rec.status}/{rec.outcome}); nothing to close", out)
        already = node.status.is_final()
        r = await self.rt.close(aid)
        prefix = "already finished" if already else "closed (with its descendants)"
        return _reply(f"{node.nickname} {prefix}.\n" + compressed_result(r, self._cap), self._status_out(aid))

    @_tool
    async def resume_agent(
        self, agent_id: AgentId,
        message: Annotated[str, Field(description="The new instructions.")],
        background: Annotated[bool, Field(description="Return at once; collect the result later with "
                                                      "wait.")] = False,
        ctx: Context[Any, Any] | None = None,
    ) -> Annotated[CallToolResult, SpawnOut]:
        """Give a finished (completed, errored or closed) agent more work; it keeps its whole conversation."""
        aid = self._resolve(agent_id)
        if self.rt.manager.find(aid) is None and (rec := self._record(aid)) is not None and not rec.is_final:
            raise ToolError(self._not_here(aid, "resume it"))  # (still running, in another process)
        self._room(also=aid)
        h = await self.rt.resume(aid, message)
        if h.id not in (mine := self._mine(ctx)):
            mine.append(h.id)
        if not background:
            return self._finished(h.id, (await self.rt.wait([h.id]))[h.id])
        return _reply(f"resumed {h.nickname} (id {h.id}) in the background; collect its result with wait",
                      SpawnOut(agent_id=h.id, nickname=h.nickname, agent_type=h.agent_type, status="running",
                               queued=False, result=None))

    @_tool
    async def list_agents(
        self,
        all_runs: Annotated[bool, Field(description="Also list the runs of earlier sessions from the project's "
                                                    "run store.")] = False,
    ) -> Annotated[CallToolResult, ListOut]:
        """List the agents (with their sub-agents) with status and depth, and the thread slots free."""
        rows = [AgentOut(agent_id=a.id, nickname=a.nickname, agent_type=a.agent_type, status=str(a.status),
                         depth=a.depth, parent_id=a.parent_id, label=a.label) for a in self.rt.agents()]
        if all_runs:
            known = {r["agent_id"] for r in rows}
            rows += [AgentOut(agent_id=r.run_id, nickname=r.nickname, agent_type=r.agent_type, status=r.status,
                              depth=r.depth, parent_id=r.parent_id, label=r.label)
                     for r in self.rt.runs(include_archived=True) if r.run_id not in known]
        nick = {r["agent_id"]: r["nickname"] for r in rows}
        lines = [f"{'  ' * r['depth']}- {r['nickname']} ({r['agent_id']}) type={r['agent_type']} status={r['status']} "
                 f"depth={r['depth']} parent={nick.get(r['parent_id'] or '', '-')}"
                 + (f" label={r['label']!r}" if r["label"] else "") for r in _tree_order(rows)]
        mgr = self.rt.manager
        free = mgr.cfg.max_threads - mgr.running_slots
        lines.append(f"capacity: {free} of {mgr.cfg.max_threads} sub-agent thread slots free"
                     if rows else "no agents yet; start one with spawn_agent")
        return _reply("\n".join(lines), ListOut(agents=_tree_order(rows), running=mgr.running_slots,
                                                max_threads=mgr.cfg.max_threads))

    @_tool
    async def status(self, agent_id: AgentId) -> Annotated[CallToolResult, StatusOut]:
        """An agent's status: pending_init, running, completed, errored or shutdown (with its outcome)."""
        out = self._status_out(self._resolve(agent_id))
        res = out["result"]
        text = f"{out['nickname']} ({out['agent_id']}) type={out['agent_type']} status={out['status']}"
        if res is not None:
            text += f" outcome={res['outcome']}" + (f" error={res['error']}" if res["error"] else "")
            r = self.rt.result(out["agent_id"])
            if r is not None:
                text += f"\n{r.stats_line()}"
        return _reply(text, out)

    @_tool
    async def result(self, agent_id: AgentId) -> Annotated[CallToolResult, StatusOut]:
        """The whole final answer of a finished agent, with its stats (says so when it is still running)."""
        aid = self._resolve(agent_id)
        r = self.rt.result(aid)
        out = self._status_out(aid)
        if r is None:
            return _reply(f"{out['nickname']} ({aid}) has not finished yet (status {out['status']}); "
                          f"wait(agent_ids=[{aid!r}]) returns its result when it ends", out)
        return _reply(compressed_result(r, RESULT_MAX_CHARS), out)

    def tools(self) -> list[Callable[..., Awaitable[CallToolResult]]]:
        """The tool functions, in :data:`TOOL_NAMES` order."""
        return [getattr(self, name) for name in TOOL_NAMES]


def _tree_order(rows: list[AgentOut]) -> list[AgentOut]:
    """Parents before their children, each under its parent, in the order they were given."""
    kids: dict[str | None, list[AgentOut]] = {}
    ids = {r["agent_id"] for r in rows}
    for r in rows:
        kids.setdefault(r["parent_id"] if r["parent_id"] in ids else None, []).append(r)
    out: list[AgentOut] = []
    todo = list(reversed(kids.get(None, [])))
    while todo:
        r = todo.pop()
        out.append(r)
        todo += reversed(kids.get(r["agent_id"], []))
    return out
