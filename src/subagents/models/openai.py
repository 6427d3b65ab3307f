"""GPT models and OpenAI-compatible servers through the official ``openai`` SDK (Chat Completions).

Two halves, kept apart:

* **How to reach it** — :class:`OpenAIConnection`: API key (``api_key`` setting, else
  ``OPENAI_API_KEY``; a compatible server given by ``openai:<model>@<base_url>`` needs none and gets
  the placeholder ``"not-needed"``), base URL, timeout, or a ready ``client``.  The SDK's retries are
  off (``max_retries=0``): :mod:`._retry` counts retries.
* **How to talk to it** — :class:`OpenAIModel`: map our messages out (:func:`to_openai`), call
  ``chat.completions.create`` (streaming by default, with ``stream_options.include_usage``), map the
  answer back (:func:`from_openai` / :class:`_StreamAssembler`).

Compatible servers (Ollama, vLLM, llama.cpp, LM Studio) differ in small ways, all handled: no
``usage``, tool calls without ids, ``content`` as a string or parts, deltas without ``index``, and
arguments that are not a JSON object (they become ``{INVALID_ARGUMENTS_KEY: <raw text>}``: the tool
never runs with guessed input; the model gets an error it can act on).  The SDK is imported inside
the functions that need it, never when ``subagents`` is imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..exceptions import ModelError
from ..messages import Message, TextBlock, ToolResultBlock, Usage
from ._retry import Retryable, RetryPolicy, call_with_retries, is_retryable_status, parse_retry_after, setting
from ._retry import status_error as _status_error
from .base import INVALID_ARGUMENTS_KEY, ModelRequest, ModelResponse, ToolCall, ToolSpec, new_call_id

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from .resolve import ModelSpec

__all__ = ["INVALID_ARGUMENTS_KEY", "OpenAIConnection", "OpenAIModel", "from_openai", "from_spec", "parse_arguments",
           "to_openai"]

PROVIDER = "OpenAI API"
KEY_HINT = "set OPENAI_API_KEY or [providers.openai] api_key"
NO_KEY = "not-needed"
TOOL_ERROR_PREFIX = "Error: "

# Our provider-neutral stop reasons (see models/anthropic.py).
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


# -- how to reach it ------------------------------------------------------------------------------
@dataclass(slots=True, frozen=True)
class OpenAIConnection:
    """API key, base URL and timeout — or a ready client (which the caller then owns and closes)."""

    api_key: str | None = None
    base_url: str | None = None
    timeout_s: float | None = None
    client: AsyncOpenAI | None = None
    compatible: bool = False
    """A compatible server named by ``openai:<model>@<base_url>`` (a ``base_url`` setting alone is taken
    as the OpenAI API behind another address, e.g. a proxy)."""

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], base_url: str | None = None) -> OpenAIConnection:
        base = base_url or setting(settings, "base_url", str, "") or None
        key = setting(settings, "api_key", str, "") or os.environ.get("OPENAI_API_KEY") or None
        if key is None and base_url is not None:
            key = NO_KEY  # a compatible server named by base URL usually needs no key
        timeout = settings.get("timeout_s")
        return cls(
            api_key=key,
            base_url=base,
            timeout_s=None if timeout is None else setting(settings, "timeout_s", float, 0.0),
            client=settings.get("client"),
            compatible=base_url is not None,
        )

    def open(self) -> AsyncOpenAI:
        """A new ``AsyncOpenAI`` client with the SDK's own retries off."""
        if self.api_key is None:
            raise ModelError(
                f"No OpenAI API key is configured; {KEY_HINT}, or name a compatible server that needs no key "
                "with openai:<model>@<base_url>.",
                provider="openai",
            )
        import openai

        kwargs: dict[str, Any] = {"api_key": self.api_key, "max_retries": 0}
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        if self.timeout_s is not None:
            kwargs["timeout"] = self.timeout_s
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


# -- map the answer back --------------------------------------------------------------------------
def _get(obj: Any, key: str) -> Any:
    """``obj.key`` or ``obj[key]``: compatible servers' extra shapes reach us as dicts."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _content_text(content: Any) -> str:
    """Message content as text: a string, or a list of parts whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(_get(p, "text") or "") for p in content if _get(p, "type") in (None, "text", "output_text"))
    return str(content)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; text that is not a JSON object becomes ``{INVALID_ARGUMENTS_KEY: raw}``."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {INVALID_ARGUMENTS_KEY: str(raw)}
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: str(raw)}


def _usage(u: Any) -> Usage:
    if u is None:
        return Usage()
    details = _get(u, "prompt_tokens_details")
    cached = int((_get(details, "cached_tokens") if details is not None else 0) or 0)
    return Usage(
        input_tokens=int(_get(u, "prompt_tokens") or 0),
        output_tokens=int(_get(u, "completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def _check_cut_off(finish: str | None, calls: list[ToolCall], max_output_tokens: int) -> None:
    if finish == "length" and any(INVALID_ARGUMENTS_KEY in c.arguments for c in calls):
        raise ModelError(
            f"The model was cut off at max_output_tokens={max_output_tokens} while writing the arguments of a "
            "tool call, so the call was not run; raise max_output_tokens in the model settings.",
            provider="openai",
        )


def _response(text: str, calls: list[ToolCall], usage: Any, finish: str | None, model: str | None,
              max_output_tokens: int) -> ModelResponse:
    _check_cut_off(finish, calls, max_output_tokens)
    return ModelResponse(
        text=text,
        tool_calls=calls,
        usage=_usage(usage),
        stop_reason=None if finish is None else _STOP_REASONS.get(finish, finish),
        model=model,
    )


def from_openai(completion: Any, *, max_output_tokens: int = 0) -> ModelResponse:
    """A :class:`ModelResponse` from a (non-streamed) ``ChatCompletion``."""
    choices = _get(completion, "choices") or []
    message = _get(choices[0], "message") if choices else None
    calls = [
        ToolCall(str(_get(_get(tc, "function"), "name") or ""),
                 parse_arguments(_get(_get(tc, "function"), "arguments")),
                 str(_get(tc, "id") or "") or new_call_id())
        for tc in (_get(message, "tool_calls") or [])
    ]
    return _response(
        _content_text(_get(message, "content")), calls, _get(completion, "usage"),
        _get(choices[0], "finish_reason") if choices else None, _get(completion, "model"), max_output_tokens,
    )


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(slots=True)
class _StreamAssembler:
    """Builds one answer from ``chat.completion.chunk`` s: text, tool calls by index, usage, finish."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Any = None
    finish: str | None = None
    model: str | None = None

    def add(self, chunk: Any) -> str:
        """Take one chunk in; return its text delta ('' if none)."""
        self.model = _get(chunk, "model") or self.model
        if _get(chunk, "usage") is not None:
            self.usage = _get(chunk, "usage")
        delta_text = ""
        for choice in _get(chunk, "choices") or []:
            if (_get(choice, "index") or 0) != 0:
                continue
            delta = _get(choice, "delta")
            delta_text += _content_text(_get(delta, "content"))
            for tc in _get(delta, "tool_calls") or []:
                self._add_call(tc)
            self.finish = _get(choice, "finish_reason") or self.finish
        if delta_text:
            self.text.append(delta_text)
        return delta_text

    def _add_call(self, tc: Any) -> None:
        index = _get(tc, "index")
        if index is None:  # a server that sends each call whole, without an index
            index = len(self.calls)
        part = self.calls.setdefault(int(index), _PartialCall())
        part.id = part.id or str(_get(tc, "id") or "")
        fn = _get(tc, "function")
        part.name = part.name or str(_get(fn, "name") or "")
        args = _get(fn, "arguments")
        if isinstance(args, dict):
            args = json.dumps(args)
        part.arguments += str(args or "")

    def response(self, max_output_tokens: int) -> ModelResponse:
        calls = [
            ToolCall(p.name, parse_arguments(p.arguments), p.id or new_call_id())
            for _, p in sorted(self.calls.items())
        ]
        return _response("".join(self.text), calls, self.usage, self.finish, self.model, max_output_tokens)


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


def _to_model_error(exc: Exception, model: str, base_url: str | None, compatible: bool) -> Exception:
    """An SDK exception as :class:`Retryable` (try again) or :class:`ModelError` (give up)."""
    import openai

    provider = f"OpenAI-compatible server at {base_url}" if compatible else PROVIDER
    if isinstance(exc, openai.APIConnectionError):
        kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "could not be reached"
        where = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return Retryable(ModelError(
            f"{PROVIDER} {kind} at {where} ({exc}); check that the server is running, the base URL and timeout_s.",
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

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params = to_openai(request.system, request.messages, request.tools)
        params["model"] = self.model
        # api.openai.com wants max_completion_tokens (reasoning models refuse max_tokens); compatible
        # servers know max_tokens.
        params["max_tokens" if self.connection.compatible else "max_completion_tokens"] = self.max_output_tokens
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        return params

    async def request(self, request: ModelRequest) -> ModelResponse:
        params = self._params(request)
        return await call_with_retries(lambda: self._attempt(params, request), self.retry)

    async def _attempt(self, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        import openai

        owned = self.connection.client is None
        client = self.connection.client or self.connection.open()
        try:
            return await self._call(client, params, request)
        except openai.OpenAIError as e:
            raise _to_model_error(e, self.model, self.connection.base_url, self.connection.compatible) from e
        finally:
            if owned:
                await client.close()

    async def _call(self, client: AsyncOpenAI, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        if not self.stream:
            completion = await client.chat.completions.create(**params)
            return from_openai(completion, max_output_tokens=self.max_output_tokens)
        assembler = _StreamAssembler()
        stream = await client.chat.completions.create(**params)
        async with stream:
            async for chunk in stream:
                delta = assembler.add(chunk)
                if delta and request.on_text is not None:
                    request.on_text(delta)
        return assembler.response(self.max_output_tokens)

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={self.connection.base_url!r}, stream={self.stream})"


def from_spec(spec: ModelSpec, settings: dict[str, Any]) -> OpenAIModel:
    """Build the model for ``openai:<model>[@<base_url>]`` from provider settings."""
    return OpenAIModel(
        spec.model,
        OpenAIConnection.from_settings(settings, spec.base_url),
        max_output_tokens=setting(settings, "max_output_tokens", int, 8192),
        stream=setting(settings, "stream", bool, True),
        retry=RetryPolicy.from_settings(settings),
    )
