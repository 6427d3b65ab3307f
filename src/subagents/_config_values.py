"""Value checking for :mod:`subagents.config`: the type names, conversion and the wording of errors.

Also the one table of provider settings (:data:`PROVIDER_KEYS`): the config checks ``[providers.*]``
against it, the adapters (``subagents.models``) take their defaults from it, and the settings table of
docs/providers.md is its rendering (:func:`provider_keys_table`; a test keeps them equal).
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["NO_MODEL_HELP", "PROVIDER_KEYS", "ProviderKey", "check_value", "hint", "mask_secret", "mcp_shown",
           "provider_keys_table", "quote", "show"]

# The adapters' defaults (seconds, counts), named once.
MAX_RETRIES = 4
RETRY_BASE_S = 0.5
RETRY_MAX_S = 30.0
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0
STALL_TIMEOUT_S = 120.0
TIMEOUT_S = 600.0
MAX_OUTPUT_TOKENS = 8192
STREAM = True


@dataclass(slots=True, frozen=True)
class ProviderKey:
    """One ``[providers.<name>]`` key: its type (as :func:`check_value` names it), default and meaning."""

    kind: str
    default: str
    """The default as the docs show it (a TOML value when there is one)."""
    meaning: str


def _shown(value: float | int | bool) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else f"{value:g}"


PROVIDER_KEYS: dict[str, ProviderKey] = {
    "api_key": ProviderKey("string", "env", "the key (else `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`)"),
    "base_url": ProviderKey("string", "SDK's", "another address for the same API (a proxy); for a compatible "
                                               "server prefer `@<base_url>`"),
    "max_retries": ProviderKey("non-negative integer", _shown(MAX_RETRIES),
                               "retries of a failed call (429, 529, 5xx, 408, 409, connection errors, timeouts, "
                               "truncated streams)"),
    "retry_base_s": ProviderKey("non-negative number", _shown(RETRY_BASE_S),
                                "first backoff; doubles each retry, with jitter (half to all of it)"),
    "retry_max_s": ProviderKey("non-negative number", _shown(RETRY_MAX_S),
                               "cap of one wait, also of a server's `retry-after`"),
    "connect_timeout_s": ProviderKey("positive number", _shown(CONNECT_TIMEOUT_S),
                                     "seconds to open the connection to the server"),
    "read_timeout_s": ProviderKey("positive number", _shown(READ_TIMEOUT_S),
                                  "seconds the server may send nothing at all (before the answer starts or "
                                  "between any two reads)"),
    "stall_timeout_s": ProviderKey("positive number", _shown(STALL_TIMEOUT_S),
                                   "streaming: seconds without a complete stream event (a chunk)"),
    "timeout_s": ProviderKey("positive number", _shown(TIMEOUT_S),
                             "total seconds one attempt may take, however the server trickles its answer"),
    "max_output_tokens": ProviderKey("positive integer", _shown(MAX_OUTPUT_TOKENS),
                                     "`max_tokens` (Anthropic, compatible servers) / `max_completion_tokens` "
                                     "(OpenAI)"),
    "stream": ProviderKey("boolean", _shown(STREAM),
                          "stream answers: text reaches `assistant_text` events as it arrives"),
}


def provider_keys_table() -> str:
    """:data:`PROVIDER_KEYS` as the Markdown table docs/providers.md shows."""
    rows = [("Key", "Default", "Meaning")] + [(f"`{k}`", v.default, v.meaning) for k, v in PROVIDER_KEYS.items()]
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    lines = [f"| {a:<{w0}} | {b:<{w1}} | {c} |" for a, b, c in rows]
    lines.insert(1, f"|{'-' * (w0 + 2)}|{'-' * (w1 + 2)}|---------|")
    return "\n".join(lines)


def check_value(value: Any, expected: str) -> Any:
    """The value converted to its type, or raise ``ValueError`` (the caller words the message).

    Type names: ``string``, ``boolean``, ``list of strings``, ``one of 'a', 'b'``, and
    ``[non-negative|positive] [integer|number]`` (finite: ``inf`` and ``nan`` are refused).
    """
    if expected == "string":
        if isinstance(value, str):
            return value
    elif expected == "boolean":
        if isinstance(value, bool):
            return value
    elif expected == "list of strings":
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    elif expected.startswith("one of"):
        if isinstance(value, str) and f"'{value}'" in expected:
            return value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        finite = isinstance(value, int) or math.isfinite(value)  # inf and nan are no time, count or price
        in_range = finite and (value > 0 or (value == 0 and expected.startswith("non-negative")))
        if in_range and "integer" not in expected:
            return float(value)
        if in_range and isinstance(value, int):
            return value
    raise ValueError(expected)


_SHOWN_CHARS = 60


def show(value: Any) -> str:
    """A bad value as an error message quotes it (long strings cut)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if len(value) > _SHOWN_CHARS:  # a pasted file or a runaway variable: its start says enough
            return f"{json.dumps(value[:_SHOWN_CHARS])}... ({len(value)} characters)"
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array" if not value or not all(isinstance(v, str) for v in value) else json.dumps(value)
    return repr(value)


def quote(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else json.dumps(name)


def hint(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def mask_secret(value: str) -> str:
    """``sk-ant-api03-abcd…wxyz`` -> ``****wxyz`` (short values are masked whole)."""
    return "****" + value[-4:] if len(value) >= 12 else "****"


def mcp_shown(cfg: Any, masked: bool) -> dict[str, Any]:
    """An MCP server as ``config show`` prints it: its command line or URL; env and header values masked."""
    shown: dict[str, Any] = {"url": cfg.url} if cfg.url else {"command": [cfg.command, *cfg.args]}
    for kind in ("env", "headers"):  # tokens live here (GITHUB_TOKEN, Authorization)
        table = getattr(cfg, kind)
        if table:
            shown[kind] = {k: mask_secret(v) if masked else v for k, v in table.items()}
    return shown


NO_MODEL_HELP = """\
no model is configured.
Configure one in any of these ways:
  Anthropic:    export ANTHROPIC_API_KEY=...  and pass  --model anthropic:claude-sonnet-4-5
  OpenAI:       export OPENAI_API_KEY=...     and pass  --model openai:gpt-4.1
  Local server (Ollama, vLLM, llama.cpp, LM Studio; OpenAI-compatible):
                --model openai:<model>@http://localhost:11434/v1
  A default for every run: put
                [model]
                default = "anthropic:claude-sonnet-4-5"
                in .subagents/config.toml, or export SUBAGENTS_MODEL=anthropic:claude-sonnet-4-5
To try subagents offline first, without any model or key, run:  subagents demo"""
"""What to do when no model is configured (the CLI and ``Runtime`` both say it)."""
