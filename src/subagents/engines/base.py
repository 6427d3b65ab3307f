"""The :class:`Executor` protocol: the seam between the runtime and the engine that runs agents.

The runtime decides *what* runs (the manager builds an agent, records it, and gives the executor
a body: a coroutine function that drives that agent to its end); the executor decides *where*
and *how*.  Everything the runtime does with a running agent goes through the handle it gets
back: wait for it, cancel it, ask whether it is done.

The Temporal engine does not fit behind this seam, and does not need to: there a run is a workflow
whose steps (model calls, tool calls, spawns) the workflow itself orders, so a runtime with an
engine URL hands its whole lifecycle (``run``, ``spawn``, ``send_input``, ``wait``, ``close``...)
to a client instead (:mod:`subagents.runtime.remote`), and the workers' runtime uses the manager's
parts inside activities (:mod:`subagents.engines.temporal`).  The executor still runs that
client's services (the event reader) in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

__all__ = ["Executor", "RunHandle"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class RunHandle(Protocol[T_co]):
    """A running agent (or service): awaitable for its result, cancellable.  ``asyncio.Task`` is one."""

    def cancel(self, msg: Any | None = None) -> bool: ...

    def done(self) -> bool: ...

    def cancelled(self) -> bool: ...

    def __await__(self) -> Generator[Any, None, T_co]: ...


class Executor(Protocol):
    """Runs agent bodies and the runtime's own services (the sweeper, requests from other processes)."""

    name: str
    """Short engine name for messages and ``config show`` (``"local"``)."""

    def start_run(self, run_id: str, name: str, body: Callable[[], Coroutine[Any, Any, T]]) -> RunHandle[T]:
        """Start the agent run ``run_id``; ``body()`` drives it to its end and returns its result."""
        ...

    def start_service(self, name: str, body: Callable[[], Coroutine[Any, Any, Any]]) -> RunHandle[Any]:
        """Start a runtime service (kept referenced until it ends; its failure is not lost)."""
        ...

    async def stop_service(self, handle: RunHandle[Any]) -> None:
        """Cancel a service and wait until it has ended (raises nothing)."""
        ...

    async def aclose(self) -> None:
        """Cancel the services still running and wait for them (agent runs are closed by the runtime first)."""
        ...
