"""``AgentFactory``: a definition plus its parent's authority -> the new agent's mode, tool fence and prompt.

A child's authority is computed from its parent's, never from the runtime's universe of tools:

- tools: (parent's tools) ∩ (the definition's allowlist, if any) − (its denylist), minus the
  spawning tools past ``max_depth``; a root starts from the runtime's tools;
- permission mode: :func:`~subagents.authority.permissions.narrow_mode` (never wider than the
  parent's; a ``yolo`` parent makes the child ``yolo``); a root's parent is the runtime's mode;
- a ``plan``-mode parent may spawn only read-only agent types (no file-editing tool in the fence).

What was narrowed is returned as notes, so the spawn tool's result can tell the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..authority.permissions import MODE_PROMPTS, narrow_mode
from ..definitions.model import AgentDefinition
from ..exceptions import SpawnError
from ..tools.base import Tool, ToolCategory, ToolRegistry
from .prompts import build_system_prompt

__all__ = ["AgentFactory", "Grant"]


@dataclass(slots=True)
class Grant:
    """What a new agent may do: its permission mode, its (own instance of the) fenced registry, and notes."""

    mode: str
    registry: ToolRegistry
    notes: list[str] = field(default_factory=list)


class AgentFactory:
    """Computes fences (cached per type, depth class and parent fence) and layered system prompts."""

    __slots__ = ("_prompts", "_registries", "max_depth", "runtime_mode", "spawn_tools", "tools", "workdir")

    def __init__(self, tools: Sequence[Tool], *, max_depth: int, runtime_mode: str, workdir: str) -> None:
        self.tools = list(tools)
        self.max_depth = max_depth
        self.runtime_mode = runtime_mode
        self.workdir = workdir
        self.spawn_tools = frozenset(t.name for t in self.tools if t.category is ToolCategory.AGENT)
        self._registries: dict[tuple[str, bool, int], tuple[ToolRegistry, list[str], object]] = {}
        self._prompts: dict[tuple[object, ...], str] = {}

    def authority(self, d: AgentDefinition, parent_mode: str | None, parent_registry: ToolRegistry | None,
                  depth: int) -> Grant:
        """The mode and fence of a new agent of type ``d`` (``parent_*`` ``None`` for a root)."""
        mode, note = narrow_mode(parent_mode or self.runtime_mode, d.permission_mode)
        registry, notes = self._registry(d, parent_registry, depth >= self.max_depth)
        if parent_mode == "plan":
            editing = [n for n, t in registry.allowed.items() if t.category is ToolCategory.EDIT]
            if editing:
                raise SpawnError(
                    f"agent type {d.name!r} can edit files ({', '.join(editing)}), and an agent in permission "
                    "mode 'plan' may spawn only read-only agent types (such as explore or plan); pick one of "
                    "those, or do the reading yourself")
        return Grant(mode, registry.clone(), ([note] if note else []) + notes)

    def _registry(self, d: AgentDefinition, parent: ToolRegistry | None, at_max_depth: bool
                  ) -> tuple[ToolRegistry, list[str]]:
        key = (d.name, at_max_depth, id(parent.allowed) if parent is not None else 0)
        hit = self._registries.get(key)
        if hit is not None:
            return hit[0], list(hit[1])
        deny = set(d.disallowed_tools) | (self.spawn_tools if at_max_depth else set())
        if parent is None:
            template = ToolRegistry(self.tools, allow=d.tools, deny=deny, agent_type=d.name)
            notes: list[str] = []
        else:
            universe = {t.name for t in self.tools}
            base = [n for n in (d.tools if d.tools is not None else parent.allowed) if n in parent.allowed]
            template = ToolRegistry(self.tools, allow=base, deny=deny, agent_type=d.name)
            missing = [n for n in (d.tools or ()) if n in universe and n not in parent.allowed and n not in deny]
            notes = [f"tools its definition lists but its parent does not have were left out: {', '.join(missing)}"
                     ] if missing else []
        # keep the parent's fence alive with the entry, so its id() cannot be reused for another fence
        self._registries[key] = (template, notes, parent.allowed if parent is not None else None)
        return template, list(notes)

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
