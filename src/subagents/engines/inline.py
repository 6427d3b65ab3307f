"""``InlineRun``: a run with no task of its own; the task that waits for it runs its body.

A foreground agent's waiter (``rt.run``, a parent's ``spawn_agent`` call) would only wait while the
agent's task ran: so it runs the agent itself, in its own task (:meth:`InlineRun.run_here`), and saves
a task, its context and two switches of the event loop per run.  To everyone else it is a
:class:`~subagents.engines.base.RunHandle` like a task: awaitable for its result, cancellable.

Cancelling it while it runs cancels the task it runs in (the host); once the body has ended (a closed
agent's body returns its cancelled result), :meth:`~InlineRun.run_here` takes that cancellation back
(``Task.uncancel``) so the host goes on, unless the host was also cancelled for itself meanwhile: then
the host gets its ``CancelledError``.  Cancelled before it started, it never runs.

>>> import asyncio
>>> async def main() -> tuple[bool, str | None]:
...     async def body() -> str:
...         return "done"
...     run = InlineRun(body)
...     return await run.run_here()
>>> asyncio.run(main())
(True, 'done')
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

__all__ = ["InlineRun"]

T = TypeVar("T")

_NEW, _RUNNING, _DONE = 0, 1, 2


class InlineRun(Generic[T]):
    """A run its waiter drives in the waiter's own task (see the module docstring)."""

    __slots__ = ("_asked", "_body", "_exc", "_host", "_result", "_state", "_waiters")

    def __init__(self, body: Callable[[], Coroutine[Any, Any, T]]) -> None:
        self._body: Callable[[], Coroutine[Any, Any, T]] | None = body
        self._state = _NEW
        self._asked = False  # cancel() was called
        self._host: asyncio.Task[Any] | None = None
        self._result: T | None = None
        self._exc: BaseException | None = None
        self._waiters: list[asyncio.Future[None]] | None = None

    @property
    def fresh(self) -> bool:
        """Not started and not cancelled: :meth:`run_here` may run it."""
        return self._state == _NEW

    async def run_here(self) -> tuple[bool, T | None]:
        """Run the body in the current task: ``(True, result)``, or ``(False, None)`` when it was cancelled
        through this handle before its body returned a result (whoever cancelled it ends the run then)."""
        if self._state != _NEW:
            raise RuntimeError("an InlineRun runs once")
        host = asyncio.current_task()
        assert host is not None
        assert self._body is not None
        body, self._body = self._body, None
        self._host, self._state = host, _RUNNING
        before = host.cancelling()
        try:
            result = await body()
        except asyncio.CancelledError as e:
            self._end(None, e)
            if self._asked and host.uncancel() <= before:
                return False, None  # only this handle's cancel: the host goes on
            raise
        except BaseException as e:
            self._end(None, e)
            raise
        self._end(result, None)
        if self._asked and host.uncancel() > before:
            raise asyncio.CancelledError  # the host was cancelled for itself too: one delivery served both
        return True, result

    def _end(self, result: T | None, exc: BaseException | None) -> None:
        self._state, self._result, self._exc, self._host = _DONE, result, exc, None
        for w in self._waiters or ():
            if not w.done():
                w.set_result(None)
        self._waiters = None

    # -- RunHandle ------------------------------------------------------------------------------
    def cancel(self, msg: Any | None = None) -> bool:
        if self._state == _DONE or self._asked:
            return False
        self._asked = True
        if self._state == _NEW:  # it never runs
            self._body = None
            self._end(None, asyncio.CancelledError())
            return True
        assert self._host is not None
        return self._host.cancel(msg)

    def done(self) -> bool:
        return self._state == _DONE

    def cancelled(self) -> bool:
        return self._state == _DONE and isinstance(self._exc, asyncio.CancelledError)

    def __await__(self) -> Generator[Any, None, T]:
        if self._state != _DONE:
            fut = asyncio.get_running_loop().create_future()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(fut)
            yield from fut
        if self._exc is not None:
            raise self._exc
        return self._result  # type: ignore[return-value]
