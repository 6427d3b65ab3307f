"""Claude through the official ``anthropic`` SDK (Messages API).

Two halves, kept apart:

* **How to reach it** — :class:`AnthropicConnection`: API key (``api_key`` setting, else
  ``ANTHROPIC_API_KEY``), base URL (``base_url`` setting, else the SDK's default or
  ``ANTHROPIC_BASE_URL``), connect and read timeouts, or a ready ``client``.  Its ``AsyncAnthropic``
  client (the SDK's retries off, ``max_retries=0``: :mod:`._retry` counts retries) comes from a
  :class:`~.clients.ClientPool`, shared with every model of the runtime that reaches the same server
  with the same key: one connection pool, kept-alive connections reused from call to call.
* **How to talk to it** — :class:`AnthropicModel`: map our messages out (:func:`to_anthropic`),
  call ``messages.create`` (streamed: the raw events assembled by :mod:`._anthropic_stream`, so bad tool
  input reaches the model as a tool error), map the message back (:func:`from_anthropic`).
  Every attempt has a total deadline and a stream a stall timer (:mod:`._timeouts`); a stream that
  ends without ``message_stop`` (or without a stop reason) is truncated: retried, never an answer.

Prompt caching: ``cache_control: {"type": "ephemeral"}`` marks up to four ends of stable prefixes
(:func:`to_anthropic`): the last message (the next turn reads it), the system prefix inherited from the
parent, the tool groups narrower children share, the system prompt, the tools — so a child agent reads
the parent's (or a sibling's) cached prefix wherever their requests agree byte for byte.
``Usage.input_tokens`` counts *all* input tokens (plain + cache read + cache write); the cache parts are
reported separately too.

The SDK is imported inside the functions that need it, never when ``subagents`` is imported.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._config_values import MAX_OUTPUT_TOKENS, STREAM
from ..exceptions import ModelError
from ..messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from ._anthropic_search import run_search
from ._anthropic_stream import StreamedMessage, tool_arguments
from ._retry import (
    Retryable,
    RetryPolicy,
    call_with_retries,
    check_url,
    is_retryable_status,
    parse_retry_after,
    setting,
    truncated_error,
)
from ._retry import status_error as _status_error
from ._sanitize import SDK_PARSE_ERRORS, clean, encodable, guarded, header_safe, malformed, tokens, unique_ids
from ._timeouts import Timeouts, sdk_timeout_key, timeout_error, transport_error_name, watch, within
from .base import ModelRequest, ModelResponse, ToolCall, ToolSpec
from .clients import SHARED, ClientPool

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
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
    "timeout_error": 504, "overloaded_error": 529,
}


# -- how to reach it ------------------------------------------------------------------------------
@dataclass(slots=True, frozen=True)
class AnthropicConnection:
    """API key, base URL and timeouts — or a ready client (which the caller then owns and closes).

    A ready client keeps its own connect and read timeouts; the stall timer and the total deadline
    (:class:`AnthropicModel`) apply to it all the same.  Without one, the client comes from ``pool``
    (:data:`~.clients.SHARED` if ``None``).
    """

    api_key: str | None = None
    base_url: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    client: AsyncAnthropic | None = None
    pool: ClientPool | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], pool: ClientPool | None = None) -> AnthropicConnection:
        return cls(
            api_key=(setting(settings, "api_key", str, "") or os.environ.get("ANTHROPIC_API_KEY", "")).strip() or None,
            base_url=setting(settings, "base_url", str, "") or None,
            timeouts=Timeouts.from_settings(settings),
            client=settings.get("client"),
            pool=pool,
        )

    @property
    def where(self) -> str:
        """The server's address, for messages."""
        return self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"

    async def acquire(self) -> AsyncAnthropic:
        """The client to call with: the ready ``client``, else the pool's for this server, key and loop."""
        if self.client is not None:
            return self.client
        token = None if self.api_key is not None else os.environ.get("ANTHROPIC_AUTH_TOKEN")
        key = ("anthropic", self.where, self.api_key, token, self.timeouts)
        return await (SHARED if self.pool is None else self.pool).get(key, self.open)

    def open(self) -> AsyncAnthropic:
        """A new ``AsyncAnthropic`` client with the SDK's own retries off (its owner closes it)."""
        if self.api_key is None and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            raise ModelError(
                f"No Anthropic API key is configured; {KEY_HINT} (or ANTHROPIC_AUTH_TOKEN).",
                provider="anthropic",
            )
        header_safe(self.api_key or os.environ.get("ANTHROPIC_AUTH_TOKEN"), "Anthropic", KEY_HINT)
        check_url(self.base_url, "anthropic")
        import anthropic

        kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeouts.for_sdk(anthropic.Timeout)}
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
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


MAX_BREAKPOINTS = 4  # the Messages API accepts at most four cache_control markers per request
_LAST_TOOLS = frozenset({"agent", "team"})


def _tool_breaks(tools: list[ToolSpec]) -> tuple[int | None, int | None]:
    """Where the tools that narrower fences share end: (the leading read-only run, the tools before the agent and
    team tools) — each an index, or ``None`` when that group is not followed by other tools."""
    n = len(tools)
    reads = next((i for i, t in enumerate(tools) if t.category != "read"), n)
    own = next((i for i, t in enumerate(tools) if t.category in _LAST_TOOLS), n)
    if own < n and any(t.category and t.category not in _LAST_TOOLS for t in tools[own:]):
        own = n  # not a tail (uncategorized extras such as final_result may follow): not in cache order
    return (reads - 1 if 0 < reads < n else None), (own - 1 if 0 < own < n and own - 1 != reads - 1 else None)


def to_anthropic(system: str, messages: list[Message], tools: list[ToolSpec], system_prefix: int = 0
                 ) -> dict[str, Any]:
    """The ``system``, ``messages`` and ``tools`` arguments of a Messages API call, with cache breakpoints.

    The provider caches in the order tools, system, messages, and a child reads its parent's cache
    only where the bytes before a breakpoint are identical.  Candidate breakpoints, in order of
    value (the first :data:`MAX_BREAKPOINTS` that exist are kept):

    1. the last message — the next turn of this agent reads everything before it;
    2. the end of the system prefix inherited from the parent (``0 < system_prefix < len(system)``,
       sent as its own block) — shared by parent, children and siblings with the same tools;
    3. the end of the leading read-only tools, then the end of the tools before the agent tools
       (``ToolSpec.category``) — shared with children whose fence is that group (``explore``, or an
       agent past ``max_depth``), when this agent holds more;
    4. the end of the system prompt — shared by siblings of the same type;
    5. the end of the tools.
    """
    params: dict[str, Any] = {"messages": _messages_out(messages)}
    marks: list[dict[str, Any]] = []
    if params["messages"]:
        marks.append(params["messages"][-1]["content"][-1])
    system_blocks: list[dict[str, Any]] = []
    if 0 < system_prefix < len(system):
        system_blocks = [{"type": "text", "text": system[:system_prefix]},
                         {"type": "text", "text": system[system_prefix:]}]
        marks.append(system_blocks[0])
    elif system:
        system_blocks = [{"type": "text", "text": system}]
    if system_blocks:
        params["system"] = system_blocks
    if tools:
        out_tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
        ]
        params["tools"] = out_tools
        marks += [out_tools[i] for i in _tool_breaks(tools) if i is not None]
    if system_blocks:
        marks.append(system_blocks[-1])
    if tools:
        marks.append(params["tools"][-1])
    chosen: list[dict[str, Any]] = []
    for block in marks:
        if len(chosen) < MAX_BREAKPOINTS and not any(block is c for c in chosen):
            chosen.append(block)
    for block in chosen:
        block["cache_control"] = CACHE
    return params


# -- map the response back ------------------------------------------------------------------------
def _usage(u: Any) -> Usage:
    read = tokens(getattr(u, "cache_read_input_tokens", None))
    write = tokens(getattr(u, "cache_creation_input_tokens", None))
    return Usage(
        input_tokens=tokens(getattr(u, "input_tokens", None)) + read + write,
        output_tokens=tokens(getattr(u, "output_tokens", None)),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def from_anthropic(message: Any, *, max_output_tokens: int = 0) -> ModelResponse:
    """A :class:`ModelResponse` from an SDK ``Message`` (text joined, tool_use blocks as calls)."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            text.append(clean(str(getattr(block, "text", None) or "")))
        elif kind == "tool_use":  # input that is no JSON object: the tool answers the model with an error
            calls.append(ToolCall(clean(str(getattr(block, "name", None) or "")), tool_arguments(block),
                                  str(getattr(block, "id", None) or "")))
    stop = None if message.stop_reason is None else str(message.stop_reason)  # (a list would not hash)
    if stop == "max_tokens" and calls:
        raise ModelError(
            f"Claude was cut off at max_output_tokens={max_output_tokens} while writing the arguments of tool "
            f"{calls[-1].name!r}, so the call was not run; raise max_output_tokens in the model settings.",
            provider="anthropic",
        )
    return ModelResponse(
        text="".join(text),
        tool_calls=unique_ids(calls),
        usage=_usage(message.usage),
        stop_reason=None if stop is None else _STOP_REASONS.get(stop, stop),
        model=None if getattr(message, "model", None) is None else str(message.model),
    )


def _to_model_error(exc: Exception, model: str, connection: AnthropicConnection) -> Exception:
    """An SDK (or HTTP-layer) exception as :class:`Retryable` (try again) or :class:`ModelError` (give up)."""
    import anthropic

    where = connection.where
    transport = transport_error_name(exc)  # raised as is by the SDK while a stream is read
    if isinstance(exc, anthropic.APITimeoutError) or (transport or "").endswith("Timeout"):
        key = sdk_timeout_key(exc)
        return timeout_error(f"{PROVIDER} at {where}", "anthropic", model, key, connection.timeouts.seconds(key))
    if isinstance(exc, anthropic.APIConnectionError) or transport is not None:
        kind = "could not connect" if transport is None else "dropped the connection mid-answer"
        err = ModelError(
            f"{PROVIDER} {kind} at {where} ({exc or transport}); check the network and base_url.",
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
        return await encodable(lambda p: call_with_retries(lambda: self._attempt(p, request), self.retry), params)

    @property
    def timeouts(self) -> Timeouts:
        return self.connection.timeouts

    def _timed_out(self, key: str, seconds: float) -> Retryable:
        return timeout_error(f"{PROVIDER} at {self.connection.where}", "anthropic", self.model, key, seconds)

    async def _attempt(self, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        message = await self._send(lambda client: self._call(client, params, request))
        if not isinstance(getattr(message, "content", None), list):  # ``{}``, an HTML page with status 200...
            raise self._malformed(f"no content in {str(message)[:200]!r}")
        try:
            return from_anthropic(message, max_output_tokens=self.max_output_tokens)
        except SDK_PARSE_ERRORS as e:  # a field of the wrong type
            raise self._malformed(e) from e

    def _malformed(self, what: Exception | str) -> Retryable:
        return malformed(f"{PROVIDER} at {self.connection.where}", "anthropic", self.model, what)

    async def _send(self, call: Callable[[AsyncAnthropic], Awaitable[Any]]) -> Any:
        """One attempt of ``call`` within the deadline; SDK errors become :class:`Retryable` or :class:`ModelError`."""
        import anthropic

        client = await self.connection.acquire()
        try:
            return await within(lambda: call(client), self.timeouts, self._timed_out)
        except Exception as e:
            if isinstance(e, anthropic.AnthropicError) or transport_error_name(e) is not None:
                raise _to_model_error(e, self.model, self.connection) from e
            if isinstance(e, ValueError) and not isinstance(e, UnicodeEncodeError):  # a body that is not JSON
                raise self._malformed(e) from e
            raise

    async def web_search(self, query: str, *, allowed_domains: list[str] | None = None,
                         blocked_domains: list[str] | None = None, max_uses: int = 5) -> str:
        """Search the web with Claude's server-side ``web_search`` tool; the answer and its sources as text
        (:mod:`._anthropic_search`).  Backs the ``web_search`` agent tool (:mod:`subagents.tools.web_search`)."""
        return await run_search(self._search_call, query, max_uses=max_uses, allowed_domains=allowed_domains,
                                blocked_domains=blocked_domains)

    async def _search_call(self, params: dict[str, Any]) -> Any:
        params = {"model": self.model, "max_tokens": self.max_output_tokens, **params}
        def attempt(p: dict[str, Any]) -> Awaitable[Any]:
            return call_with_retries(lambda: self._send(lambda client: client.messages.create(**p)), self.retry)
        return await encodable(attempt, params)

    async def _call(self, client: AsyncAnthropic, params: dict[str, Any], request: ModelRequest) -> Any:
        if not self.stream:
            return await client.messages.create(**params)
        on_text = request.on_text
        answer = StreamedMessage()  # from the raw events: the SDK's own assembly chokes on bad tool input
        stream = await client.messages.create(**params, stream=True)
        async with stream, aclosing(guarded(watch(stream, self.timeouts.stall_s), self._malformed)) as events:
            async for event in events:
                try:
                    text = answer.add(event)
                except SDK_PARSE_ERRORS as e:  # events out of order, a field missing
                    raise self._malformed(e) from e
                if text and on_text is not None:
                    on_text(text)
        if not answer.stopped or answer.stop_reason is None:
            missing = "no message_stop event" if not answer.stopped else "no stop_reason"
            raise truncated_error(f"{PROVIDER} at {self.connection.where}", "anthropic", self.model, missing)
        return answer

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, stream={self.stream})"


def from_spec(spec: ModelSpec, settings: dict[str, Any], clients: ClientPool | None = None) -> AnthropicModel:
    """Build the model for ``anthropic:<model>`` from provider settings; its client comes from ``clients``."""
    return AnthropicModel(
        spec.model,
        AnthropicConnection.from_settings(settings, clients),
        max_output_tokens=setting(settings, "max_output_tokens", int, MAX_OUTPUT_TOKENS),
        stream=setting(settings, "stream", bool, STREAM),
        retry=RetryPolicy.from_settings(settings),
    )
