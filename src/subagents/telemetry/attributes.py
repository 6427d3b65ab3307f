"""Span names and attributes of the OpenTelemetry GenAI semantic conventions, as this package uses them.

https://opentelemetry.io/docs/specs/semconv/gen-ai/ — ``invoke_agent {agent}`` (one span per agent run),
``chat {model}`` (one per model call), ``execute_tool {tool}`` (one per tool call).  Attributes of our
own are under ``subagents.*``.  No OpenTelemetry import here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AGENT_ID", "AGENT_NAME", "COST_USD", "ERROR_TYPE", "FINISH_REASONS", "INPUT_MESSAGES", "OPERATION",
    "OUTPUT_MESSAGES", "PROVIDER", "REQUEST_MODEL", "RESPONSE_MODEL", "TOOL_ARGUMENTS", "TOOL_CALL_ID",
    "TOOL_NAME", "TOOL_RESULT", "TOOL_TYPE", "model_attributes", "text_messages", "usage_attributes",
]

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
COST_USD = "subagents.cost_usd"

_USAGE = (("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens"),
          ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
          ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"))


def usage_attributes(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """``gen_ai.usage.*`` of a usage dict (``Usage.to_dict()``); cache counts only when not zero.

    >>> usage_attributes({"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 0})
    {'gen_ai.usage.input_tokens': 10, 'gen_ai.usage.output_tokens': 2}
    """
    out: dict[str, int] = {}
    if not usage:
        return out
    for key, attr in _USAGE:
        v = usage.get(key)
        if isinstance(v, int) and (v or key in ("input_tokens", "output_tokens")):
            out[attr] = v
    return out


def model_attributes(name: str) -> dict[str, str]:
    """``gen_ai.provider.name`` and ``gen_ai.request.model`` of a model name (``provider:model[@base_url]``).

    >>> model_attributes("anthropic:claude-sonnet-4-5")
    {'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'claude-sonnet-4-5'}
    >>> model_attributes("scripted")
    {'gen_ai.request.model': 'scripted'}
    """
    provider, sep, model = name.partition(":")
    if not sep:
        return {REQUEST_MODEL: name} if name else {}
    return {PROVIDER: provider, REQUEST_MODEL: model.split("@", 1)[0]}


def text_messages(role: str, text: str) -> str:
    """A one-message ``gen_ai.input.messages`` / ``gen_ai.output.messages`` value (JSON, the conventions' shape).

    >>> text_messages("user", "hi")
    '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'
    """
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}], ensure_ascii=False)
