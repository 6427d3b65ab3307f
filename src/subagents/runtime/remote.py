"""The Runtime's lifecycle on a remote engine (Temporal workers): the same public API, carried out by a client.

When a runtime has an engine URL (``Runtime(engine="temporal://...")``, ``[engine] url`` or
``SUBAGENTS_ENGINE``), the methods named in :data:`ROUTED` go to its :class:`RemoteAgents` instead of
the local manager (``runtime.py`` routes them once, with ``@routed``).  The agents run on the workers
(``subagents worker``): this side needs no model and no tools.  Each method keeps its local
signature and meaning:

- ``run`` / ``spawn`` start a root workflow (its id is the run id); ``spawn`` returns once a worker
  has recorded the run (its nickname is in the handle); ``run`` waits for the result.
- ``send_input`` is a signal, ``close`` a cancellation (the descendants too), ``wait`` waits on the
  workflows' results (any agent of the tree: a child's workflow id is its run id too).
- ``status``, ``result`` and ``agents`` read the run store the workers write (it must be the same
  store: a shared SQLite file or PostgreSQL); ``rt.events()`` gets the events :class:`StoreWatch`
  reads back from it (see :mod:`.remote_events` for the few it cannot).
- calls that need a person are asked here, with this runtime's approver (:mod:`.remote_approvals`).
- ``resume`` restarts a finished run's workflow with its conversation (when the workers support it).

Runs are durable: closing the runtime does not close them (they go on on the workers; a later
runtime reaches them by id).  Cancelling a ``run`` call closes its run, as locally.

Not on this engine yet (a :class:`UserError` says so): structured results, ``spawn(parent=...)``,
``isolation``, ``cleanup="delete"``, teams.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..engines.base import Executor, RunHandle
from ..exceptions import ModelError, SpawnError, UserError
from ..models.base import Model
from ..store.base import RunRecord, Store
from .events import EventBus
from .handles import AgentHandle, AgentSummary
from .limits import Limits
from .recovery import record_result
from .remote_approvals import RemoteApprovals
from .remote_events import StoreWatch
from .result import RunResult
from .status import Status

if TYPE_CHECKING:
    from ..authority.guard import Authority
    from ..engines.temporal.client import TemporalEngine

__all__ = ["ROUTED", "RemoteAgents", "routed", "workers_model"]

ROUTED = ("run", "spawn", "send_input", "wait", "close", "resume", "status", "result", "agents", "restore",
          "team", "create_team", "brief", "note", "set_model_override")
"""The Runtime methods a remote engine carries out, or refuses (same names and signatures on :class:`RemoteAgents`)."""

_RECORD_WAIT_S = 30.0  # how long spawn waits for a worker to record the run before returning without a nickname


def _not_yet(what: str) -> UserError:
    return UserError(f"{what} is not supported on the Temporal engine yet; run it on the local engine "
                     "(no engine URL) or leave it out")


class RemoteAgents:
    """The remote side of one :class:`~subagents.runtime.runtime.Runtime` (see the module docstring)."""

    def __init__(self, url: str, *, store: Store, bus: EventBus, executor: Executor, default_limits: Limits,
                 model: str | None = None, authority: Authority | None = None) -> None:
        self.url = url
        self.model = model  # the runs' model when a call names none (None: the workers' default)
        self.store, self.bus, self.executor = store, bus, executor
        self.default_limits = default_limits
        self.roots: dict[str, str] = {}  # root run id -> agent type, for the runs this runtime started
        self.reopened: dict[str, float | None] = {}  # resumed run -> its earlier end, until a worker records more
        self.watch = StoreWatch(store, bus)
        # the calls of this runtime's trees that need a person: asked with its approver (none: denied)
        self.approvals = RemoteApprovals(store, bus, authority.broker if authority is not None else None, self.engine,
                                         executor)
        self._engine: TemporalEngine | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watcher: RunHandle[None] | None = None
        self._approver: RunHandle[None] | None = None

    async def engine(self) -> TemporalEngine:
        """The Temporal client (connected on first use, again in a new event loop: ``run_sync``)."""
        loop = asyncio.get_running_loop()
        if self._engine is None or self._loop is not loop:
            from ..engines.temporal.client import TemporalEngine  # lazy: temporalio is the `temporal` extra

            self._engine, self._loop = await TemporalEngine.connect(self.url), loop
            self._watcher = self._approver = None
        return self._engine

    def _follow(self, root_id: str, reopened: str | None = None) -> None:
        """Publish the events of the tree under ``root_id`` and answer its approvals (the services run once)."""
        self.watch.watch(root_id, reopened=reopened)
        self.approvals.watch(root_id)
        if self._watcher is None or self._watcher.done():
            self._watcher = self.executor.start_service("subagents-remote-events", self.watch.run)
        if self._approver is None or self._approver.done():
            self._approver = self.executor.start_service("subagents-remote-approvals", self.approvals.run)

    # -- starting -----------------------------------------------------------------------------------
    async def _start(self, prompt: str, agent: str, *, limits: Limits | None, model: Model | str | None,
                     label: str | None, output: bool, background: bool) -> str:
        if output:
            raise _not_yet("a structured result (output_type/output_schema)")
        if model is not None and not isinstance(model, str):
            raise UserError("with a Temporal engine, name the model by a string such as "
                            "'anthropic:claude-sonnet-4-5' (the workers resolve it), not a Model object")
        engine = await self.engine()
        run_id = await engine.start(prompt, agent, limits=self.default_limits.merged(limits), model=model or self.model,
                                    label=label or "", background=background)
        self.roots[run_id] = agent
        self._follow(run_id)
        return run_id

    async def run(self, prompt: str, agent: str = "general-purpose", *, limits: Limits | None = None,
                  model: Model | str | None = None, output_type: Any = None,
                  output_schema: Mapping[str, Any] | None = None) -> RunResult:
        run_id = await self._start(prompt, agent, limits=limits, model=model, label=None,
                                   output=output_type is not None or output_schema is not None, background=False)
        engine = await self.engine()
        try:
            result = await engine.result(run_id)
        except asyncio.CancelledError:  # the caller gave up on the run: close it, as the local engine does
            with contextlib.suppress(Exception):
                await asyncio.shield(engine.close(run_id))
            raise
        self.store.flush()
        self.watch.poll()  # every event of the run is published before it returns
        return result

    async def spawn(self, prompt: str, agent: str = "general-purpose", *, background: bool = True,
                    label: str | None = None, limits: Limits | None = None, model: Model | str | None = None,
                    parent: str | None = None, cleanup: str = "keep", isolation: str | None = None,
                    output_type: Any = None, output_schema: Mapping[str, Any] | None = None) -> AgentHandle:
        if parent is not None:
            raise _not_yet("spawning under another agent (parent=); an agent spawns its own sub-agents")
        if isolation is not None:
            raise _not_yet(f"isolation={isolation!r}")
        if cleanup != "keep":
            raise _not_yet(f"cleanup={cleanup!r}")
        run_id = await self._start(prompt, agent, limits=limits, model=model, label=label, background=background,
                                   output=output_type is not None or output_schema is not None)
        rec = await self._recorded(run_id)
        return AgentHandle(run_id, rec.nickname if rec is not None else "", agent)

    async def _recorded(self, run_id: str) -> RunRecord | None:
        """The run's record once a worker wrote it; a run that failed to start raises its error."""
        engine = await self.engine()
        deadline = time.monotonic() + _RECORD_WAIT_S
        polls = 0
        while time.monotonic() < deadline:
            rec = self.store.get_run(run_id)
            if rec is not None:
                return rec
            polls += 1
            if polls % 10 == 0 and await engine.status(run_id) not in ("running", "not_found"):
                await engine.result(run_id)  # raises the reason it failed (an unknown agent type...)
                return self.store.get_run(run_id)
            await asyncio.sleep(0.02)
        return None

    # -- steering -----------------------------------------------------------------------------------
    def _record(self, ref: str) -> RunRecord | None:
        """The record of ``ref`` (a run id, or the nickname of an agent of a tree this runtime started)."""
        self.store.flush()
        rec = self.store.get_run(ref)
        if rec is None:
            rec = next((r for root in reversed(list(self.roots))
                        for r in self.store.list_runs(root_id=root, include_archived=True) if r.nickname == ref), None)
        return None if rec is None else self._current(rec)

    def _current(self, rec: RunRecord) -> RunRecord:
        """``rec``, or ``pending_init`` for a run resumed here that no worker has taken yet (the store still has
        its earlier end)."""
        if rec.run_id not in self.reopened:
            return rec
        if rec.is_final and rec.ended_at == self.reopened[rec.run_id]:
            return dataclasses.replace(rec, status=str(Status.PENDING_INIT))
        del self.reopened[rec.run_id]
        return rec

    def _require(self, ref: str) -> str:
        if ref in self.roots:
            return ref
        rec = self._record(ref)
        if rec is None:
            raise SpawnError(f"no agent with id or nickname {ref!r}; rt.agents() lists the agents of this runtime")
        return rec.run_id

    async def send_input(self, agent_id: str, message: str) -> None:
        run_id = self._require(agent_id)
        if not message.strip():
            raise SpawnError("the message is empty; say what the agent should do")
        rec = self._record(run_id)
        if rec is not None and rec.is_final:
            raise SpawnError(f"agent {rec.nickname} ({run_id}) has already finished (status {rec.status}); "
                             "use resume_agent(agent_id, message) to give it more work")
        engine = await self.engine()
        await engine.send_input(run_id, f"<message from user>\n{message}\n</message>")

    async def wait(self, agent_ids: Sequence[str] | None = None, timeout: float | None = None
                   ) -> dict[str, RunResult]:
        if agent_ids is None:
            ids = [a.id for a in self.agents() if not a.status.is_final()]
        else:
            ids = [self._require(r) for r in agent_ids]
        engine = await self.engine()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        out: dict[str, RunResult] = {}
        for run_id in ids:  # they run concurrently on the workers: waiting in turn takes the longest one
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                break
            try:
                async with asyncio.timeout(left):
                    out[run_id] = await engine.result(run_id)
            except TimeoutError:
                break
        for run_id in ids:  # past the deadline: the ones the store has seen end
            if run_id not in out and (r := self.result(run_id)) is not None:
                out[run_id] = r
        self.watch.poll()
        return out

    async def close(self, agent_id: str) -> RunResult:
        run_id = self._require(agent_id)
        engine = await self.engine()
        result = await engine.close(run_id)
        self.store.flush()
        self.watch.poll()
        return result

    async def resume(self, agent_id: str, message: str, *, limits: Limits | None = None) -> AgentHandle:
        run_id = self._require(agent_id)
        if not message.strip():
            raise SpawnError("the message is empty; say what the resumed agent should do")
        rec = self._record(run_id)
        if rec is None or not rec.is_final:
            who = f"{rec.nickname} ({run_id}) is still {rec.status}" if rec is not None else f"{run_id} is starting"
            raise SpawnError(f"agent {who}; use send_input to give it more instructions, or wait for it")
        engine = await self.engine()
        await engine.resume(run_id, message, limits=limits)
        self.reopened[run_id] = rec.ended_at
        self.roots.setdefault(rec.root_id or run_id, rec.agent_type)
        self._follow(rec.root_id or run_id, reopened=run_id)
        return AgentHandle(run_id, rec.nickname, rec.agent_type)

    # -- reading ------------------------------------------------------------------------------------
    def status(self, agent_id: str) -> Status:
        rec = self._record(agent_id)
        if rec is None:
            return Status.PENDING_INIT if agent_id in self.roots else Status.NOT_FOUND
        return Status(rec.status)

    def result(self, agent_id: str) -> RunResult | None:
        rec = self._record(agent_id)
        return record_result(rec) if rec is not None and rec.is_final else None

    def agents(self) -> list[AgentSummary]:
        self.store.flush()
        out: list[AgentSummary] = []
        for root, agent in self.roots.items():
            recs = sorted((self._current(r) for r in self.store.list_runs(root_id=root, include_archived=True)),
                          key=lambda r: (r.depth, r.created_at))
            if not any(r.run_id == root for r in recs):  # not recorded yet by a worker
                out.append(AgentSummary(root, "", agent, Status.PENDING_INIT, 0, None, ""))
            out.extend(AgentSummary(r.run_id, r.nickname, r.agent_type, Status(r.status), r.depth, r.parent_id,
                                    r.label) for r in recs)
        return out

    # -- what the workers own -------------------------------------------------------------------------
    def team(self, name: str) -> Any:
        raise _not_yet("teams (rt.team)")

    def create_team(self, name: str, description: str = "") -> Any:
        raise _not_yet("teams (rt.create_team)")

    def brief(self, text: str) -> None:
        raise UserError("the briefing of agents on the Temporal engine is the workers' ([briefing] in their "
                        ".subagents/config.toml); rt.brief works on the local engine")

    def note(self, text: str) -> None:
        raise _not_yet("the shared notepad (rt.note)")

    def set_model_override(self, agent_type: str, model: Model | str | None) -> None:
        raise UserError("model overrides on the Temporal engine are the workers' (their config and agent "
                        "files); pass model= to run or spawn instead")

    async def restore(self) -> None:
        """Nothing to restore: the runs belong to the engine, not to this process."""
        return None

    async def aclose(self) -> None:
        """Stop reading events and answering approvals (the runs go on on the workers; a call waiting for a
        person waits for another client, or its approval timeout)."""
        if self._watcher is not None:
            watcher, self._watcher = self._watcher, None
            await self.executor.stop_service(watcher)
        if self._approver is not None:
            approver, self._approver = self._approver, None
            await self.executor.stop_service(approver)
        await self.approvals.aclose()


F = TypeVar("F", bound=Callable[..., Any])


def routed(method: F) -> F:
    """Mark a :class:`~subagents.runtime.runtime.Runtime` method that a remote engine carries out: it calls
    ``self.remote.<its name>`` when the runtime has a :class:`RemoteAgents`, else runs as written."""
    name = method.__name__
    if name not in ROUTED:
        raise TypeError(f"{name} is not in remote.ROUTED")
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def route_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            remote = self.remote
            if remote is None:
                return await method(self, *args, **kwargs)
            return await getattr(remote, name)(*args, **kwargs)

        return cast(F, route_async)

    @functools.wraps(method)
    def route(self: Any, *args: Any, **kwargs: Any) -> Any:
        remote = self.remote
        return method(self, *args, **kwargs) if remote is None else getattr(remote, name)(*args, **kwargs)

    return cast(F, route)


def workers_model() -> Model:
    """The model of a runtime whose agents run on workers and that was given none (it is never called)."""
    from ..models.function import FunctionModel

    def refuse(req: Any) -> str:
        raise ModelError("this runtime's agents run on the Temporal workers, with the workers' model")

    return FunctionModel(refuse, name="on the workers")
