"""SDK clients shared by every model that reaches the same server: one per address, key and event loop.

An ``AsyncAnthropic`` or ``AsyncOpenAI`` client owns an HTTP connection pool, and building one costs
milliseconds (an SSL context).  A :class:`ClientPool` keeps one client per *key* — the provider, the
server's address, the API key and the timeouts — so the calls of every agent that talks to that
server reuse its kept-alive connections.

An async HTTP client belongs to the event loop it first ran on, so the pool keeps one client per key
*and loop*: a second ``asyncio.run`` (or a runtime on another thread's loop) gets its own.  The clients
of a loop are closed

* by :meth:`ClientPool.aclose` (``Runtime.aclose`` calls it for the runtime's pool), and
* when their loop ends under ``asyncio.run`` / ``asyncio.Runner``: each loop's clients are watched by
  an async generator that the loop finalizes at shutdown (``loop.shutdown_asyncgens``), while the
  loop still runs and the clients can still be awaited.

A loop closed without ``shutdown_asyncgens`` cannot close what it left open; its clients are dropped
the next time the pool is used.  :data:`SHARED` is the pool of models built without one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Hashable
from typing import Protocol, TypeVar, cast

__all__ = ["SHARED", "Client", "ClientPool"]


class Client(Protocol):
    """What the pool needs of an SDK client (``AsyncAnthropic`` and ``AsyncOpenAI`` have both)."""

    def is_closed(self) -> bool: ...

    async def close(self) -> None: ...


C = TypeVar("C", bound=Client)
_Loop = asyncio.AbstractEventLoop


class ClientPool:
    """One client per key and event loop; :meth:`aclose` closes those of the running loop."""

    __slots__ = ("_clients", "_watchers")

    def __init__(self) -> None:
        self._clients: dict[_Loop, dict[Hashable, Client]] = {}
        self._watchers: dict[_Loop, AsyncGenerator[None, None]] = {}

    async def get(self, key: Hashable, open: Callable[[], C]) -> C:
        """The running loop's client for ``key``, made by ``open()`` the first time (or after it closed)."""
        loop = asyncio.get_running_loop()
        clients = self._clients.get(loop)
        if clients is None:
            clients = await self._watch(loop)
        client = clients.get(key)
        if client is None or client.is_closed():
            client = clients[key] = open()
        return cast(C, client)

    def __len__(self) -> int:
        """How many clients are open, on every loop."""
        return sum(1 for clients in self._clients.values() for c in clients.values() if not c.is_closed())

    async def aclose(self) -> None:
        """Close the running loop's clients; those of other loops that still run are closed there."""
        current = asyncio.get_running_loop()
        for loop, watcher in list(self._watchers.items()):
            if loop is current:
                await watcher.aclose()  # its ``finally`` closes the clients
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(watcher.aclose(), loop)
            elif loop.is_closed():
                self._forget(loop)

    async def _watch(self, loop: _Loop) -> dict[Hashable, Client]:
        for old in [lp for lp in self._clients if lp.is_closed()]:  # ended without shutdown_asyncgens
            self._forget(old)
        clients: dict[Hashable, Client] = {}
        self._clients[loop] = clients
        watcher = self._until_loop_ends(loop, clients)
        self._watchers[loop] = watcher  # the loop keeps only a weak reference to it
        await anext(watcher)  # started: the loop finalizes it when it shuts down
        return clients

    async def _until_loop_ends(self, loop: _Loop, clients: dict[Hashable, Client]) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if self._clients.get(loop) is clients:
                self._forget(loop)
            for client in clients.values():
                with contextlib.suppress(Exception):  # a broken client must not keep the others open
                    await client.close()

    def _forget(self, loop: _Loop) -> None:
        self._clients.pop(loop, None)
        self._watchers.pop(loop, None)


SHARED = ClientPool()
"""The pool of models built without one (a model made by hand, or ``resolve_model`` without ``clients``)."""
