"""``ToolContext``: what a running tool may reach — the calling agent, its workspace, the shared handles.

Seed 001's context propagation: a child's context inherits from its parent's — ``depth`` is the
parent's + 1, ``team_name`` and ``sandbox_level`` are inherited, ``agent_name`` comes from its role
(its agent type, or its name in a team), ``is_team_lead`` is false until it leads a team, and
``todo_store``, ``notepad`` and the runtime's ``model_overrides`` are handles shared by the tree.
:meth:`ToolContext.shared_fields` is the same facts as JSON-ready data (what hooks are told).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..models.base import AgentInfo
from ..sandbox.workspace import Workspace

if TYPE_CHECKING:
    from .control import AgentControl
    from .todo_store import TodoStore

__all__ = ["SANDBOX_LEVELS", "ToolContext"]

SANDBOX_LEVELS = ("read-only", "workspace-write", "danger-full-access")
"""What :attr:`ToolContext.sandbox_level` may be: the shell sees the workspace read-only (plan mode), may
write inside it, or runs unconfined (``[sandbox] mode = "off"``)."""


@dataclass(slots=True)
class ToolContext:
    """What a running tool may reach: the calling agent, its workspace, shared state.

    ``control`` is the small interface to the agent manager used by the sub-agent tools; it is
    ``None`` when an agent runs without a manager.  ``sandbox`` runs the shell's commands confined
    (``None``: a default sandbox for ``workspace``); ``shell_writable`` is ``False`` in plan mode,
    where the shell sees the workspace read-only.

    ``todos`` is this agent's own todo list; ``todo_store`` (``None`` without a manager) holds the
    lists of its whole tree, ``notepad`` the runtime's shared notepad (entries children see in their
    prompts).  ``team_name`` / ``agent_name`` / ``is_team_lead`` say where the agent stands in a team
    (``agent_name`` defaults to its agent type); ``model_overrides`` is the runtime's live override map
    (agent type -> model), read-only.
    """

    agent: AgentInfo
    workspace: Workspace
    todos: list[dict[str, Any]] = field(default_factory=list)
    control: AgentControl | None = None
    bash_timeout_s: float = 120.0
    state: dict[str, Any] = field(default_factory=dict)
    sandbox: Any = None
    shell_writable: bool = True
    todo_store: TodoStore | None = None
    notepad: list[str] | None = None
    team_name: str | None = None
    agent_name: str = ""
    is_team_lead: bool = False
    model_overrides: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.agent_name:
            self.agent_name = self.agent.agent_type

    @property
    def depth(self) -> int:
        """How deep the agent is in its tree (0: a root, 1: its child...)."""
        return self.agent.depth

    @property
    def sandbox_level(self) -> str:
        """One of :data:`SANDBOX_LEVELS`: how far the agent's shell commands may reach."""
        policy = getattr(self.sandbox, "policy", None) or getattr(self.workspace, "policy", None)
        if getattr(policy, "mode", None) == "off":
            return "danger-full-access"
        return "workspace-write" if self.shell_writable else "read-only"

    def shared_fields(self) -> dict[str, Any]:
        """Seed 001's context fields as JSON-ready data (models named by their ``name``)."""
        return {
            "depth": self.depth,
            "team_name": self.team_name,
            "agent_name": self.agent_name,
            "is_team_lead": self.is_team_lead,
            "sandbox_level": self.sandbox_level,
            "model_overrides": {k: v if isinstance(v, str) else str(getattr(v, "name", "") or type(v).__name__)
                                for k, v in self.model_overrides.items()},
        }
