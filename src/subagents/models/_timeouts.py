"""Every model call ends: connect, read, stall and total timeouts, and how a timeout is reported.

* ``connect_timeout_s`` and ``read_timeout_s`` go to the SDK's HTTP client: opening the connection,
  and any wait for bytes (the response headers, each read of the body);
* ``stall_timeout_s``: a stream must deliver a complete event at least this often (:func:`watch`);
  a server that trickles bytes that never make an event defeats the read timeout, not this one;
* ``timeout_s``: the whole attempt (request, answer, stream) is over by then (:func:`within`),
  whatever the server does.  The SDKs have no such deadline of their own.

A timeout is raised as :class:`~._retry.Retryable`, so it is retried like a 429 or a 5xx; the final
error names the timeout that fired, its value and the key that raises it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .._config_values import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, STALL_TIMEOUT_S, TIMEOUT_S
from ..exceptions import ConfigError, ModelError
from ._retry import Retryable, setting

__all__ = ["Stalled", "Timeouts", "sdk_timeout_key", "timeout_error", "transport_error_name", "watch", "within"]

T = TypeVar("T")

_WHAT = {
    "connect_timeout_s": "did not accept the connection within {s:g} s",
    "read_timeout_s": "sent no data for {s:g} s",
    "stall_timeout_s": "sent no stream event for {s:g} s (the stream stalled)",
    "timeout_s": "did not finish its answer within {s:g} s",
}


@dataclass(slots=True, frozen=True)
class Timeouts:
    """Seconds: to connect, of silence, between stream events, and for a whole attempt."""

    connect_s: float = CONNECT_TIMEOUT_S
    read_s: float = READ_TIMEOUT_S
    stall_s: float = STALL_TIMEOUT_S
    total_s: float = TIMEOUT_S

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Timeouts:
        t = cls(
            setting(settings, "connect_timeout_s", float, CONNECT_TIMEOUT_S),
            setting(settings, "read_timeout_s", float, READ_TIMEOUT_S),
            setting(settings, "stall_timeout_s", float, STALL_TIMEOUT_S),
            setting(settings, "timeout_s", float, TIMEOUT_S),
        )
        if min(t.connect_s, t.read_s, t.stall_s, t.total_s) <= 0:
            raise ConfigError(
                f"connect_timeout_s, read_timeout_s, stall_timeout_s and timeout_s must be positive (got "
                f"{t.connect_s:g}, {t.read_s:g}, {t.stall_s:g}, {t.total_s:g}); fix the model settings"
            )
        return t

    def seconds(self, key: str) -> float:
        """The value of a timeout by its setting's name (``read_timeout_s``...)."""
        return {"connect_timeout_s": self.connect_s, "read_timeout_s": self.read_s,
                "stall_timeout_s": self.stall_s, "timeout_s": self.total_s}[key]

    def for_sdk(self, timeout_type: Callable[..., T]) -> T:
        """The SDK's ``Timeout``: connect (and pool), read (and write); the total deadline is :func:`within`."""
        return timeout_type(self.total_s, connect=self.connect_s, read=self.read_s, write=self.read_s,
                            pool=self.connect_s)


def timeout_error(label: str, section: str, model: str, key: str, seconds: float) -> Retryable:
    """A retryable timeout: ``<label> sent no data for 0.2 s for model 'x'. To fix: ... raise <key>``."""
    what = _WHAT[key].format(s=seconds)
    return Retryable(ModelError(
        f"{label} {what} for model {model!r}. To fix: check that the server is up and not overloaded, or "
        f"raise [providers.{section}] {key} (now {seconds:g}).",
        provider=section,
        retryable=True,
    ))


def _httpx_names(exc: BaseException) -> list[str]:
    return [c.__name__ for c in type(exc).__mro__ if c.__module__.partition(".")[0] in ("httpx", "httpx2")]


def transport_error_name(exc: BaseException) -> str | None:
    """The class name of an HTTP-layer transport error (``ReadTimeout``, ``RemoteProtocolError``...), else None.

    The SDKs' HTTP client is ``httpx`` or ``httpx2`` depending on their version; it is recognised by
    module so that neither has to be imported here.
    """
    names = _httpx_names(exc)
    return names[0] if "TransportError" in names else None


def sdk_timeout_key(exc: BaseException) -> str:
    """Which setting bounds the SDK's timeout error ``exc`` (its cause tells connect from read)."""
    cause = exc.__cause__ or exc.__context__
    names = _httpx_names(exc) + (_httpx_names(cause) if cause is not None else [])
    return "connect_timeout_s" if {"ConnectTimeout", "PoolTimeout"} & set(names) else "read_timeout_s"


class Stalled(Exception):
    """Raised by :func:`watch` when no event came within ``stall_s`` (turned into a timeout by :func:`within`)."""


async def watch(events: AsyncIterable[T], stall_s: float) -> AsyncGenerator[T, None]:
    """The events of a stream, raising :class:`Stalled` if the next one takes longer than ``stall_s``."""
    iterator = aiter(events)
    try:
        while True:
            timer = asyncio.timeout(stall_s)
            try:
                async with timer:
                    item = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if timer.expired():
                    raise Stalled from None
                raise
            yield item
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


async def within(call: Callable[[], Awaitable[T]], timeouts: Timeouts,
                 fail: Callable[[str, float], Retryable]) -> T:
    """``await call()`` under the total deadline; a stall or the deadline becomes ``fail(key, seconds)``."""
    deadline = asyncio.timeout(timeouts.total_s)
    try:
        async with deadline:
            return await call()
    except Stalled:
        raise fail("stall_timeout_s", timeouts.stall_s) from None
    except TimeoutError:
        if deadline.expired():
            raise fail("timeout_s", timeouts.total_s) from None
        raise
