"""``FunctionModel``: the project's one scripted model (tests, examples, the offline demo)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import cast

from .base import ModelRequest, ModelResponse
from .pricing import Prices

__all__ = ["FunctionModel", "ModelFunction"]

ModelFunction = Callable[[ModelRequest], ModelResponse | str | Awaitable[ModelResponse | str]]


class FunctionModel:
    """A model whose answers come from a Python function.

    ``fn(request)`` may be sync or async and returns a :class:`ModelResponse` (or a plain string,
    taken as the final text).  Sync functions run inline on the event loop: keep them quick.

    >>> import asyncio
    >>> from subagents.models import AgentInfo, ModelRequest
    >>> m = FunctionModel(lambda req: "hi " + req.last_user_text)
    >>> from subagents.messages import Message
    >>> req = ModelRequest(AgentInfo("a", "a", "general-purpose"), "", [Message.user("bob")], [])
    >>> asyncio.run(m.request(req)).text
    'hi bob'
    """

    __slots__ = ("_async", "calls", "fn", "name", "prices")

    def __init__(self, fn: ModelFunction, *, name: str = "function", prices: Prices | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name
        self.prices = prices  # scripted runs may give themselves prices to exercise cost limits
        self.calls = 0
        self._async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - async callables
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        out = self.fn(request)
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
