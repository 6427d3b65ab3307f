"""Span names and attributes of the OpenTelemetry GenAI semantic conventions, as this package uses them.

https://opentelemetry.io/docs/specs/semconv/gen-ai/ — ``invoke_agent {agent}`` (one span per agent run),
``chat {model}`` (one per model call), ``execute_tool {tool}`` (one per tool call).  Attributes of our
own are under ``subagents.*``.  No OpenTelemetry import here.

What goes into a span from a model or a provider is made safe here: content is cut at :data:`MAX_CONTENT`
characters (:func:`clip`; the SDK sets no limit, and a batch waiting for an unreachable collector would hold
it all), credentials are blanked (:func:`redact`: a URL's ``user:password@``, ``sk-...`` keys, bearer tokens,
``api_key=`` parameters), and a tool name or call id that is not a name (a model may send any text) becomes
``"invalid"`` (:func:`name`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AGENT_ID",
    "AGENT_NAME",
    "COST_USD",
    "ERROR_TYPE",
    "FINISH_REASONS",
    "INPUT_MESSAGES",
    "MAX_CONTENT",
    "OPERATION",
    "OUTPUT_MESSAGES",
    "PROVIDER",
    "REQUEST_MODEL",
    "RESPONSE_MODEL",
    "TOOL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "TOOL_RESULT",
    "TOOL_TYPE",
    "clip",
    "model_attributes",
    "name",
    "redact",
    "text_messages",
    "usage_attributes",
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

MAX_CONTENT = 16_000
"""The most characters of content (a prompt, an answer, tool arguments or a result) one attribute holds."""
MAX_ERROR = 1_000
"""The most characters of an error message in a span's status."""
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_SECRETS = (  # (what, replaced by): linear patterns (no nested repetition), applied to text of bounded length
    (re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,20}://)[^\s/?#@]{0,512}@"), r"\1[redacted]@"),
    (re.compile(r"\b(sk-)[A-Za-z0-9_-]{12,}"), r"\1[redacted]"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1[redacted]"),
    (re.compile(r"(?i)([?&;\s\"'](?:api[_-]?key|access[_-]?token|token|key|password|secret)[\"']?\s*[=:]\s*[\"']?)"
                r"[^\s&;\"',}]{4,}"), r"\1[redacted]"),
)

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
    >>> model_attributes("openai:llama@https://me:pw@proxy/v1")["gen_ai.request.model"]
    'llama'
    >>> model_attributes("scripted")
    {'gen_ai.request.model': 'scripted'}
    """
    name = name.split("@", 1)[0]  # a base URL (it may hold a user and password) is no part of the model's name
    provider, sep, model = name.partition(":")
    if not sep:
        return {REQUEST_MODEL: clip(name, 256)} if name else {}
    return {PROVIDER: clip(provider, 256), REQUEST_MODEL: clip(model, 256)}


def text_messages(role: str, text: str) -> str:
    """A one-message ``gen_ai.input.messages`` / ``gen_ai.output.messages`` value (JSON, the conventions' shape).

    >>> text_messages("user", "hi")
    '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'
    """
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": redact(text)}]}], ensure_ascii=False)


def clip(text: str, limit: int = MAX_CONTENT) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out.

    >>> clip("abcdef", 3)
    'abc... [cut: 6 characters in all]'
    """
    return text if len(text) <= limit else _cut(text, limit, len(text))


def _cut(text: str, limit: int, total: int) -> str:
    return f"{text[:limit]}... [cut: {total} characters in all]"


def redact(text: str, limit: int = MAX_CONTENT) -> str:
    """``text`` (cut to ``limit`` characters) with credentials blanked: a URL's ``user:password@``, ``sk-...``
    keys, bearer tokens and ``api_key=...``-like parameters.

    >>> redact("could not reach https://me:pw@proxy/v1 with sk-abcdefghijklmnop")
    'could not reach https://[redacted]@proxy/v1 with sk-[redacted]'
    """
    out = text[:limit + 1024]  # redacted before it is cut: a key across the cut is blanked whole
    for rx, repl in _SECRETS:
        out = rx.sub(repl, out)
    return out if len(out) <= limit and len(text) <= limit + 1024 else _cut(out, limit, len(text))


def name(value: object) -> str:
    """A tool name or call id as a span shows it: ``"invalid"`` unless it is 1–128 of ``A-Za-z0-9_.:-``.

    >>> name("read_file"), name("read the file at /etc/passwd")
    ('read_file', 'invalid')
    """
    text = str(value)
    return text if _NAME.fullmatch(text) else "invalid"
