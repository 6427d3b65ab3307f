"""``AgentManager``: owns every agent of a runtime — the spawn pipeline, slots, lifecycle, delivery.

``spawn`` does, in order (see DESIGN.md):

1. validate the input (known agent type, non-empty prompt)            -> :class:`SpawnError`
2. resolve the definition (session > project > user > extension > built-in)
3. build the config: model, limits (carved from the parent's budget), tools
4. apply runtime overrides (``set_model_override``)
5. layer the system prompt: parent's base + type + cwd + mode + briefing + notepad
6. compute the authority (:mod:`.factory`): the tool fence (parent's tools ∩ allowlist − denylist,
   minus spawn tools at ``max_depth``) and the permission mode, never wider than the parent's
7. reserve a slot: ``max_depth`` and ``max_threads`` (released if anything later fails)
8. assign a UUID and a nickname, record the run (``pending_init``) through the :class:`.Recorder`
9. hand it to the :class:`~subagents.engines.Executor` (``running``)

Everything here runs on the event loop thread, so the check-and-reserve of step 7 cannot race.
The parts: :class:`.AgentFactory` (step 3-6), :class:`.SlotPool` (step 7), :class:`.AgentTree` (lookup),
:class:`.Recorder` (store and events), :class:`.Announcements` (background results to parents), the
executor (where runs execute).  Recovery, retention and the sweeper use the public methods below
(:meth:`AgentManager.assemble`, :meth:`~AgentManager.start`, :meth:`~AgentManager.finish`,
:meth:`~AgentManager.close`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from ..authority.guard import Authority
from ..definitions.loader import DefinitionSet
from ..definitions.model import AgentDefinition
from ..engines import Executor, LocalExecutor
from ..engines.inline import InlineRun
from ..exceptions import DefinitionError, LimitExceeded, SpawnError
from ..messages import Message
from ..models.base import AgentInfo, Model
from ..sandbox.workspace import Workspace
from ..sandbox.worktree import plan_worktree
from ..store.base import AnnouncementRecord, Store
from ..tools.base import Tool
from ..tools.todo_store import TodoStore
from . import isolation as worktrees
from . import resuming, waiting
from .delivery import Announcements
from .dormant import CoreReviver, release_if_idle, unborn
from .events import EventBus
from .factory import AgentFactory, Grant, ManagerSettings, check_priced
from .ids import new_agent_id
from .limits import Limits
from .loop import Stopped
from .nicknames import NicknamePool
from .node import AgentNode
from .prompts import announcement_text
from .recorder import Recorder
from .result import RunResult
from .shared import Briefings, latest_notes
from .slots import SlotPool
from .status import Outcome, Status
from .tree import AgentTree

__all__ = ["AgentManager", "ManagerSettings"]


class AgentManager:
    def __init__(
        self,
        *,
        definitions: DefinitionSet,
        tools: Sequence[Tool],
        model: Model | None,
        resolve_model: Callable[[str], Model],
        workspace: Workspace,
        store: Store,
        bus: EventBus,
        settings: ManagerSettings,
        control_factory: Callable[[AgentManager], Any] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.defs = definitions
        self.tools = list(tools)
        self.model = model
        self.workspace = workspace
        self.store = store
        self.bus = bus
        self.executor: Executor = executor if executor is not None else LocalExecutor()
        self.cfg = settings
        self.notepad: list[str] = []
        self.nicknames = NicknamePool()
        self.tree = AgentTree(self.nicknames)
        self.nodes = self.tree.nodes
        self.recorder = Recorder(store, bus, self.nodes)
        self.announcements = Announcements(self.nodes, self.recorder, settings)
        self.slots = SlotPool(settings.max_threads, settings.max_depth, self.tree.slot_holders, settings.when_full)
        self.todos: dict[str, TodoStore] = {}  # root id -> its tree's todo lists (runtime/shared.py)
        self.factory = AgentFactory(self.tools, max_depth=settings.max_depth, runtime_mode=settings.permission_mode,
                                    workdir=str(workspace.root), model=model, resolve_model=resolve_model)
        self.authority: Authority | None = None  # the runtime's permission rules, approver and hooks
        self.sandbox: Any = None  # the shell sandbox every agent's bash and hooks run in
        self.retention: Any = None  # a recovery.Retention: evicts old finished trees from memory
        self.teams: Any = None  # a teams.TeamService once the runtime has a team (its agents' turns go through it)
        self.prepare: Callable[[AgentNode], Awaitable[None]] | None = None  # awaited as a run starts (MCP tools)
        self.control = control_factory(self) if control_factory is not None else None
        # what closing a running agent records: "cancelled", or "interrupted" (resumable) once the process stops
        self.stop_as: tuple[Outcome, str] = (Outcome.CANCELLED, "closed before it finished")
        self.closed = False  # shut down (the runtime is closing): no agent starts any more
        self.reviver = CoreReviver(self)  # builds agents' loops as they start (dormant.py)
        self.briefings = Briefings()  # a child's briefing (siblings share one string)

    # ------------------------------------------------------------------------------------------
    # lookup (see AgentTree)
    def find(self, ref: str) -> AgentNode | None:
        """An agent by id, nickname or unique id prefix (>= 4 characters)."""
        return self.tree.find(ref)

    def status(self, ref: str) -> Status:
        return self.tree.status(ref)

    @property
    def running_slots(self) -> int:
        """How many sub-agents hold a thread slot now."""
        return self.slots.running

    # ------------------------------------------------------------------------------------------
    # the spawn pipeline
    def spawn(
        self,
        *,
        agent_type: str,
        prompt: str,
        parent_id: str | None = None,
        description: str = "",
        background: bool | None = None,
        model: Model | str | None = None,
        limits: Limits | None = None,
        label: str | None = None,
        cleanup: str = "keep",
        history: list[Message] | None = None,
        isolation: str | None = None,
        inline: bool = False,
    ) -> AgentNode:
        """Create and start an agent; raise :class:`SpawnError` (a clear sentence) when refused.  ``inline``: a
        foreground agent is run by the task that waits for it (:meth:`wait_one`, right after; no task of its own)."""
        # 1. validate
        if self.closed:
            raise SpawnError("the runtime is closing: no new agent starts; open a new Runtime for more work")
        if not isinstance(prompt, str) or not prompt.strip():
            raise SpawnError("the prompt is empty; give the agent a task to do")
        if cleanup not in ("keep", "delete"):
            raise SpawnError(f"cleanup must be 'keep' or 'delete', got {cleanup!r}")
        if isolation not in (None, "", "none", "worktree"):
            raise SpawnError(f"isolation must be 'worktree' (or omitted), got {isolation!r}")
        parent = self.nodes.get(parent_id) if parent_id is not None else None
        if parent_id is not None and parent is None:
            raise SpawnError(f"unknown parent agent {parent_id!r}")
        if parent is not None and (up := self.tree.closing_from(parent.id)) is not None:  # one started now runs on
            raise SpawnError(f"agent {up.nickname} ({up.id}) is being closed: no agent starts under it")
        # 2. resolve the definition
        try:
            d = self.defs.get(agent_type)
        except DefinitionError as e:
            raise SpawnError(str(e)) from None
        depth = 0 if parent is None else parent.depth + 1
        # 6. the authority: mode and fence narrowed from the parent's (refusals before any work)
        grant = self.factory.authority(d, parent.mode if parent else None, parent.core.registry if parent else None,
                                       depth)
        # 3-4. model (spawn argument > runtime override > definition > parent's > runtime default)
        mdl = self.factory.model_for(d, parent.core.model if parent else None, model)
        # 7. reserve the slot first: cheap refusals before any work
        with self.slots.reserve(depth, parent, background=d.background if background is None else background
                                ) as reservation:
            # 3. limits: definition, then per-spawn override, capped by what the parent has left
            wanted = self.factory.limits(self.cfg.default_limits if parent is None else self.cfg.child_limits, d
                                         ).merged(limits)
            carved_from = parent.core.budget if parent is not None else None
            try:
                carved = carved_from.carve(wanted) if carved_from is not None else wanted
            except LimitExceeded as e:
                raise SpawnError(f"cannot spawn: the parent's budget is used up ({e}); finish with what you have "
                                 "or raise the parent's limit") from None
            check_priced(mdl, carved, self.cfg.prices)
            node = self.assemble(d, parent, depth, mdl, carved, prompt, description, label, background, cleanup,
                               history, grant, isolation=isolation or d.isolation)
            node.holds_slot = reservation.held
            reservation.commit()
        # 8. record; 9. start
        self.nodes[node.id] = node
        if parent is not None:
            parent.children.append(node.id)
        if reservation.queued:  # no slot free (when_full="queue"): it starts when one frees (see finish)
            self.recorder.created(node)
            ahead = self.slots.enqueue(node, None if history else prompt)
            self.recorder.emit(node, "subagent_queued", {"ahead": ahead})
        else:  # it starts now: recorded as started in the same write (no second write as its first step runs)
            self.recorder.created(node, started=True)
            self.start(node, None if history else prompt, recorded=True, inline=inline and not node.background)
        return node

    def assemble(self, d: AgentDefinition, parent: AgentNode | None, depth: int, mdl: Model, limits: Limits,
               prompt: str, description: str, label: str | None, background: bool | None, cleanup: str,
               history: list[Message] | None, grant: Grant, *, ids: tuple[str, str] | None = None,
               isolation: str | None = None) -> AgentNode:
        """Build an agent (not recorded, not started); ``ids``: (id, nickname) of a run restored from the store."""
        agent_id = new_agent_id() if ids is None else ids[0]
        if ids is not None:
            nickname = self.nicknames.adopt(ids[1], d.name)
        elif parent is None:
            nickname = self.nicknames.take_root(d.name, d.nickname_candidates, self.store)
        else:
            nickname = self.nicknames.take(d.name, d.nickname_candidates)
        info = AgentInfo(agent_id, nickname, d.name, depth, parent.id if parent else None)
        # 5. prompt layering: the base is inherited verbatim from the root
        base = self.cfg.base_prompt
        ws, sandbox = (parent.core.ctx.workspace, parent.core.ctx.sandbox) if parent else (self.workspace, self.sandbox)
        worktree = None
        if isolation == "worktree":
            try:
                worktree = plan_worktree(ws.root, nickname, agent_id)
            except SpawnError:
                self.nicknames.release(nickname)
                raise
        system = self.factory.system_prompt(base, d, is_child=parent is not None, mode=grant.mode,
                                            briefing=self.briefings(self.cfg.briefing, parent),
                                            notes=latest_notes(self.notepad),
                                            workdir=str(worktree.root if worktree else ws.root))
        root_id = parent.root_id if parent else agent_id
        node = AgentNode(info=info, definition=d, core_=None, root_id=root_id, task_text=prompt, limits=limits,
                         label=label or description or prompt[:60], mode=grant.mode, narrowed=tuple(grant.notes),
                         background=d.background if background is None else background, worktree=worktree,
                         model_name=str(getattr(mdl, "name", "")), cleanup=cleanup)
        prefix = len(base) if base and system.startswith(base) else 0  # its core is built as it starts:
        return unborn(self, node, mdl, system, prefix, grant.registry, parent,  # no core while it waits for a slot
                      workspace=ws, sandbox=sandbox, history=history)

    # ------------------------------------------------------------------------------------------
    # running
    def start(self, node: AgentNode, prompt: str | None, *,
              before: Callable[[], Awaitable[None]] | None = None, recorded: bool = False, inline: bool = False
              ) -> None:
        """Hand ``node`` to the executor: run it (``prompt``: the new user message, ``None`` to continue its
        transcript), after ``before()`` when given (recovery hands over results the transcript waits for);
        ``recorded``: its record already says it started (:meth:`.Recorder.created` with ``started``)."""
        body = (partial(self.drive, node, prompt, recorded) if before is None
                else partial(self._drive_after, before, node, prompt))
        node.task = InlineRun(body) if inline else self.executor.start_run(node.id, f"agent:{node.nickname}", body)

    async def _drive_after(self, before: Callable[[], Awaitable[None]], node: AgentNode, prompt: str | None
                           ) -> RunResult:
        await before()
        return await self.drive(node, prompt)

    async def drive(self, node: AgentNode, prompt: str | None, recorded: bool = False) -> RunResult:
        """Run ``node`` to its end and record the end (the body every executor runs); ``recorded``: its record
        already says it started (``running``, this run counted), so only its status event is left to tell."""
        await self.store.room()  # back-pressure: a store whose writer is behind makes new runs wait
        node.runs += 1
        if recorded:
            self.recorder.started(node)
        else:
            self.recorder.set_status(node, Status.RUNNING, started_at=time.time(), runs=node.runs)
        try:
            if self.prepare is not None:
                await self.prepare(node)
            failed = await worktrees.enter(node, self.workspace) if node.worktree is not None else None
            if node.worktree is not None:
                self.recorder.update(node, {"worktree": worktrees.worktree_record(node.worktree)})
            if failed:
                result = node.core.result(Stopped(Outcome.ERROR, None, failed))
            else:
                teams = self.teams
                result = await (node.core.run(prompt) if teams is None else teams.run(node, prompt))
                if teams is None and self.teams is not None:  # it made the runtime's first team: it leads it
                    result = await self.teams.keep_going(node, result)
        except asyncio.CancelledError:
            result = node.core.result(Stopped(self.stop_as[0], None, self.stop_as[1]))
            node.core.end_run(result)
            if not node.closing:  # cancelled from outside (runtime shutdown): finish, then propagate
                await worktrees.settle(node, result, self.recorder.update)
                self.finish(node, result)
                raise
        except Exception as e:
            result = node.core.result(Stopped(Outcome.ERROR, None, f"internal error: {type(e).__name__}: {e}"))
            node.core.end_run(result)
        await worktrees.settle(node, result, self.recorder.update)
        self.finish(node, result)
        return result

    def finish(self, node: AgentNode, result: RunResult) -> None:
        """Record ``node``'s end, wake its waiters, announce a background child's result to its parent."""
        if node.status.is_final():
            return
        node.result, node.task = result, None  # the finished task (and its coroutine) is not kept
        node.status = result.status
        nxt = self.slots.release(node)
        if nxt is not None:  # the oldest queued agent takes the freed slot; a loop built while it waited (a
            if (core := nxt[0].core_) is not None and core.budget is not None:  # send_input reached it) starts its
                core.budget.restart()                                         # clock as it starts running
            self.start(nxt[0], nxt[1], before=nxt[2])
        parent = self.nodes.get(node.parent_id) if node.parent_id else None
        # a teammate stopped by a signal is left unfinished in the store, as a crash leaves it (team_roles.py)
        kept = self.teams is not None and self.teams.outlives(node, result)
        ann = None
        if node.background and parent is not None and not kept:
            ann = AnnouncementRecord(f"{node.id}:{node.runs}", parent.id, node.id,
                                     announcement_text(result, node.label, self.cfg.result_max_chars), time.time())
        try:
            if not kept:
                self.recorder.finished(node, result, ann)
        finally:  # a failing store must not leave waiters hanging; its StoreError still propagates
            waiters, node.waiters = node.waiters or (), None
            for w in waiters:
                w(node)
        if ann is not None and parent is not None:
            self.announcements.deliver(parent, ann)
        release_if_idle(self, node)  # its loop is rebuilt if it is resumed
        if node.parent_id is None and self.retention is not None:
            self.retention.root_finished(node)

    def withdraw_announcement(self, parent: AgentNode, child_id: str) -> None:
        """``wait`` handed the parent this child's result: its announcement is delivered by that."""
        self.announcements.withdraw(parent, child_id)

    # ------------------------------------------------------------------------------------------
    # steering
    def send_input(self, ref: str, message: str, *, sender: str = "user") -> AgentNode:
        """Queue ``message`` for a running agent (:func:`.resuming.send_input`)."""
        return resuming.send_input(self, ref, message, sender)

    def resume(self, ref: str, message: str, *, limits: Limits | None = None) -> AgentNode:
        """Give a finished agent more work on its own conversation (:func:`.resuming.resume`).

        The run is this process's from now: its owner is written before its status (a run adopted from another,
        dead process, marked running under that owner, looked orphaned to a third process opening the store)."""
        node = resuming.resume(self, ref, message, limits)
        if self.store.owner:
            self.recorder.update(node, {"owner": self.store.owner})
        return node

    async def close(self, ref: str) -> RunResult:
        """Cancel an agent and all its descendants; their processes die with their tasks (also those started under it
        while the close runs: nothing of the subtree runs on after it)."""
        node = self.tree.require(ref)
        while True:  # again while the subtree holds a running task not cancelled yet (started meanwhile)
            victims = self.tree.subtree(node)
            tasks = []
            for n in reversed(victims):  # deepest first; a queued one leaves the queue (it never starts)
                if not n.status.is_final() and n.task is None:
                    self.slots.withdraw(n)
                elif not n.status.is_final() and n.task is not None and not n.task.done():
                    if not n.closing:  # cancel once: a second cancel would interrupt its cleanup
                        n.closing = True
                        n.task.cancel()
                    tasks.append(n.task)
            if not tasks:
                break
            await asyncio.gather(*tasks, return_exceptions=True)
        for n in victims:  # a task cancelled before its first step never ran drive
            if not n.status.is_final():
                n.runs = max(n.runs, 1)
                why = self.stop_as[1] if self.stop_as[0] is Outcome.INTERRUPTED else "closed before it started"
                self.finish(n, n.core.result(Stopped(self.stop_as[0], None, why)))
        assert node.result is not None
        return node.result

    async def wait(self, refs: Sequence[str], timeout: float | None = None, *, any_: bool = False
                   ) -> tuple[dict[str, RunResult], list[str], bool]:
        """Wait for all (or, with ``any_``, the first) of ``refs``; ``(results, still_running, timed_out)``."""
        return await waiting.wait_all([self.tree.require(r) for r in refs], timeout, any_=any_)

    async def wait_one(self, node: AgentNode, *, settle: bool = True) -> RunResult:
        """Wait for one agent to end (the foreground path); cancelling the waiter closes the agent; ``settle``:
        yield to the event loop once if its run ended without waiting (:func:`.waiting.wait_one`)."""
        return await waiting.wait_one(node, self.close, settle=settle)

    async def shutdown(self, *, closing: bool = True) -> None:
        """Close every agent still running: at the runtime's exit (``closing``: no agent starts after this), or at the
        end of a ``run_sync`` call (its event loop ends)."""
        self.closed = closing
        roots = [n for n in self.nodes.values() if n.parent_id is None and not n.status.is_final()]
        orphans = [n for n in self.nodes.values() if not n.status.is_final()]
        for n in roots + orphans:
            if not n.status.is_final():
                await self.close(n.id)

    def set_model_override(self, agent_type: str, model: Model | str | None) -> None:
        if agent_type not in self.defs:
            raise DefinitionError(f"unknown agent type {agent_type!r}; known types: {', '.join(self.defs.names())}")
        if model is None:
            self.factory.overrides.pop(agent_type, None)
        else:
            self.factory.overrides[agent_type] = model
