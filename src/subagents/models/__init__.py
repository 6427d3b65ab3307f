"""Models: the protocol, the scripted ``FunctionModel`` and ``provider:model`` resolution.

Provider adapters (``anthropic``, ``openai``) are imported lazily by :func:`resolve_model`, so
``import subagents`` never loads a provider SDK.
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
