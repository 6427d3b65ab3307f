"""Builds a runtime's :class:`~subagents.authority.guard.Authority` (and its tracing) from its settings and arguments.

The rules come from ``[permissions] allow / ask / deny`` (with the file each came from, so a refusal
can name it), the approver from ``Runtime(approver=...)`` (the CLI passes its terminal prompt), the
hooks from ``[[hooks.<Event>]]`` tables and ``Runtime(hooks=...)``.  Events and audit records go to
the runtime's bus and store.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..authority.approvals import ApprovalBroker, Approver
from ..authority.guard import Authority
from ..authority.permissions import Permissions
from ..authority.rules import Rule, parse_rule
from ..config import Settings
from ..definitions.model import AgentDefinition
from ..exceptions import ConfigError, UntrustedProjectWarning, UserError
from ..models.base import AgentInfo, Model
from ..models.clients import ClientPool
from ..models.pricing import PriceTable
from ..models.resolve import resolve_model
from ..store.base import Store
from ..tools.base import Tool
from ..trust import untrusted_note
from .events import Event, EventBus
from .factory import ManagerSettings
from .limits import Limits
from .prompts import DEFAULT_BASE_PROMPT

if TYPE_CHECKING:
    from .manager import AgentManager

__all__ = ["attach_mcp", "build_authority", "build_tracing", "builtin_tools_for", "manager_settings",
           "resolve_with", "until_committed"]


def manager_settings(s: Settings, system_prompt: str | None, limits: Limits | None, prices: PriceTable
                     ) -> ManagerSettings:
    """The manager's knobs from the runtime's settings and arguments."""
    return ManagerSettings(
        max_threads=s.max_threads, max_depth=s.max_depth, result_max_chars=s.result_max_chars,
        base_prompt=system_prompt if system_prompt is not None else DEFAULT_BASE_PROMPT,
        briefing=s.briefing, bash_timeout_s=s.bash_timeout_s,
        default_limits=Limits(max_turns=s.root_max_turns or None).merged(limits),
        child_limits=Limits(max_turns=s.child_max_turns or None), permission_mode=s.permission_mode,
        prices=prices, when_full=s.when_full, announce_steer=s.announce_steer)


def builtin_tools_for(workdir: Path, model: Model, *, allow_private_hosts: Collection[str] = ()) -> list[Tool]:
    """The built-in tools of a runtime over ``workdir`` (``web_search`` too when ``model`` can search;
    ``allow_private_hosts``: the private hosts ``web_fetch`` may reach, ``[web] allow_private_hosts``)."""
    from ..tools.builtin import builtin_tools  # loaded with the first Runtime, not on `import subagents`
    from ..tools.web_search import supports_web_search, web_search_tool

    search = [web_search_tool(cast(Any, model))] if supports_web_search(model) else []
    return [*builtin_tools(workdir, allow_private_hosts=allow_private_hosts), *search]


async def until_committed(store: Store) -> None:
    """Return once what ``store`` was given so far is committed (and the event gates queued before it opened)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def committed() -> None:  # runs after the gates queued before it opened (same writer, same order)
        loop.call_soon_threadsafe(lambda: None if fut.done() else fut.set_result(None))

    if store.on_commit(committed):
        store.hurry()  # someone waits: no point gathering more for this batch
        await fut


def resolve_with(providers: Mapping[str, Mapping[str, Any]], clients: ClientPool, spec: Model | str) -> Model:
    """``spec`` as a model: a string through ``[providers.<name>]`` and the runtime's shared clients."""
    if isinstance(spec, str):
        return resolve_model(spec, providers.get(spec.partition(":")[0].lower(), {}), clients=clients)
    return resolve_model(spec)


def attach_mcp(mgr: AgentManager, workdir: Path, policy: Any, s: Settings, definitions: Iterable[AgentDefinition]
               ) -> Any:
    """The runtime's MCP servers (:class:`subagents.mcp.hub.McpTools`), or ``None`` when none is configured
    (then nothing is imported and no run pays anything).  Each server starts with the first agent that may use
    it: ``mgr.prepare`` gives a starting agent the tools of the servers it may use."""
    from ..mcp import open_mcp  # imports no SDK unless servers are configured
    from ..mcp.config import definition_servers

    def own(d: AgentDefinition) -> Mapping[str, Any]:  # an untrusted project's definitions start no server
        return d.extra if s.trusted or not d.source.startswith("project:") else {}

    skipped = {} if s.trusted else {
        f"MCP servers of agent type {d.name!r}": d.source.partition(":")[2] for d in definitions
        if d.extra and not own(d) and definition_servers(d.extra, source=d.source)}
    if skipped:
        warnings.warn(UntrustedProjectWarning(untrusted_note(workdir, skipped)), stacklevel=3)
    mcp = open_mcp(workdir, mgr.workspace, policy, settings_servers=s.mcp_servers, mcp_json=s.trusted,
                   definitions=[(own(d), d.source) for d in definitions])
    mgr.factory.mcp_servers = frozenset(mcp.servers) if mcp is not None else frozenset()
    if mcp is None:
        return None

    async def grant(node: Any) -> None:
        parent = mgr.find(node.info.parent_id) if node.info.parent_id else None
        d = node.definition
        node.core.registry = await mcp.grant(
            node.core.registry, tools=d.tools, disallowed=d.disallowed_tools, extra=own(d), source=d.source,
            parent=parent.core.registry if parent is not None else None)

    mgr.prepare = grant
    return mcp


def build_tracing(value: Any, s: Settings, bus: EventBus, store: Store) -> Any:
    """The OpenTelemetry span builder (:class:`subagents.telemetry.Tracing`) when tracing is on, else ``None``
    (then OpenTelemetry is not even imported).  ``value`` is ``Runtime(telemetry=...)``."""
    from ..telemetry.config import resolve  # imports no OpenTelemetry

    cfg = resolve(value, endpoint=s.otlp_endpoint, capture_content=s.capture_content,
                  service_name=s.telemetry_service_name)
    if cfg is None:
        return None
    from ..telemetry import start_tracing  # imports opentelemetry: only when tracing is on

    return start_tracing(cfg, bus.on, store)


def _rules(s: Settings, kind: str, extra: Sequence[str]) -> list[Rule]:
    texts: list[str] = getattr(s, kind)
    source = s.sources.get(f"permissions.{kind}", "")
    out = []
    for t in [*texts, *extra]:
        where = source if t in texts else "argument"
        try:
            out.append(parse_rule(t, where))
        except ValueError as e:
            raise ConfigError(f"[permissions] {kind} ({where}): {e}") from None
    return out


def build_authority(s: Settings, *, approver: Approver | None, hooks: Any, mgr: AgentManager, bus: EventBus,
                    store: Store, shell_confined: bool, interactive: bool = False,
                    allow: Sequence[str] = (), deny: Sequence[str] = ()) -> Authority:
    """The authority every agent guard of one runtime shares."""
    if approver is not None and not callable(approver):
        raise UserError(f"approver must be a function taking an ApprovalRequest and returning a Decision, "
                        f"got {approver!r}")
    permissions = Permissions(allow=_rules(s, "allow", allow), ask=_rules(s, "ask", ()),
                              deny=_rules(s, "deny", deny), shell_confined=shell_confined)
    timeout = s.approval_timeout_s
    broker = ApprovalBroker(approver, timeout_s=timeout)

    def emit(info: AgentInfo, kind: str, data: dict[str, Any]) -> None:
        if bus.active:
            bus.publish(Event(kind, info.id, info.parent_id, info.depth, data, time.time(), info.nickname))

    def audit(run_id: str, kind: str, data: dict[str, Any]) -> None:
        store.add_audit(run_id, kind, data, time.time())

    return Authority(permissions, broker, root=str(mgr.workspace.root), hooks=_hooks(s, hooks, mgr),
                     emit=emit, audit=audit, chain=mgr.tree.chain, hold_clock=mgr.tree.hold_clock,
                     interactive=interactive)


def _hooks(s: Settings, python_hooks: Mapping[str, Sequence[Any]] | None, mgr: AgentManager) -> Any:
    """The runtime's hooks (``None`` when none are configured, so the loop pays nothing for them)."""
    if not s.hooks and not python_hooks:
        return None
    from ..authority.hooks import Hooks

    if python_hooks is not None and not isinstance(python_hooks, Mapping):
        raise UserError("hooks must map an event name to a list of callbacks, e.g. "
                        "Runtime(hooks={'PreToolUse': [check]})")
    sources = {k: v for k, v in s.sources.items() if k.startswith("hooks.")}
    specs = Hooks.from_config(s.hooks, sources=sources).specs if s.hooks else []
    if python_hooks:
        specs = [*specs, *Hooks.from_python(python_hooks).specs]
    return Hooks(specs, cwd=mgr.workspace.root, launcher=mgr.sandbox)
