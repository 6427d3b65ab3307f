"""Claude through the official ``anthropic`` SDK (Messages API).

Two halves, kept apart:

* **How to reach it** — :class:`AnthropicConnection`: API key (``api_key`` setting, else
  ``ANTHROPIC_API_KEY``), base URL (``base_url`` setting, else the SDK's default or
  ``ANTHROPIC_BASE_URL``), timeout, or a ready ``client``.  It opens an ``AsyncAnthropic`` client with
  the SDK's retries off (``max_retries=0``): :mod:`._retry` counts retries.
* **How to talk to it** — :class:`AnthropicModel`: map our messages out (:func:`to_anthropic`),
  call ``messages.stream`` (or ``messages.create``), map the message back (:func:`from_anthropic`).

Prompt caching: ``cache_control: {"type": "ephemeral"}`` marks the end of the tools, the system
prompt and the last message — the stable prefix — so the next turn (and a child agent that shares
the tools and system prompt) reads it from the cache.  ``Usage.input_tokens`` counts *all* input
tokens (plain + cache read + cache write); the cache parts are reported separately too.

The SDK is imported inside the functions that need it, never when ``subagents`` is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import ModelError
from ..messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from ._retry import Retryable, RetryPolicy, call_with_retries, is_retryable_status, parse_retry_after, setting
from ._retry import status_error as _status_error
from .base import ModelRequest, ModelResponse, ToolCall, ToolSpec

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

    from .resolve import ModelSpec

__all__ = ["AnthropicConnection", "AnthropicModel", "from_anthropic", "from_spec", "to_anthropic"]

PROVIDER = "Anthropic API"
KEY_HINT = "set ANTHROPIC_API_KEY or [providers.anthropic] api_key"
CACHE = {"type": "ephemeral"}

# Our provider-neutral stop reasons: end_turn | tool_use | max_tokens | stop_sequence | refusal | pause_turn.
_STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}

# A mid-stream ``event: error`` arrives with HTTP 200; its ``error.type`` tells the real status.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


# -- how to reach it ------------------------------------------------------------------------------
@dataclass(slots=True, frozen=True)
class AnthropicConnection:
    """API key, base URL and timeout — or a ready client (which the caller then owns and closes)."""

    api_key: str | None = None
    base_url: str | None = None
    timeout_s: float | None = None
    client: AsyncAnthropic | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> AnthropicConnection:
        timeout = settings.get("timeout_s")
        return cls(
            api_key=setting(settings, "api_key", str, "") or os.environ.get("ANTHROPIC_API_KEY") or None,
            base_url=setting(settings, "base_url", str, "") or None,
            timeout_s=None if timeout is None else setting(settings, "timeout_s", float, 0.0),
            client=settings.get("client"),
        )

    def open(self) -> AsyncAnthropic:
        """A new ``AsyncAnthropic`` client with the SDK's own retries off."""
        if self.api_key is None and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            raise ModelError(
                f"No Anthropic API key is configured; {KEY_HINT} (or ANTHROPIC_AUTH_TOKEN).",
                provider="anthropic",
            )
        import anthropic

        kwargs: dict[str, Any] = {"max_retries": 0}
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        if self.timeout_s is not None:
            kwargs["timeout"] = self.timeout_s
        return anthropic.AsyncAnthropic(**kwargs)


# -- map our messages out -------------------------------------------------------------------------
def _block_out(b: TextBlock | ToolUseBlock | ToolResultBlock) -> dict[str, Any] | None:
    if type(b) is TextBlock:
        return {"type": "text", "text": b.text} if b.text else None
    if type(b) is ToolUseBlock:
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.arguments}
    assert type(b) is ToolResultBlock
    return {"type": "tool_result", "tool_use_id": b.tool_use_id, "content": b.content, "is_error": b.is_error}


def _messages_out(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        blocks = [d for d in map(_block_out, m.content) if d is not None]
        if blocks:
            out.append({"role": m.role, "content": blocks})
    return out


def to_anthropic(system: str, messages: list[Message], tools: list[ToolSpec], system_prefix: int = 0
                 ) -> dict[str, Any]:
    """The ``system``, ``messages`` and ``tools`` arguments of a Messages API call, with cache breakpoints.

    With ``0 < system_prefix < len(system)`` the system prompt goes as two blocks, each with a
    breakpoint: the prefix inherited from the parent agent (shared by parent and children, so a
    child reads the parent's cache) and the agent's own layers.
    """
    params: dict[str, Any] = {"messages": _messages_out(messages)}
    if 0 < system_prefix < len(system):
        params["system"] = [{"type": "text", "text": system[:system_prefix], "cache_control": CACHE},
                            {"type": "text", "text": system[system_prefix:], "cache_control": CACHE}]
    elif system:
        params["system"] = [{"type": "text", "text": system, "cache_control": CACHE}]
    if tools:
        out_tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
        ]
        out_tools[-1]["cache_control"] = CACHE
        params["tools"] = out_tools
    if params["messages"]:
        params["messages"][-1]["content"][-1]["cache_control"] = CACHE
    return params


# -- map the response back ------------------------------------------------------------------------
def _usage(u: Any) -> Usage:
    read = int(getattr(u, "cache_read_input_tokens", None) or 0)
    write = int(getattr(u, "cache_creation_input_tokens", None) or 0)
    return Usage(
        input_tokens=int(getattr(u, "input_tokens", None) or 0) + read + write,
        output_tokens=int(getattr(u, "output_tokens", None) or 0),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def from_anthropic(message: Any, *, max_output_tokens: int = 0) -> ModelResponse:
    """A :class:`ModelResponse` from an SDK ``Message`` (text joined, tool_use blocks as calls)."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            calls.append(ToolCall(block.name, dict(args), block.id))
    stop = message.stop_reason
    if stop == "max_tokens" and calls:
        raise ModelError(
            f"Claude was cut off at max_output_tokens={max_output_tokens} while writing the arguments of tool "
            f"{calls[-1].name!r}, so the call was not run; raise max_output_tokens in the model settings.",
            provider="anthropic",
        )
    return ModelResponse(
        text="".join(text),
        tool_calls=calls,
        usage=_usage(message.usage),
        stop_reason=None if stop is None else _STOP_REASONS.get(stop, stop),
        model=getattr(message, "model", None),
    )


def _to_model_error(exc: Exception, model: str, base_url: str | None) -> Exception:
    """An SDK exception as :class:`Retryable` (try again) or :class:`ModelError` (give up)."""
    import anthropic

    if isinstance(exc, anthropic.APIConnectionError):
        where = base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        kind = "timed out" if isinstance(exc, anthropic.APITimeoutError) else "could not connect"
        err = ModelError(
            f"{PROVIDER} {kind} at {where} ({exc}); check the network, base_url or timeout_s.",
            provider="anthropic",
            retryable=True,
        )
        return Retryable(err)
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        if status < 400:  # an error event inside a 200 stream
            status = _ERROR_TYPE_STATUS.get(str(exc.type or ""), 500)
        message = exc.api_message or str(exc)
        retryable = is_retryable_status(status)
        err = _status_error(PROVIDER, status, message, model=model, key_hint=KEY_HINT, retryable=retryable)
        return Retryable(err, parse_retry_after(exc.response.headers)) if retryable else err
    return ModelError(f"{PROVIDER} call failed: {type(exc).__name__}: {exc}", provider="anthropic")


# -- the model ------------------------------------------------------------------------------------
class AnthropicModel:
    """A :class:`~subagents.models.Model` for Claude; ``name`` is ``anthropic:<model>``."""

    __slots__ = ("connection", "max_output_tokens", "model", "name", "retry", "stream")

    def __init__(
        self,
        model: str,
        connection: AnthropicConnection | None = None,
        *,
        max_output_tokens: int = 8192,
        stream: bool = True,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.name = f"anthropic:{model}"
        self.connection = connection or AnthropicConnection.from_settings({})
        self.max_output_tokens = max_output_tokens
        self.stream = stream
        self.retry = retry or RetryPolicy()

    async def request(self, request: ModelRequest) -> ModelResponse:
        params = to_anthropic(request.system, request.messages, request.tools, request.system_prefix)
        params["model"] = self.model
        params["max_tokens"] = self.max_output_tokens
        return await call_with_retries(lambda: self._attempt(params, request), self.retry)

    async def _attempt(self, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        import anthropic

        owned = self.connection.client is None
        client = self.connection.client or self.connection.open()
        try:
            message = await self._call(client, params, request)
        except anthropic.AnthropicError as e:
            raise _to_model_error(e, self.model, self.connection.base_url) from e
        finally:
            if owned:
                await client.close()
        return from_anthropic(message, max_output_tokens=self.max_output_tokens)

    async def _call(self, client: AsyncAnthropic, params: dict[str, Any], request: ModelRequest) -> Any:
        if not self.stream:
            return await client.messages.create(**params)
        on_text = request.on_text
        async with client.messages.stream(**params) as stream:
            async for event in stream:
                if event.type == "text" and on_text is not None and event.text:
                    on_text(event.text)
            return await stream.get_final_message()

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, stream={self.stream})"


def from_spec(spec: ModelSpec, settings: dict[str, Any]) -> AnthropicModel:
    """Build the model for ``anthropic:<model>`` from provider settings (see the module docstring)."""
    return AnthropicModel(
        spec.model,
        AnthropicConnection.from_settings(settings),
        max_output_tokens=setting(settings, "max_output_tokens", int, 8192),
        stream=setting(settings, "stream", bool, True),
        retry=RetryPolicy.from_settings(settings),
    )
