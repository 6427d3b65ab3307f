"""What a misbehaving provider, proxy or gateway may send, made safe before the run sees it.

* :func:`tokens`: a usage count that is missing, negative, fractional or not a number becomes a
  non-negative ``int`` (a negative count would refund the run's token and cost budgets), one past
  :data:`MAX_TOKENS` becomes :data:`MAX_TOKENS` (``10**400`` overflowed the cost's float math and
  crashed the run; any token budget still stops it);
* :func:`clean`: lone UTF-16 surrogates (``"\\ud800"`` in the JSON) become U+FFFD: Python keeps them in
  a ``str``, but they cannot be encoded as UTF-8, so the next request (or the store) would fail;
* :func:`encodable`: a request whose text holds a lone surrogate — a file name or a tool's output that
  Python decoded with ``surrogateescape``, a prompt — is sent once more with them replaced (the SDK
  cannot encode it: every call failed, and the run with it);
* :func:`header_safe`: an API key with a line break, a space or a non-ASCII character (a copy-paste slip)
  is refused before any call: the HTTP layer's error quoted the whole key into the run's error and was
  retried as a network failure;
* :func:`unique_ids`: tool calls with an empty or repeated id get a fresh one: results are paired with
  calls by id, and providers refuse a conversation whose ids repeat;
* :func:`guarded`: an SDK that chokes on a stream event (text that is not JSON, events out of order,
  a field of the wrong type) raises ``ValueError``, ``IndexError``, ``AssertionError``...: these become a
  retryable "malformed answer" error (:func:`malformed`) naming the server, never a raw traceback.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable
from typing import Any, TypeVar

from ..exceptions import ModelError
from ._retry import Retryable
from .base import ToolCall, new_call_id

__all__ = ["MAX_TOKENS", "SDK_PARSE_ERRORS", "clean", "encodable", "guarded", "header_safe", "malformed", "tokens",
           "unique_ids"]

T = TypeVar("T")

# What the SDKs raise when a response does not have the shape they expect.
SDK_PARSE_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError, LookupError, AttributeError, AssertionError)

_SURROGATE = re.compile("[\ud800-\udfff]")

MAX_TOKENS = 10**12
"""The largest token count one answer may report (no model comes near; the run's sums stay exact floats)."""


def tokens(value: Any) -> int:
    """A token count from a provider: a non-negative ``int`` (0 when missing or not a number)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return 0
    if isinstance(value, int):
        return min(max(value, 0), MAX_TOKENS)
    if isinstance(value, float) and value == value:
        return int(min(max(value, 0.0), MAX_TOKENS))  # +inf: the most
    return 0


def clean(value: T) -> T:
    """``value`` (a string, or a JSON value holding strings) with lone surrogates replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value  # type: ignore[return-value]
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [clean(v) for v in value]  # type: ignore[return-value]
    return value


async def encodable(call: Callable[[dict[str, Any]], Awaitable[T]], params: dict[str, Any]) -> T:
    """``await call(params)``; if the SDK cannot encode them (a lone surrogate in some text), once more with every
    lone surrogate replaced by U+FFFD.  Only a failed request pays for the walk through its params."""
    try:
        return await call(params)
    except UnicodeEncodeError as e:
        if "surrogate" not in str(e):
            raise
    return await call(clean(params))


def header_safe(key: str | None, provider: str, hint: str) -> None:
    """Raise :class:`ModelError` if ``key`` holds a character an HTTP header cannot carry (the key is not quoted)."""
    bad = next((i for i, ch in enumerate(key or "") if not "!" <= ch <= "~"), None)
    if bad is not None:
        raise ModelError(
            f"The {provider} API key has a character that cannot be sent in an HTTP header (a space, a line break or "
            f"a non-ASCII character, at position {bad + 1} of {len(key or '')}); {hint}, with the key alone.",
            provider=provider.lower(),
        )


def unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """``calls`` with every empty or already used id replaced by a fresh one (in place; returned)."""
    seen: set[str] = set()
    for c in calls:
        if not c.id or c.id in seen:
            c.id = new_call_id()
        seen.add(c.id)
    return calls


def malformed(label: str, section: str, model: str, what: Exception | str) -> Retryable:
    """A retryable error for an answer the SDK could not read (``what``: the detail, or the SDK's error)."""
    detail = " ".join((what if isinstance(what, str) else f"{type(what).__name__}: {what}").split())
    if len(detail) > 300:
        detail = detail[:300] + "..."
    return Retryable(ModelError(
        f"{label} sent a malformed answer for model {model!r} ({detail}). To fix: check that the base URL points "
        f"at the provider's API (not a proxy's login or error page) and that the server speaks its wire format; "
        f"or try again later, or raise [providers.{section}] max_retries.",
        provider=section,
        retryable=True,
    ))


async def guarded(events: AsyncIterable[T], fail: Callable[[Exception], Retryable]) -> AsyncGenerator[T, None]:
    """The events of an SDK stream; a parse error of the SDK while reading one becomes ``fail(error)``."""
    iterator = aiter(events)
    try:
        while True:
            try:
                item = await anext(iterator)
            except StopAsyncIteration:
                return
            except SDK_PARSE_ERRORS as e:
                raise fail(e) from e
            yield item
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()
