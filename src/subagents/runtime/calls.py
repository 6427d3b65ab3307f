"""Running the parallel-safe tool calls of one turn concurrently, without a task per call that needs none.

``asyncio.gather`` wraps every call in a task (~15 µs each, and objects the garbage collector walks):
a fan-out of 10,000 background ``spawn_agent`` calls paid that for calls that all finish at once.
:func:`run_parallel` starts each call on the agent's own task instead, in order, as a lone call is
run; a call that finishes in its first step costs nothing more.  When one waits (a foreground spawn, a
file read in a thread), the calls after it start as tasks, as with ``gather``, while the agent's task
goes on with the waiting one; cancelling the agent cancels them all.  When none waited, the agent lets
the loop run twice before it goes on, as awaiting a gather's tasks would have: what the calls started
(children with an instant model) runs before the agent's next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["run_parallel"]

T = TypeVar("T")
B = TypeVar("B")


async def run_parallel(run_one: Callable[[B], Coroutine[Any, Any, T]], calls: list[B]) -> list[T]:
    """``[await run_one(c) for c in calls]``, run concurrently; results in the calls' order."""
    out: list[T] = []
    for k, call in enumerate(calls):
        coro = run_one(call)
        try:
            first = coro.send(None)
        except StopIteration as done:
            out.append(done.value)
            continue
        rest = asyncio.gather(*(run_one(c) for c in calls[k + 1:]))  # tasks, started now
        try:
            out.append(await _Started(coro, first))
        except BaseException:
            rest.cancel()
            raise
        out.extend(await rest)
        return out
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return out


class _Started(Awaitable[T]):
    """Awaiting it goes on with a coroutine whose first step already ran and yielded ``first``: what
    ``await coro`` would have done from there (values and exceptions, cancellation included, pass through)."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[Any, Any, T], first: Any) -> None:
        self.coro, self.first = coro, first

    def __await__(self) -> Generator[Any, Any, T]:
        coro, y = self.coro, self.first
        self.first = None
        while True:
            try:
                v = yield y
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # handed to the coroutine, as ``await`` does
                try:
                    y = coro.throw(e)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
            else:
                try:
                    y = coro.send(v)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
