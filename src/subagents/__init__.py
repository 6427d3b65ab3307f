"""subagents: a fast, sturdy runtime for LLM agents built around the sub-agent.

>>> from subagents import Runtime, Limits
>>> from subagents.models import FunctionModel
>>> rt = Runtime(model=FunctionModel(lambda req: "done"), store="memory://")
>>> rt.run_sync("say done", limits=Limits(max_turns=3)).outcome
<Outcome.OK: 'ok'>
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .authority.approvals import ApprovalRequest, Decision
    from .authority.hooks import HookInput, HookResult
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

#: public name -> the module (relative to this package) it is defined in; each loads on first use
_HOME: dict[str, str] = {
    **dict.fromkeys(("ApprovalRequest", "Decision"), "authority.approvals"),
    **dict.fromkeys(("HookInput", "HookResult"), "authority.hooks"),
    "AgentDefinition": "definitions.model",
    **dict.fromkeys(("ConfigError", "DefinitionError", "LimitExceeded", "ModelError", "SpawnError", "StoreError",
                     "SubagentsError", "ToolError", "UserError"), "exceptions"),
    "Limits": "limits",
    **dict.fromkeys(("Message", "TextBlock", "ToolResultBlock", "ToolUseBlock", "Usage"), "messages"),
    "Event": "runtime.events",
    "RunResult": "runtime.result",
    **dict.fromkeys(("AgentHandle", "AgentSummary", "Runtime"), "runtime.runtime"),
    **dict.fromkeys(("Outcome", "Status"), "runtime.status"),
    **dict.fromkeys(("Tool", "ToolCategory", "ToolContext", "tool"), "tools.base"),
}

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
    """Load a public name, or a subpackage (``subagents.models``), on first use.

    ``import subagents`` itself imports nothing else: the command line (``subagents --help``) and programs that use
    one part do not pay for the runtime's ~250 modules; ``from subagents import Runtime`` loads what it needs."""
    home = _HOME.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f".{home}", __name__), name)
        globals()[name] = value  # (the next lookup is a plain module attribute)
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'subagents' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
