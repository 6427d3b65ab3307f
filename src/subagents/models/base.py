"""The model protocol: one async ``request(ModelRequest) -> ModelResponse``."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..messages import Message, Usage

__all__ = [
    "INVALID_ARGUMENTS_KEY",
    "AgentInfo",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ToolCall",
    "ToolSpec",
    "new_call_id",
]

# An adapter that receives tool arguments that are not a JSON object passes them as
# ``{INVALID_ARGUMENTS_KEY: raw_text}``; the tool registry answers the model with a clear error.
INVALID_ARGUMENTS_KEY = "__invalid_json__"

_counter = itertools.count(1)
_prefix = os.urandom(4).hex()


def new_call_id() -> str:
    """A process-unique tool call id (``call_<random>_<n>``)."""
    return f"call_{_prefix}_{next(_counter)}"


@dataclass(slots=True, frozen=True)
class AgentInfo:
    """Who is calling the model: the agent's id, nickname, type, depth and parent."""

    id: str
    nickname: str
    agent_type: str
    depth: int = 0
    parent_id: str | None = None


@dataclass(slots=True, frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of its arguments.

    ``category`` (``read``, ``edit``, ``execute``, ``agent``, ``team``; ``""`` when unknown) is not sent: an
    adapter with prompt caching uses it to put cache breakpoints after the tool groups that agents with
    narrower fences share (the leading read-only tools; everything before the agent tools).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    category: str = ""


@dataclass(slots=True)
class ToolCall:
    """A tool call the model asks for; ``id`` is generated when omitted."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_call_id)


@dataclass(slots=True)
class ModelRequest:
    """Everything a model needs for one call.

    ``on_text`` (optional) receives text deltas as a streaming adapter produces them; adapters
    that do not stream simply never call it.  ``system_prefix`` is the length of the part of
    ``system`` inherited verbatim from the parent agent (its base prompt): an adapter with prompt
    caching puts a cache breakpoint there so parent and children share that cached prefix.
    """

    agent: AgentInfo
    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    on_text: Callable[[str], None] | None = None
    system_prefix: int = 0

    @property
    def last_user_text(self) -> str:
        """The text of the last user message (handy in scripted models)."""
        for m in reversed(self.messages):
            if m.role == "user":
                return m.text
        return ""

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


@dataclass(slots=True)
class ModelResponse:
    """What the model answered: text, tool calls, usage and (optionally) the stop reason."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    stop_reason: str | None = None
    model: str | None = None


@runtime_checkable
class Model(Protocol):
    """Anything with an async ``request``.  ``name`` is used for pricing and display."""

    @property
    def name(self) -> str: ...

    async def request(self, request: ModelRequest) -> ModelResponse: ...
