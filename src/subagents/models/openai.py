"""GPT models and OpenAI-compatible servers through the official ``openai`` SDK (Chat Completions).

Two halves, kept apart:

* **How to reach it** — :class:`OpenAIConnection`: API key (``api_key`` setting, else
  ``OPENAI_API_KEY``; a compatible server given by ``openai:<model>@<base_url>`` needs none and gets
  the placeholder ``"not-needed"``), base URL, connect and read timeouts, or a ready ``client``.  The
  SDK's retries are off (``max_retries=0``): :mod:`._retry` counts retries.  The ``AsyncOpenAI``
  client comes from a :class:`~.clients.ClientPool`, shared with every model of the runtime that
  reaches the same server with the same key: one connection pool, kept-alive connections reused.
* **How to talk to it** — :class:`OpenAIModel`: map our messages out (:func:`to_openai`), call
  ``chat.completions.create`` (streaming by default, with ``stream_options.include_usage``), map the
  answer back (:func:`from_openai` / :class:`StreamAssembler`, in :mod:`._openai_answer`).  Every
  attempt has a total deadline and a stream a stall timer (:mod:`._timeouts`); a stream that ends
  without a ``finish_reason`` is truncated: retried, never an answer.

Compatible servers (Ollama, vLLM, llama.cpp, LM Studio) differ in small ways, all handled: no
``usage``, tool calls without ids, ``content`` as a string or parts, deltas without ``index``, and
arguments that are not a JSON object (they become ``{INVALID_ARGUMENTS_KEY: <raw text>}``: the tool
never runs with guessed input; the model gets an error it can act on).  The SDK is imported inside
the functions that need it, never when ``subagents`` is imported.

Prompt caching is automatic on the OpenAI side; the request helps it: tools in the registry's stable
order, the system prompt's shared prefix first, and a ``prompt_cache_key`` common to the agent tree
(:func:`prompt_cache_key`; not sent to compatible servers, which may refuse unknown fields).  Cached
prompt tokens come back as ``usage.prompt_tokens_details.cached_tokens`` (``Usage.cache_read_tokens``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._config_values import MAX_OUTPUT_TOKENS, STREAM
from ..exceptions import ModelError
from ..messages import Message, TextBlock, ToolResultBlock
from ._openai_answer import StreamAssembler, from_openai, get, parse_arguments
from ._retry import (
    Retryable,
    RetryPolicy,
    call_with_retries,
    check_url,
    is_retryable_status,
    parse_retry_after,
    server_text,
    setting,
    truncated_error,
)
from ._retry import status_error as _status_error
from ._sanitize import SDK_PARSE_ERRORS, encodable, guarded, header_safe, malformed
from ._timeouts import Timeouts, sdk_timeout_key, timeout_error, transport_error_name, watch, within
from .base import INVALID_ARGUMENTS_KEY, ModelRequest, ModelResponse, ToolSpec
from .clients import SHARED, ClientPool

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from .resolve import ModelSpec

__all__ = ["INVALID_ARGUMENTS_KEY", "OpenAIConnection", "OpenAIModel", "from_openai", "from_spec", "parse_arguments",
           "prompt_cache_key", "to_openai"]

PROVIDER = "OpenAI API"
KEY_HINT = "set OPENAI_API_KEY or [providers.openai] api_key"
NO_KEY = "not-needed"
TOOL_ERROR_PREFIX = "Error: "


# -- how to reach it ------------------------------------------------------------------------------
@dataclass(slots=True, frozen=True)
class OpenAIConnection:
    """API key, base URL and timeouts — or a ready client (which the caller then owns and closes).

    A ready client keeps its own connect and read timeouts; the stall timer and the total deadline
    (:class:`OpenAIModel`) apply to it all the same.  Without one, the client comes from ``pool``
    (:data:`~.clients.SHARED` if ``None``).
    """

    api_key: str | None = None
    base_url: str | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    client: AsyncOpenAI | None = None
    compatible: bool = False
    """A compatible server named by ``openai:<model>@<base_url>`` (a ``base_url`` setting alone is taken
    as the OpenAI API behind another address, e.g. a proxy)."""
    pool: ClientPool | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], base_url: str | None = None,
                      pool: ClientPool | None = None) -> OpenAIConnection:
        base = base_url or setting(settings, "base_url", str, "") or None
        key = (setting(settings, "api_key", str, "") or os.environ.get("OPENAI_API_KEY") or "").strip() or None
        if key is None and base_url is not None:
            key = NO_KEY  # a compatible server named by base URL usually needs no key
        return cls(
            api_key=key,
            base_url=base,
            timeouts=Timeouts.from_settings(settings),
            client=settings.get("client"),
            compatible=base_url is not None,
            pool=pool,
        )

    @property
    def where(self) -> str:
        """The server's address, for messages."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"

    @property
    def label(self) -> str:
        """``OpenAI API at <url>`` or ``OpenAI-compatible server at <url>``, for messages."""
        return f"OpenAI-compatible server at {self.where}" if self.compatible else f"{PROVIDER} at {self.where}"

    async def acquire(self) -> AsyncOpenAI:
        """The client to call with: the ready ``client``, else the pool's for this server, key and loop."""
        if self.client is not None:
            return self.client
        env = os.environ
        key = ("openai", self.where, self.api_key, env.get("OPENAI_ORG_ID"), env.get("OPENAI_PROJECT_ID"),
               self.timeouts)
        return await (SHARED if self.pool is None else self.pool).get(key, self.open)

    def open(self) -> AsyncOpenAI:
        """A new ``AsyncOpenAI`` client with the SDK's own retries off (its owner closes it)."""
        if self.api_key is None:
            raise ModelError(
                f"No OpenAI API key is configured; {KEY_HINT}, or name a compatible server that needs no key "
                "with openai:<model>@<base_url>.",
                provider="openai",
            )
        header_safe(self.api_key, "OpenAI", KEY_HINT)
        check_url(self.base_url, "openai")
        import openai

        kwargs: dict[str, Any] = {"api_key": self.api_key, "max_retries": 0,
                                  "timeout": self.timeouts.for_sdk(openai.Timeout)}
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        return openai.AsyncOpenAI(**kwargs)


# -- map our messages out -------------------------------------------------------------------------
def _message_out(m: Message) -> list[dict[str, Any]]:
    if m.role == "assistant":
        text = m.text
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [
            {"id": b.id, "type": "function",
             "function": {"name": b.name, "arguments": json.dumps(b.arguments, ensure_ascii=False)}}
            for b in m.tool_uses
        ]
        if calls:
            out["tool_calls"] = calls
        elif not text:
            return []
        return [out]
    # A user message: tool results first (each a "tool" message right after the assistant's calls),
    # then any text (inbox messages) as one user message.
    msgs: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": b.tool_use_id,
         "content": (TOOL_ERROR_PREFIX + b.content) if b.is_error else b.content}
        for b in m.content if type(b) is ToolResultBlock
    ]
    text = "\n\n".join(b.text for b in m.content if type(b) is TextBlock and b.text)
    if text:
        msgs.append({"role": "user", "content": text})
    return msgs


def to_openai(system: str, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
    """The ``messages`` and ``tools`` arguments of a Chat Completions call."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        out.extend(_message_out(m))
    params: dict[str, Any] = {"messages": out}
    if tools:
        params["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools
        ]
    return params


def prompt_cache_key(request: ModelRequest) -> str:
    """The ``prompt_cache_key`` of a request: a digest of the system prefix inherited from the root (the whole
    system prompt when none is marked), the same for a parent, its children and their siblings.

    OpenAI caches prompt prefixes automatically and routes requests by this key and the first tokens, so an
    agent tree whose requests start alike (tools in a stable order, the shared system prefix first) lands
    on the same cache.
    """
    shared = request.system[:request.system_prefix] if request.system_prefix > 0 else request.system
    return "subagents-" + hashlib.sha256(shared.encode()).hexdigest()[:24]


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        msg = inner.get("message") if isinstance(inner, dict) else body.get("message")
        if msg:
            return str(msg)
    if isinstance(body, str) and body:
        return body
    return str(getattr(exc, "message", "") or exc)


def _to_model_error(exc: Exception, model: str, connection: OpenAIConnection) -> Exception:
    """An SDK exception as :class:`Retryable` (try again) or :class:`ModelError` (give up)."""
    import openai

    provider = f"OpenAI-compatible server at {connection.base_url}" if connection.compatible else PROVIDER
    if isinstance(exc, openai.APITimeoutError):
        key = sdk_timeout_key(exc)
        return timeout_error(connection.label, "openai", model, key, connection.timeouts.seconds(key))
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        dropped = cause is not None and transport_error_name(cause) not in (None, "ConnectError")
        what, detail = ("dropped the connection mid-answer", cause) if dropped else ("could not be reached", exc)
        return Retryable(ModelError(
            f"{PROVIDER} {what} at {connection.where} ({detail}); check that the server is running and the base URL.",
            provider="openai", retryable=True,
        ))
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = is_retryable_status(status)
        err = _status_error(provider, status, _server_message(exc), model=model, key_hint=KEY_HINT,
                            retryable=retryable)
        return Retryable(err, parse_retry_after(exc.response.headers)) if retryable else err
    if isinstance(exc, openai.APIError):  # an error event inside a 200 stream
        return Retryable(ModelError(
            f"{provider} failed while streaming for model {model!r}: {_server_message(exc)}.",
            provider="openai", retryable=True,
        ))
    return ModelError(f"{provider} call failed: {type(exc).__name__}: {exc}", provider="openai")


# -- the model ------------------------------------------------------------------------------------
class OpenAIModel:
    """A :class:`~subagents.models.Model` for Chat Completions; ``name`` is ``openai:<model>[@<base_url>]``."""

    __slots__ = ("connection", "max_output_tokens", "model", "name", "retry", "stream")

    def __init__(
        self,
        model: str,
        connection: OpenAIConnection | None = None,
        *,
        max_output_tokens: int = 8192,
        stream: bool = True,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.connection = connection or OpenAIConnection.from_settings({})
        base = self.connection.base_url
        self.name = f"openai:{model}" if not self.connection.compatible else f"openai:{model}@{base}"
        self.max_output_tokens = max_output_tokens
        self.stream = stream
        self.retry = retry or RetryPolicy()

    @property
    def timeouts(self) -> Timeouts:
        return self.connection.timeouts

    def _timed_out(self, key: str, seconds: float) -> Retryable:
        return timeout_error(self.connection.label, "openai", self.model, key, seconds)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params = to_openai(request.system, request.messages, request.tools)
        params["model"] = self.model
        # api.openai.com wants max_completion_tokens (reasoning models refuse max_tokens); compatible
        # servers know max_tokens.
        params["max_tokens" if self.connection.compatible else "max_completion_tokens"] = self.max_output_tokens
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        if not self.connection.compatible:
            params["prompt_cache_key"] = prompt_cache_key(request)
        return params

    async def request(self, request: ModelRequest) -> ModelResponse:
        return await encodable(lambda params: call_with_retries(lambda: self._attempt(params, request), self.retry),
                               self._params(request))

    async def _attempt(self, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        import openai

        client = await self.connection.acquire()
        try:
            return await within(lambda: self._call(client, params, request), self.timeouts, self._timed_out)
        except openai.OpenAIError as e:
            raise _to_model_error(e, self.model, self.connection) from e

    def _malformed(self, what: Exception | str) -> Retryable:
        return malformed(self.connection.label, "openai", self.model, what)

    async def _call(self, client: AsyncOpenAI, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        try:
            answer = await client.chat.completions.create(**params)
        except ValueError as e:  # a body the SDK cannot read (not JSON)
            if isinstance(e, UnicodeEncodeError):
                raise
            raise self._malformed(e) from e
        if not self.stream:
            return self._whole(answer)
        stream = answer
        body = await self._unstreamed(stream)
        if body is not None:
            return self._whole(body)
        assembler = StreamAssembler()
        async with stream, aclosing(guarded(watch(stream, self.timeouts.stall_s), self._malformed)) as chunks:
            async for chunk in chunks:
                try:
                    delta = assembler.add(chunk)
                except SDK_PARSE_ERRORS as e:  # a field of the wrong type (a tool call's ``index: "x"``...)
                    raise self._malformed(e) from e
                if delta and request.on_text is not None:
                    request.on_text(delta)
        if assembler.finish is None:  # the SDK ends the stream quietly when the connection closes early
            raise truncated_error(self.connection.label, "openai", self.model, "no finish_reason")
        try:
            return assembler.response(self.max_output_tokens)
        except SDK_PARSE_ERRORS as e:
            raise self._malformed(e) from e

    def _whole(self, answer: Any) -> ModelResponse:
        """A whole (not streamed) answer; a malformed answer when it has no choices or a field of the wrong type."""
        choices = get(answer, "choices")
        if not choices or not isinstance(choices, list):  # ``{}``, an HTML page with status 200...
            raise self._malformed(f"no choices in {str(answer)[:200]!r}")
        try:
            return from_openai(answer, max_output_tokens=self.max_output_tokens)
        except SDK_PARSE_ERRORS as e:  # ``tool_calls: 5``...
            raise self._malformed(e) from e

    async def _unstreamed(self, stream: Any) -> Any:
        """The body of an answer to a stream request that is no stream (``None`` when it is one): a server that
        ignores ``stream: true`` sends its whole answer as JSON, a captive proxy its HTML page (the SDK read
        either as an empty stream: "truncated", retried, and the answer lost)."""
        import openai

        response = getattr(stream, "response", None)
        kind = str(getattr(response, "headers", {}).get("content-type", "")).lower()
        if response is None or not kind.startswith(("application/json", "text/html")):
            return None
        try:
            async with stream:
                raw: bytes = await response.aread()
        except Exception as e:
            name = transport_error_name(e)
            if name is None:
                raise
            error = openai.APITimeoutError if name.endswith("Timeout") else openai.APIConnectionError
            raise error(request=response.request) from e
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except ValueError:
            raise self._malformed(f"a {kind.split(';')[0]} body instead of a stream: {server_text(text)}") from None
        if isinstance(body, dict) and body.get("error") and not body.get("choices"):
            raise self._malformed(f"an error with status 200: {server_text(str(body['error']))}")
        return body

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={self.connection.base_url!r}, stream={self.stream})"


def from_spec(spec: ModelSpec, settings: dict[str, Any], clients: ClientPool | None = None) -> OpenAIModel:
    """Build the model for ``openai:<model>[@<base_url>]`` from provider settings; its client comes from ``clients``."""
    return OpenAIModel(
        spec.model,
        OpenAIConnection.from_settings(settings, spec.base_url, clients),
        max_output_tokens=setting(settings, "max_output_tokens", int, MAX_OUTPUT_TOKENS),
        stream=setting(settings, "stream", bool, STREAM),
        retry=RetryPolicy.from_settings(settings),
    )
