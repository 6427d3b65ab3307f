"""``Runtime``: the public facade — configuration, the manager, the store and the event bus.

>>> import asyncio
>>> from subagents import Runtime
>>> from subagents.models import FunctionModel
>>> rt = Runtime(model=FunctionModel(lambda req: "4"), store="memory://")
>>> rt.run_sync("What is 2 + 2?").text
'4'
"""

from __future__ import annotations

import asyncio
import functools
import os
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..authority.approvals import Approver
from ..config import NO_MODEL_HELP, Settings, apply_arguments, load_settings
from ..definitions.loader import DefinitionSet, load_definitions
from ..definitions.model import AgentDefinition
from ..engines import RunHandle
from ..exceptions import ConfigError, SpawnError, UnconfinedShellWarning, UserError
from ..models.base import Model
from ..models.clients import ClientPool
from ..models.pricing import PriceTable
from ..sandbox.policy import SandboxPolicy
from ..sandbox.workspace import Workspace
from ..store import RunRecord, Store, open_store
from ..teams.model import check_name
from ..tools.agents import AGENT_TOOLS
from ..tools.base import Tool, as_tools
from ..tools.schema import check_schema
from ..tools.team import TEAM_TOOLS
from . import wiring
from .control import ManagerControl
from .events import Event, EventBus, EventCallback
from .handles import AgentHandle, AgentSummary
from .limits import Limits
from .manager import AgentManager
from .recovery import RestoreReport, adopt_tree, record_result
from .recovery import restore as restore_runs
from .remote import RemoteAgents, routed, workers_model
from .result import RunResult
from .retention import Retention
from .status import Outcome, Status
from .structured import output_spec
from .sweeper import Sweeper
from .team_handle import Team
from .teams import restore_teams, team_service
from .waiting import wait_stored

__all__ = ["AgentHandle", "AgentSummary", "Runtime"]


class Runtime:
    """Runs agents and their sub-agents.  Use it as ``async with Runtime(...) as rt``.

    ``engine="temporal://..."`` (or ``[engine] url``, ``SUBAGENTS_ENGINE``): the agents run on Temporal workers
    and the lifecycle methods go there (:mod:`subagents.runtime.remote`); no model is needed on this side.
    """

    def __init__(
        self,
        model: Model | str | None = None,
        *,
        workdir: str | os.PathLike[str] = ".",
        settings: Settings | None = None,
        store: Store | str | None = None,
        max_threads: int | None = None,
        when_full: str | None = None,
        max_depth: int | None = None,
        agents: Sequence[AgentDefinition] = (),
        tools: Sequence[Tool | Callable[..., Any]] = (),
        system_prompt: str | None = None,
        limits: Limits | None = None,
        on_event: EventCallback | None = None,
        builtin_tools: bool = True,
        permission_mode: str | None = None,
        approver: Approver | None = None,
        hooks: Mapping[str, Sequence[Any]] | None = None,
        sandbox: SandboxPolicy | str | None = None,
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        telemetry: Any = None,
        engine: str | None = None,
        trust_project: bool | None = None,
    ) -> None:
        root = Path(workdir)
        if not root.is_dir():
            raise UserError(f"workdir {str(root)!r} is not a directory; pass an existing project directory")
        self.workdir = root.resolve()
        self.settings = settings or load_settings(self.workdir, trust=trust_project, overrides={
            "max_threads": max_threads, "when_full": when_full, "max_depth": max_depth,
            "permission_mode": permission_mode, "sandbox_mode": sandbox if isinstance(sandbox, str) else None})
        s = self.settings
        apply_arguments(s, max_threads=max_threads, max_depth=max_depth, when_full=when_full,
                        permission_mode=permission_mode)
        self.prices = PriceTable(s.pricing)  # this runtime's prices: [pricing] over the built-in table
        self.engine_url = engine if engine is not None else s.engine_url  # None: agents run in this process
        spec = model if model is not None else s.model_default
        if spec is None and not self.engine_url:
            raise ConfigError(NO_MODEL_HELP)
        self.clients = ClientPool()
        """The SDK clients of this runtime's models: one per server and key, closed by :meth:`aclose`."""
        remote = bool(self.engine_url)  # then a model string is the workers' to resolve (run's default model)
        self.model = workers_model() if spec is None or remote else wiring.resolve_with(s.providers, self.clients, spec)
        self.store: Store = store if store is not None and not isinstance(store, str) else open_store(
            store if isinstance(store, str) else s.store_url, self.workdir)
        if (start_writer := getattr(self.store, "start_writer", None)) is not None:
            start_writer()  # (SQLite) its writer process gets ready while the rest is set up
        self.bus = EventBus()
        if on_event is not None:
            self.bus.on(on_event)
        self.definitions: DefinitionSet = load_definitions(self.workdir, session=agents, trusted=s.trusted)
        policy = sandbox if isinstance(sandbox, SandboxPolicy) else SandboxPolicy.from_settings(s)
        store_path = getattr(self.store, "path", None)
        self.workspace = Workspace(self.workdir, policy, store_files=[store_path] if store_path else ())
        builtins = wiring.builtin_tools_for(self.workdir, self.model, allow_private_hosts=s.web_allow_private_hosts
                                     ) if builtin_tools else []
        universe = [*builtins, *AGENT_TOOLS, *TEAM_TOOLS, *as_tools(tools)]
        for t in universe:  # a bad schema is refused here, naming the tool (compiled once per schema)
            check_schema(t.parameters, tool=t.name)
        self.manager = AgentManager(
            definitions=self.definitions, tools=universe, model=self.model,
            resolve_model=functools.partial(wiring.resolve_with, s.providers, self.clients),  # no cycle through self
            workspace=self.workspace, store=self.store, bus=self.bus,
            settings=wiring.manager_settings(s, system_prompt, limits, self.prices),
            control_factory=ManagerControl,
        )
        from ..sandbox.shell import ShellSandbox  # loaded with the first Runtime, not on `import subagents`

        self.manager.sandbox = ShellSandbox(self.workspace, policy)
        if self.sandbox_warning:
            warnings.warn(UnconfinedShellWarning(self.sandbox_warning), stacklevel=2)
        self.manager.authority = wiring.build_authority(
            s, approver=approver, hooks=hooks, mgr=self.manager, bus=self.bus, store=self.store,
            shell_confined=policy.mode != "off", allow=allow, deny=deny)
        self._closed = False
        self.manager.retention = Retention(self.manager)
        self.mcp: Any = wiring.attach_mcp(self.manager, self.workdir, policy, s, self.definitions.by_name.values())
        """The runtime's MCP servers (``None``: none configured); each starts with the first agent that may use it."""
        self.tracing: Any = wiring.build_tracing(telemetry, s, self.bus, self.store)
        """The OpenTelemetry span builder when tracing is on (``[telemetry]``, ``telemetry=``), else None."""
        self.remote = RemoteAgents(self.engine_url, store=self.store, bus=self.bus, executor=self.manager.executor,
                                   default_limits=self.manager.cfg.default_limits,
                                   model=model if isinstance(model, str) else None,
                                   authority=self.manager.authority) if self.engine_url else None
        self.sweeper = Sweeper(self.store, self.manager, archive_after_minutes=s.archive_after_minutes)
        self._sweeper_task: RunHandle[None] | None = None
        self._restored = False
        self._in_run_sync = False

    @property
    def sandbox_warning(self) -> str | None:
        """A loud sentence when the shell runs unconfined (``[sandbox] mode = "off"``), else ``None``."""
        warning: str | None = self.manager.sandbox.warning
        return warning

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> Runtime:
        try:
            await self.restore()
        except BaseException:  # (no __aexit__ follows: the store's writer process and the store are closed here)
            await self.aclose()
            raise
        if self._sweeper_task is None and self.remote is None:
            self._sweeper_task = self.manager.executor.start_service("subagents-sweeper", self.sweeper.run)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @routed
    async def restore(self) -> RestoreReport | None:
        """Take over the runs a dead process left unfinished (once; see :mod:`subagents.runtime.recovery`).

        Called by ``async with`` and before the first run or spawn; returns ``None`` after the first call.
        """
        if self._restored:
            return None
        self._restored = True
        restore_teams(self.manager)  # teams' agents come back with their roles
        return restore_runs(self.manager, on_restart=self.settings.on_restart)

    async def aclose(self) -> None:
        """Close every agent still running, flush and close the store."""
        if self._closed:
            return
        self._closed = True
        if self._sweeper_task is not None:
            task, self._sweeper_task = self._sweeper_task, None
            await self.manager.executor.stop_service(task)
        if self.remote is not None:
            await self.remote.aclose()
        await self.manager.shutdown()
        await self.manager.executor.aclose()
        if self.mcp is not None:
            await self.mcp.aclose()  # the MCP servers stop with the runtime (no agent is left to call them)
        await self.clients.aclose()  # the models' connections (no call is left running)
        self.store.flush()  # before the bus closes: held events are published only once committed
        self.bus.close()
        if self.tracing is not None:  # ends the spans still open, flushes the exporter (a thread: a dead
            await self.tracing.aclose()  # collector takes ~15-20 s, and other runtimes on this loop go on)
        self.store.close()

    def interrupting(self, why: str) -> None:
        """From now on, agents closed by a shutdown end as ``interrupted`` (resumable), not ``cancelled``.

        For a process being stopped (a signal): ``why`` says by what, e.g. ``"SIGTERM"``.  A team's teammates are
        left unfinished instead, as a crash leaves them: the next Runtime on the store resumes them (docs/teams.md).
        """
        self.manager.stop_as = (Outcome.INTERRUPTED, f"interrupted: the process was stopped ({why}) before this "
                                "agent finished; resume it with: subagents runs resume <id> <message>")

    # -- running --------------------------------------------------------------------------------
    @routed
    async def run(self, prompt: str, agent: str = "general-purpose", *, limits: Limits | None = None,
                  model: Model | str | None = None, output_type: Any = None,
                  output_schema: Mapping[str, Any] | None = None) -> RunResult:
        """Run a root agent to the end and return its result (limits stop it with partial work).

        ``output_type`` (a pydantic model class) or ``output_schema`` (a JSON schema): the agent must end
        with a valid ``final_result`` call; ``result.output`` is the validated value, ``result.text`` its JSON."""
        spec = output_spec(output_type, output_schema)
        node = self._spawn(agent_type=agent, prompt=prompt, limits=limits, model=model, background=False, inline=True)
        self.manager.recorder.attach_output(node, spec)
        return await self.manager.wait_one(node)

    async def events_delivered(self) -> None:
        """Return once every event published so far has reached the listeners.

        Events that announce a status are held until the store has committed it (see
        docs/durability.md), so they may reach ``on_event`` / ``rt.events()`` a moment after
        :meth:`run` returned; await this before you print a run's result after its events.
        """
        if self.bus.active:
            await wiring.until_committed(self.store)

    def run_sync(self, prompt: str, agent: str = "general-purpose", *, limits: Limits | None = None,
                 model: Model | str | None = None, output_type: Any = None,
                 output_schema: Mapping[str, Any] | None = None) -> RunResult:
        """:meth:`run` from synchronous code (starts and ends its own event loop)."""
        async def go() -> RunResult:
            self._in_run_sync = True  # no restore here: its loop ends with this call and would cancel them
            try:
                return await self.run(prompt, agent, limits=limits, model=model, output_type=output_type,
                                      output_schema=output_schema)
            finally:
                self._in_run_sync = False
                if self.remote is not None:  # its event reader belongs to this call's event loop
                    await self.remote.aclose()
                await self.manager.shutdown(closing=False)
                if self.mcp is not None:  # their connections belong to this call's event loop
                    await self.mcp.aclose()
                self.store.flush()

        return asyncio.run(go())

    @routed
    async def spawn(self, prompt: str, agent: str = "general-purpose", *, background: bool = True,
                    label: str | None = None, limits: Limits | None = None, model: Model | str | None = None,
                    parent: str | None = None, cleanup: str = "keep", isolation: str | None = None,
                    output_type: Any = None, output_schema: Mapping[str, Any] | None = None) -> AgentHandle:
        """Start an agent and return its handle at once (``parent``: spawn it as that agent's child;
        ``isolation="worktree"``: in its own git worktree; ``output_type``/``output_schema``: as for :meth:`run`)."""
        spec = output_spec(output_type, output_schema)
        node = self._spawn(agent_type=agent, prompt=prompt, limits=limits, model=model, background=background,
                           label=label, parent=parent, cleanup=cleanup, isolation=isolation)
        self.manager.recorder.attach_output(node, spec)
        return AgentHandle(node.id, node.nickname, node.info.agent_type,
                           queued=self.manager.slots.ahead(node) is not None)

    def _spawn(self, *, agent_type: str, prompt: str, limits: Limits | None, model: Model | str | None,
               background: bool, label: str | None = None, parent: str | None = None, cleanup: str = "keep",
               isolation: str | None = None, inline: bool = False) -> Any:
        if self._closed:
            raise UserError("this Runtime is closed; create a new one")
        if not self._restored and not self._in_run_sync:
            self._restored = True
            restore_teams(self.manager)  # (as restore() does: teams' agents come back with their roles)
            restore_runs(self.manager, on_restart=self.settings.on_restart)
        p = self.manager.find(parent) if parent is not None else None
        if parent is not None and p is None:
            raise SpawnError(f"no agent with id or nickname {parent!r} to spawn under")
        parent_id = p.id if p is not None else None
        node = self.manager.spawn(agent_type=agent_type, prompt=prompt, parent_id=parent_id, limits=limits,
                                  model=model, background=background, label=label, cleanup=cleanup,
                                  isolation=isolation, inline=inline)
        if parent_id is None and self.tracing is not None:
            self.tracing.adopt_caller(node.id)  # under the caller's current OpenTelemetry span, if any
        return node

    @routed
    async def send_input(self, agent_id: str, message: str) -> None:
        """Deliver ``message`` to a running agent at its next tool boundary."""
        self.manager.send_input(agent_id, message)

    @routed
    async def wait(self, agent_ids: Sequence[str] | None = None, timeout: float | None = None) -> dict[str, RunResult]:
        """Wait for agents (all unfinished ones when ``agent_ids`` is None); unfinished ones are absent."""
        if agent_ids is None:
            ids = [n.id for n in self.manager.nodes.values() if not n.status.is_final()]
            return (await self.manager.wait(ids, timeout))[0]
        here = [r for r in agent_ids if self.manager.find(r) is not None]
        stored = [rec for r in agent_ids if r not in here and (rec := self._stored(r)) is not None]
        if len(here) + len(stored) < len(agent_ids):  # unknown everywhere: the manager says which, clearly
            self.manager.tree.require(next(r for r in agent_ids if r not in here and self._stored(r) is None))
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        results = (await self.manager.wait(here, timeout))[0] if here else {}
        results.update(await wait_stored(self.store, [rec.run_id for rec in stored], deadline, record_result))
        return results

    @routed
    async def close(self, agent_id: str) -> RunResult:
        """Close an agent and its descendants; returns its (partial) result."""
        return await self.manager.close(agent_id)

    @routed
    async def resume(self, agent_id: str, message: str, *, limits: Limits | None = None) -> AgentHandle:
        """Reopen a finished agent with its whole conversation (queued announcements first).

        ``message`` may be empty when announcements are queued for the agent: they are then its whole
        next turn (how ``subagents chat`` answers a background completion while the person is idle)."""
        if self._closed:  # (its agents, store and model connections are gone)
            raise UserError("this Runtime is closed; create a new one")
        if self.manager.find(agent_id) is None:  # evicted from memory, or from an earlier process
            rec = self._stored(agent_id)
            if rec is not None and rec.is_final:
                adopt_tree(self.manager, self.store, rec.root_id or rec.run_id)
        node = self.manager.resume(agent_id, message, limits=limits)
        return AgentHandle(node.id, node.nickname, node.info.agent_type)

    def _stored(self, agent_id: str) -> RunRecord | None:
        self.store.flush()
        return self.store.get_run(agent_id)

    @routed
    def status(self, agent_id: str) -> Status:
        s = self.manager.status(agent_id)
        if s is Status.NOT_FOUND and (rec := self._stored(agent_id)) is not None:
            return Status(rec.status)
        return s

    @routed
    def result(self, agent_id: str) -> RunResult | None:
        """The full result of a finished agent (``None`` while it runs or when unknown; from the store once evicted)."""
        node = self.manager.find(agent_id)
        if node is not None:
            return node.result if node.status.is_final() else None
        rec = self._stored(agent_id)
        return record_result(rec) if rec is not None and rec.is_final else None

    def runs(self, *, include_archived: bool = False) -> list[RunRecord]:
        """Run records from the store."""
        self.store.flush()
        return self.store.list_runs(include_archived=include_archived)

    @routed
    def agents(self) -> list[AgentSummary]:
        """Every agent this runtime started, with its status."""
        return [AgentSummary(n.id, n.nickname, n.info.agent_type, n.status, n.depth, n.parent_id, n.label)
                for n in self.manager.nodes.values()]

    # -- teams (runtime/team_handle.py) ----------------------------------------------------------
    @routed
    def team(self, name: str) -> Team:
        """The team ``name`` (made by a model's ``team_create`` or :meth:`create_team`); ``TeamError`` if none."""
        svc = team_service(self.manager)
        return Team(svc, svc.team(name).name)

    @routed
    def create_team(self, name: str, description: str = "") -> Team:
        """A new team that you lead from Python (``team.spawn``, ``team.add_task``, ``team.send``...)."""
        svc = team_service(self.manager)
        return Team(svc, svc.create_team(check_name("team", name), "", description).name)

    # -- shared context -------------------------------------------------------------------------
    @routed
    def brief(self, text: str) -> None:
        """Set the briefing every future sub-agent's system prompt carries."""
        self.manager.cfg.briefing = text

    @routed
    def note(self, text: str) -> None:
        """Append an entry to the shared notepad (future sub-agents see the latest entries)."""
        self.manager.notepad.append(text)

    @routed
    def set_model_override(self, agent_type: str, model: Model | str | None) -> None:
        """Use ``model`` for future spawns of ``agent_type`` (``None`` removes the override)."""
        self.manager.set_model_override(agent_type, model)

    def events(self) -> AsyncIterator[Event]:
        """Every event from now on, in order, until the runtime closes."""
        return self.bus.subscribe()
