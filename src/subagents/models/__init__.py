"""Models: the protocol, the scripted ``FunctionModel`` and ``provider:model`` resolution.

Provider adapters (``anthropic``, ``openai``) are imported lazily by :func:`resolve_model`, so
``import subagents`` never loads a provider SDK.  Their SDK clients come from a
:class:`~subagents.models.clients.ClientPool`: one per server, key and event loop, shared by every
model that reaches that server, so calls reuse kept-alive connections.
"""

from __future__ import annotations

from .base import AgentInfo, Model, ModelRequest, ModelResponse, ToolCall, ToolSpec, new_call_id
from .function import FunctionModel
from .resolve import parse_model_string, resolve_model

__all__ = [
    "AgentInfo",
    "FunctionModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ToolCall",
    "ToolSpec",
    "new_call_id",
    "parse_model_string",
    "resolve_model",
]
