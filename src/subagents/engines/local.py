"""``LocalExecutor``: every agent run is an asyncio task on the runtime's event loop (the default engine).

This is the only place in the package that creates the tasks agents run in.

>>> import asyncio
>>> from subagents.engines import LocalExecutor
>>> async def main() -> str:
...     ex = LocalExecutor()
...     async def body() -> str:
...         return "done"
...     return await ex.start_run("run-1", "agent:demo", body)
>>> asyncio.run(main())
'done'
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .base import RunHandle

__all__ = ["LocalExecutor", "to_the_end"]

T = TypeVar("T")
log = logging.getLogger("subagents.engines")


async def to_the_end(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` in a task of its own that a cancellation of the awaiting task does not stop: on
    cancellation ``work`` is still awaited to its end (its errors dropped), then the cancellation goes on.
    For a step whose half-done state nobody could tidy (``git worktree add``: its branch and checkout)."""
    task = asyncio.get_running_loop().create_task(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved (dropped): the caller is being cancelled
        raise


class LocalExecutor:
    """Runs agents as asyncio tasks of the running event loop."""

    name = "local"

    def __init__(self) -> None:
        self._services: set[asyncio.Task[Any]] = set()

    def start_run(self, run_id: str, name: str, body: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Task[T]:
        return asyncio.get_running_loop().create_task(body(), name=name)

    def start_service(self, name: str, body: Callable[[], Coroutine[Any, Any, Any]]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(body(), name=name)
        self._services.add(task)
        task.add_done_callback(self._service_done)
        return task

    def _service_done(self, task: asyncio.Task[Any]) -> None:
        self._services.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("subagents service %s failed", task.get_name(), exc_info=task.exception())

    async def stop_service(self, handle: RunHandle[Any]) -> None:
        handle.cancel()
        if isinstance(handle, asyncio.Future):  # asyncio.wait raises nothing: no traceback through this frame
            await asyncio.wait([handle])

    async def aclose(self) -> None:
        services = list(self._services)
        for t in services:
            t.cancel()
        if services:  # asyncio.wait raises nothing: no traceback through this frame to keep it alive
            await asyncio.wait(services)
