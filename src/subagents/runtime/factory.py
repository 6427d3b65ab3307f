"""``AgentFactory``: a definition plus its parent's authority -> the new agent's mode, tool fence and prompt.

A child's authority is computed from its parent's, never from the runtime's universe of tools:

- tools: (parent's tools) ∩ (the definition's allowlist, if any) − (its denylist), minus the
  spawning tools past ``max_depth``; a root starts from the runtime's tools. "Parent's tools" are
  the tools it may call plus those it holds for its children (``delegate_tools``: a coordinator
  holds the file tools without calling them), and a holder gets no more than its own parent had;
- permission mode: :func:`~subagents.authority.permissions.narrow_mode` (never wider than the
  parent's; a ``yolo`` parent makes the child ``yolo``); a root's parent is the runtime's mode;
- a ``plan``-mode parent may spawn only read-only agent types (no file-editing tool in the fence).

What was narrowed is returned as notes, so the spawn tool's result can tell the model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ..authority.permissions import MODE_PROMPTS, narrow_mode
from ..definitions.model import AgentDefinition
from ..definitions.toolcheck import no_usable_tool, tool_warning, unknown_tools
from ..exceptions import ConfigError, SpawnError
from ..messages import Usage
from ..models.base import Model
from ..models.pricing import BUILTIN_PRICES, PriceTable
from ..tools.base import Tool, ToolCategory, ToolRegistry, denied_names
from .limits import Limits
from .prompts import build_system_prompt

__all__ = ["AgentFactory", "Grant", "ManagerSettings", "check_priced"]


class ManagerSettings:
    """The knobs of a manager (filled from :class:`~subagents.config.Settings` by the Runtime)."""

    __slots__ = ("announce_steer", "base_prompt", "bash_timeout_s", "briefing", "child_limits", "default_limits",
                 "max_depth", "max_threads", "permission_mode", "prices", "result_max_chars", "when_full")

    def __init__(self, *, max_threads: int = 4, max_depth: int = 2, result_max_chars: int = 20_000,
                 base_prompt: str = "", briefing: str = "", default_limits: Limits | None = None,
                 bash_timeout_s: float = 120.0, permission_mode: str = "default",
                 child_limits: Limits | None = None, prices: PriceTable | None = None,
                 when_full: str = "refuse", announce_steer: bool = True) -> None:
        if max_threads < 1:
            raise ConfigError(f"max_threads must be at least 1, got {max_threads}")
        if when_full not in ("refuse", "queue"):
            raise ConfigError(f"when_full must be 'refuse' or 'queue', got {when_full!r}")
        if max_depth < 0:
            raise ConfigError(f"max_depth must be 0 or more, got {max_depth}")
        self.max_threads = max_threads
        self.max_depth = max_depth
        self.result_max_chars = result_max_chars
        self.base_prompt = base_prompt
        self.briefing = briefing
        self.default_limits = default_limits or Limits()  # a root's limits when none are given
        self.child_limits = child_limits or Limits()  # a sub-agent's, before its definition's and the spawn's
        self.bash_timeout_s = bash_timeout_s
        self.permission_mode = permission_mode
        self.prices = prices or BUILTIN_PRICES  # the runtime's [pricing] over the built-in table
        self.when_full = when_full  # over max_threads: refuse the spawn, or queue a background one
        self.announce_steer = announce_steer  # [announce] steer: background results steer a running parent



@dataclass(slots=True)
class Grant:
    """What a new agent may do: its permission mode, its fenced registry (shared by the agents with the same
    fence: a registry is immutable once built), and notes."""

    mode: str
    registry: ToolRegistry
    notes: list[str] = field(default_factory=list)


class AgentFactory:
    """Computes fences (cached per type, depth class and parent fence) and layered system prompts."""

    __slots__ = ("_checked", "_limits", "_models", "_prompts", "_registries", "_resolve", "max_depth", "mcp_servers",
                 "model", "overrides", "overrides_view", "runtime_mode", "spawn_tools", "tools", "workdir")

    def __init__(self, tools: Sequence[Tool], *, max_depth: int, runtime_mode: str, workdir: str,
                 model: Model | None = None, resolve_model: Callable[[str], Model] | None = None) -> None:
        self.tools = list(tools)
        self.model = model  # the runtime's default model
        self._resolve = resolve_model
        self.overrides: dict[str, Model | str] = {}  # agent type -> model (``set_model_override``)
        self.overrides_view = MappingProxyType(self.overrides)  # read-only, shared by every agent's context
        self._models: dict[str, Model] = {}
        self.max_depth = max_depth
        self.runtime_mode = runtime_mode
        self.workdir = workdir
        self.spawn_tools = frozenset(t.name for t in self.tools if t.category is ToolCategory.AGENT)
        self._registries: dict[tuple[str, bool, bool, int], tuple[ToolRegistry, tuple[str, ...], object]] = {}
        self._prompts: dict[tuple[object, ...], str] = {}
        self._limits: dict[tuple[object, ...], Limits] = {}
        # the configured MCP servers' names (``None``: unknown, then ``mcp__*`` tool names are not checked)
        self.mcp_servers: frozenset[str] | None = None
        # (type, id(definition)) -> unknown tool names, and the definition (kept alive: its id is not reused)
        self._checked: dict[tuple[str, int], tuple[tuple[str, ...], AgentDefinition]] = {}

    def model_for(self, d: AgentDefinition, parent_model: Model | None, override: Model | str | None) -> Model:
        """The spawn argument > the runtime's override for the type > the definition's > the parent's > the default."""
        choice: Model | str | None = override if override is not None else self.overrides.get(d.name)
        if choice is None and d.model != "inherit":
            choice = d.model
        if choice is None:
            model = parent_model or self.model
            if model is None:
                raise SpawnError("no model is configured; pass Runtime(model=...) or set [model] default")
            return model
        if not isinstance(choice, str):
            return choice
        m = self._models.get(choice)
        if m is None:
            if self._resolve is None:
                raise SpawnError(f"agent type {d.name!r} names the model {choice!r}, and no resolver is configured")
            try:
                m = self._resolve(choice)
            except ConfigError as e:
                raise SpawnError(f"agent type {d.name!r}: {e}") from None
            self._models[choice] = m
        return m

    def limits(self, base: Limits, d: AgentDefinition) -> Limits:
        """``base`` overridden by the definition's limits (cached by value: no Limits built per spawn)."""
        key = (base, d.max_turns, d.max_tokens, d.timeout_s, d.max_cost_usd)
        out = self._limits.get(key)
        if out is None:
            if len(self._limits) >= 256:
                self._limits.clear()
            out = self._limits[key] = base.merged(d.limits())
        return out

    def authority(self, d: AgentDefinition, parent_mode: str | None, parent_registry: ToolRegistry | None,
                  depth: int) -> Grant:
        """The mode and fence of a new agent of type ``d`` (``parent_*`` ``None`` for a root)."""
        unknown = self.check_tools(d)
        mode, note = narrow_mode(parent_mode or self.runtime_mode, d.permission_mode)
        registry, notes = self._registry(d, parent_registry, depth >= self.max_depth, mode == "plan")
        if unknown:
            notes = (*notes, f"tools its definition lists that do not exist here were left out: {', '.join(unknown)}")
        if parent_mode == "plan":
            editing = [n for n, t in registry.allowed.items() if t.category is ToolCategory.EDIT]
            if editing:
                raise SpawnError(
                    f"agent type {d.name!r} can edit files ({', '.join(editing)}), and an agent in permission "
                    "mode 'plan' may spawn only read-only agent types (such as explore or plan); pick one of "
                    "those, or do the reading yourself")
        return Grant(mode, registry, [note, *notes] if note else list(notes))

    def check_tools(self, d: AgentDefinition) -> tuple[str, ...]:
        """The names in ``d``'s tool lists that name no tool here (built-in types are not checked: a runtime
        with fewer tools narrows them silently); warns once per definition, and raises
        :class:`SpawnError` when ``d`` lists tools and none of them exists (not a silent tool-less agent)."""
        key = (d.name, id(d))
        hit = self._checked.get(key)
        if d.source == "builtin":  # ours: a runtime built with fewer tools (builtin_tools=False) narrows them
            return ()
        if hit is not None:
            unknown = hit[0]
        else:
            known = {t.name for t in self.tools}
            missing = unknown_tools(d, known, mcp_servers=self.mcp_servers)
            unknown = tuple(n for n, _ in missing)
            warning = tool_warning(d, known, mcp_servers=self.mcp_servers)  # (also: a misspelt disallowed name)
            if warning:
                logging.getLogger("subagents.runtime").warning("%s", warning)
            self._checked[key] = (unknown, d)
        if unknown and no_usable_tool(d, unknown):
            have = ", ".join(sorted(t.name for t in self.tools)) or "none"
            raise SpawnError(
                f"agent type {d.name!r} ({d.source}) has no usable tool: its definition lists "
                f"{', '.join(d.tools or ())}, and none of them exists here (tools here: {have}). "
                "Fix its 'tools:' line, or remove it to give the agent every tool")
        return unknown

    def _registry(self, d: AgentDefinition, parent: ToolRegistry | None, at_max_depth: bool, plan: bool
                  ) -> tuple[ToolRegistry, tuple[str, ...]]:
        key = (d.name, at_max_depth, plan, id(parent.grantable) if parent is not None else 0)
        hit = self._registries.get(key)
        if hit is not None:
            return hit[0], hit[1]
        universe = {t.name: t for t in self.tools}
        deny = denied_names(d.disallowed_tools, universe) | (self.spawn_tools if at_max_depth else set())
        source = parent.grantable if parent is not None else universe  # what this agent's authority is cut from
        hold = self._held(d, source, at_max_depth, plan)
        if parent is None:
            template = ToolRegistry(self.tools, allow=d.tools, deny=deny, agent_type=d.name, hold=hold)
            notes: tuple[str, ...] = ()
        else:
            base = ([n for n in d.tools if n in source] if d.tools is not None  # team tools: by name only
                    else [n for n, t in source.items() if t.category is not ToolCategory.TEAM])
            template = ToolRegistry(self.tools, allow=base, deny=deny, agent_type=d.name, hold=hold)
            missing = [n for n in (d.tools or ()) if n in universe and n not in source and n not in deny]
            notes = (f"tools its definition lists but its parent does not have were left out: {', '.join(missing)}",
                     ) if missing else ()
        # keep the parent's fence alive with the entry, so its id() cannot be reused for another fence
        self._registries[key] = (template, notes, parent.grantable if parent is not None else None)
        return template, notes

    @staticmethod
    def _held(d: AgentDefinition, source: dict[str, Tool], at_max_depth: bool, plan: bool) -> list[str]:
        """The tools ``d`` holds for its sub-agents: none past ``max_depth`` (it cannot spawn), no editing
        tool in plan mode (a plan-mode agent may spawn only read-only types)."""
        if not d.delegate_tools or at_max_depth:
            return []
        names = ([n for n, t in source.items() if t.category is not ToolCategory.TEAM]
                 if "*" in d.delegate_tools else [n for n in d.delegate_tools if n in source])
        return [n for n in names if not (plan and source[n].category is ToolCategory.EDIT)]

    def system_prompt(self, base: str, d: AgentDefinition, *, is_child: bool, mode: str, briefing: str,
                      notes: tuple[str, ...], workdir: str | None = None) -> str:
        """The layered system prompt; identical layers give the very same string (shared, not rebuilt)."""
        workdir = workdir or self.workdir
        key = (base, d.name, d.system_prompt, is_child, mode, briefing, notes, workdir)
        system = self._prompts.get(key)
        if system is None:
            if len(self._prompts) >= 256:
                self._prompts.clear()
            system = self._prompts[key] = build_system_prompt(
                base, d.system_prompt, workdir=workdir, is_child=is_child, briefing=briefing, notes=notes,
                mode_line=MODE_PROMPTS.get(mode, ""))
        return system


def check_priced(model: Model, limits: Limits, prices: PriceTable = BUILTIN_PRICES) -> None:
    """Refuse a cost limit the runtime could not enforce: ``model`` has no known price."""
    if limits.max_cost_usd is None or prices.cost_of(model, Usage(1000, 1000)) is not None:
        return
    name = str(getattr(model, "name", "") or type(model).__name__)
    raise SpawnError(
        f"max_cost_usd={limits.max_cost_usd} cannot be enforced: the model {name!r} has no known price. Set it in "
        f'.subagents/config.toml as [pricing."{name}"] input = ..., output = ... (USD per million tokens), '
        "or run without a cost limit")
