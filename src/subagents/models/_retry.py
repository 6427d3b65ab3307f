"""Retries and error wording shared by the provider adapters.

The SDKs' own retries are switched off (``max_retries=0``) so that the counting is ours:

* a failure worth another attempt (HTTP 408, 409, 429, 5xx including Anthropic's 529 "overloaded",
  a dropped connection, any timeout of :mod:`._timeouts`, a stream that ends without its stop
  reason) is raised by the adapter as :class:`Retryable`;
* :func:`call_with_retries` sleeps (exponential backoff with jitter, or the server's ``retry-after``)
  and calls again, up to ``max_retries`` times, then raises the last :class:`ModelError`;
* anything else (401, 403, 400, context length, 404) is raised as a plain :class:`ModelError` and
  never retried.

A model call happens before any tool of its turn runs, so a retry can never repeat a tool call.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .._config_values import MAX_RETRIES, RETRY_BASE_S, RETRY_MAX_S
from ..exceptions import ConfigError, ModelError

__all__ = [
    "RetryPolicy",
    "Retryable",
    "call_with_retries",
    "check_url",
    "is_retryable_status",
    "parse_retry_after",
    "server_text",
    "setting",
    "status_error",
    "truncated_error",
    "url_problem",
]

log = logging.getLogger("subagents.models")

T = TypeVar("T")


def setting(settings: Mapping[str, Any], key: str, kind: type[T], default: T) -> T:
    """``settings[key]`` converted to ``kind`` (``default`` when absent); :class:`ConfigError` if it is not."""
    value = settings.get(key)
    if value is None:
        return default
    if kind is bool and isinstance(value, bool):
        return value  # type: ignore[return-value]
    if kind in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return kind(value)  # type: ignore[call-arg]
    if kind is str and isinstance(value, str):
        return value  # type: ignore[return-value]
    raise ConfigError(
        f"model setting {key!r} must be {kind.__name__}, got {type(value).__name__} {value!r}; "
        f"fix it in [providers.<name>] of .subagents/config.toml (or ~/.config/subagents/config.toml) or in "
        f"the settings you pass"
    )


def url_problem(url: str) -> str | None:
    """What is wrong with a base URL, to follow "the base URL 'x'" (``None``: nothing); the HTTP layer raised a bare
    ``InvalidURL`` at the first call for these, which ended the run with a traceback."""
    if not url.lower().startswith(("http://", "https://")):
        return "must start with http:// or https://"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return "holds a space or a control character"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is no number or out of range)
    except ValueError as e:
        return f"is not a URL ({e})"
    return None if parts.hostname else "names no host"


def check_url(url: str | None, section: str) -> None:
    """Raise :class:`ModelError` (not retried) if the ``base_url`` setting ``url`` is no usable URL."""
    problem = None if url is None else url_problem(url)
    if problem is not None:
        raise ModelError(f"the base URL {url!r} {problem}; fix [providers.{section}] base_url (e.g. "
                         "http://localhost:11434/v1)", provider=section)


@dataclass(slots=True, frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a failed model call."""

    max_retries: int = MAX_RETRIES
    base_s: float = RETRY_BASE_S
    max_s: float = RETRY_MAX_S

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RetryPolicy:
        policy = cls(
            setting(settings, "max_retries", int, MAX_RETRIES),
            setting(settings, "retry_base_s", float, RETRY_BASE_S),
            setting(settings, "retry_max_s", float, RETRY_MAX_S),
        )
        if policy.max_retries < 0 or policy.base_s < 0 or policy.max_s < 0:
            raise ConfigError(
                f"max_retries, retry_base_s and retry_max_s must not be negative (got {policy.max_retries}, "
                f"{policy.base_s}, {policy.max_s}); fix the model settings"
            )
        return policy

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0).

        The server's ``retry-after`` wins when given; otherwise ``base_s * 2**attempt`` with "equal
        jitter" (between half and all of it).  Both are capped at ``max_s``.
        """
        if retry_after is not None and retry_after == retry_after:  # (NaN would sleep forever)
            return min(max(retry_after, 0.0), self.max_s)
        cap = min(self.max_s, self.base_s * float(2**attempt))
        return cap / 2 + random.random() * cap / 2


class Retryable(Exception):
    """Raised by an adapter for a failure worth another attempt (internal to the adapters)."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def is_retryable_status(status: int) -> bool:
    """429 (rate limit), 529 (overloaded), other 5xx, 408 (timeout) and 409 (conflict) are retried."""
    return status in (408, 409, 429) or status >= 500


def _seconds(raw: str, scale: float = 1.0) -> float | None:
    """``raw`` as a number of seconds (``scale``: per unit), ``None`` when it is no number or NaN."""
    try:
        value = float(raw) / scale
    except ValueError:
        return None
    return value if value == value else None  # NaN: no value (``asyncio.sleep(nan)`` never returns)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), if present and a number."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None and (value := _seconds(ms, 1000.0)) is not None:
        return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    if (value := _seconds(raw)) is not None:
        return value
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


_HINTS = {
    401: "check the API key: {key_hint}",
    403: "the API key has no access to this model or feature; check the key's permissions: {key_hint}",
    404: "check the model name {model!r} and the base URL",
    413: "the request is too large; shorten the conversation or the tool outputs",
    429: "the provider is rate-limiting this key; wait, lower [agents] max_threads, or raise max_retries",
}


MAX_SERVER_MESSAGE = 500
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def server_text(message: str) -> str:
    """A server's error message fit for one line: an HTML page (a proxy's error page) becomes its title or
    its text, whitespace is collapsed and anything past :data:`MAX_SERVER_MESSAGE` characters is cut."""
    if "<" in message and re.search(r"<(html|head|body|title|!doctype)\b", message, re.IGNORECASE):
        title = _TITLE.search(message)
        message = "HTML page: " + (title.group(1) if title else _TAG.sub(" ", message))
    message = " ".join(message.split())
    return message if len(message) <= MAX_SERVER_MESSAGE else message[:MAX_SERVER_MESSAGE] + "..."


def status_error(
    provider: str, status: int, server_message: str, *, model: str, key_hint: str, retryable: bool
) -> ModelError:
    """A :class:`ModelError` naming the provider, the HTTP status, the server's message and what to do."""
    lowered = server_message.lower()
    if ("context" in lowered and ("length" in lowered or "window" in lowered)) or "too long" in lowered:
        hint = "the conversation no longer fits the model's context window; start a fresh run or shorten the prompt"
    elif status in _HINTS:
        hint = _HINTS[status].format(key_hint=key_hint, model=model)
    elif status >= 500:
        hint = "the provider is failing or overloaded; try again later or raise max_retries"
    elif status == 400:
        hint = "the provider rejected the request; check the model name and the settings passed to it"
    else:
        hint = "see the provider's message above"
    message = server_text(server_message).rstrip(".") or "no message"
    return ModelError(
        f"{provider} returned HTTP {status} for model {model!r}: {message}. To fix: {hint}.",
        provider=provider.split()[0].lower(),
        status=status,
        retryable=retryable,
    )


def truncated_error(label: str, section: str, model: str, missing: str) -> Retryable:
    """A stream that ended without its stop reason: the answer is incomplete, so it is retried, never used."""
    return Retryable(ModelError(
        f"{label}: the stream for model {model!r} ended before the answer was complete ({missing}); the partial "
        f"answer was discarded. To fix: this is a dropped connection or a proxy or server that cut the stream; "
        f"try again later, or raise [providers.{section}] max_retries.",
        provider=section,
        retryable=True,
    ))


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Await ``attempt()``; on :class:`Retryable` wait and try again up to ``policy.max_retries`` times."""
    tries = 0
    while True:
        try:
            return await attempt()
        except Retryable as failure:
            err = failure.error
            if tries >= policy.max_retries:
                raise ModelError(
                    f"{err} Gave up after {tries + 1} attempts (max_retries={policy.max_retries}).",
                    provider=err.provider,
                    status=err.status,
                    retryable=True,
                ) from failure
            delay = policy.delay(tries, failure.retry_after)
            tries += 1
            log.warning("model call failed (%s); retry %d/%d in %.2fs", err, tries, policy.max_retries, delay)
            await sleep(delay)
