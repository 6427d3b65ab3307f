"""``FunctionModel``: the project's one scripted model (tests, examples, the offline demo)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import cast

from .._threads import call_in_thread
from .base import ModelRequest, ModelResponse
from .pricing import Prices

__all__ = ["FunctionModel", "ModelFunction"]

ModelFunction = Callable[[ModelRequest], ModelResponse | str | Awaitable[ModelResponse | str]]


class FunctionModel:
    """A model whose answers come from a Python function.

    ``fn(request)`` may be sync or async and returns a :class:`ModelResponse` (or a plain string,
    taken as the final text).  A sync function runs in a daemon worker thread, so one that blocks or
    never returns cannot freeze the event loop: ``timeout_s`` and cancellation still end the run, and
    the process still exits (the call is left behind in its thread).  ``request.on_text`` may be
    called from it: the deltas are handed to the event loop.  ``inline=True`` runs a sync function on
    the event loop instead (no thread hop, about 0.1 ms less per call: for benchmarks of instant
    scripts; a script that blocks then blocks everything).

    >>> import asyncio
    >>> from subagents.models import AgentInfo, ModelRequest
    >>> m = FunctionModel(lambda req: "hi " + req.last_user_text)
    >>> from subagents.messages import Message
    >>> req = ModelRequest(AgentInfo("a", "a", "general-purpose"), "", [Message.user("bob")], [])
    >>> asyncio.run(m.request(req)).text
    'hi bob'
    """

    __slots__ = ("_async", "calls", "fn", "inline", "name", "prices")

    def __init__(self, fn: ModelFunction, *, name: str = "function", prices: Prices | None = None,
                 inline: bool = False) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name
        self.prices = prices  # scripted runs may give themselves prices to exercise cost limits
        self.calls = 0
        self.inline = inline
        self._async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - async callables
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self._async or self.inline:
            out = self.fn(request)
        else:
            out = await call_in_thread(self.fn, _deltas_to_loop(request))
        if type(out) is ModelResponse:  # the common case: nothing to await or convert
            return out
        if self._async or inspect.isawaitable(out):
            out = await cast(Awaitable[ModelResponse | str], out)
        if isinstance(out, str):
            return ModelResponse(text=out)
        if not isinstance(out, ModelResponse):
            raise TypeError(
                f"FunctionModel function returned {type(out).__name__}; return a ModelResponse or a str"
            )
        return out

    def __repr__(self) -> str:
        return f"FunctionModel({getattr(self.fn, '__name__', repr(self.fn))}, name={self.name!r})"


def _deltas_to_loop(request: ModelRequest) -> ModelRequest:
    """``request`` whose ``on_text`` may be called from another thread (it runs on the event loop)."""
    on_text = request.on_text
    if on_text is None:
        return request
    loop = asyncio.get_running_loop()

    def hand_over(delta: str) -> None:
        loop.call_soon_threadsafe(on_text, delta)

    return dataclasses.replace(request, on_text=hand_over)
