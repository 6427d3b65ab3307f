"""subagents: a fast, sturdy runtime for LLM agents built around the sub-agent.

>>> from subagents import Runtime, Limits
>>> from subagents.models import FunctionModel
>>> rt = Runtime(model=FunctionModel(lambda req: "done"), store="memory://")
>>> rt.run_sync("say done", limits=Limits(max_turns=3)).outcome
<Outcome.OK: 'ok'>
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .authority.approvals import ApprovalRequest, Decision
from .definitions.model import AgentDefinition
from .exceptions import (
    ConfigError,
    DefinitionError,
    LimitExceeded,
    ModelError,
    SpawnError,
    StoreError,
    SubagentsError,
    ToolError,
    UserError,
)
from .limits import Limits
from .messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from .runtime.events import Event
from .runtime.result import RunResult
from .runtime.runtime import AgentHandle, AgentSummary, Runtime
from .runtime.status import Outcome, Status
from .tools.base import Tool, ToolCategory, ToolContext, tool

if TYPE_CHECKING:
    from .authority.hooks import HookInput, HookResult

__version__ = "0.1.0"

__all__ = [
    "AgentDefinition",
    "AgentHandle",
    "AgentSummary",
    "ApprovalRequest",
    "ConfigError",
    "Decision",
    "DefinitionError",
    "Event",
    "HookInput",
    "HookResult",
    "LimitExceeded",
    "Limits",
    "Message",
    "ModelError",
    "Outcome",
    "RunResult",
    "Runtime",
    "SpawnError",
    "Status",
    "StoreError",
    "SubagentsError",
    "TextBlock",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolError",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "UserError",
    "__version__",
    "tool",
]


def __getattr__(name: str) -> Any:
    """The hook types load on first use (``import subagents`` stays fast)."""
    if name in ("HookInput", "HookResult"):
        from .authority import hooks

        return getattr(hooks, name)
    raise AttributeError(f"module 'subagents' has no attribute {name!r}")
