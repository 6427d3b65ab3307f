"""Events: one small record per step, delivered to async iterators and callbacks.

Kinds: ``run_start``, ``run_end``, ``turn_start``, ``model_end`` (after each model call: model, usage,
cost_usd, stop_reason, or error), ``assistant_text``, ``tool_start``, ``tool_end``,
``subagent_spawned`` (``call_id``: the tool call that spawned it, when someone listens),
``subagent_status_changed``, ``subagent_completed``, ``announcement``.
Each carries the agent id, its parent id and depth.  Publishing costs nothing when nobody listens.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CURRENT_CALL", "Event", "EventBus", "EventCallback", "Gate"]

log = logging.getLogger("subagents.events")
LOGGED_FAILURES = 10
"""How many failures of one callback are logged with their traceback (then one line says the rest are not)."""


@dataclass(slots=True, init=False)
class Event:
    """One step: ``kind``, who (``agent_id``, ``nickname``, ``parent_id``, ``depth``), when (``ts``) and ``data``."""

    kind: str
    agent_id: str
    parent_id: str | None
    depth: int
    data: dict[str, Any]
    ts: float
    nickname: str

    def __init__(self, kind: str, agent_id: str, parent_id: str | None, depth: int,
                 data: dict[str, Any] | None = None, ts: float | None = None, nickname: str = "") -> None:
        # (by hand: the generated one tests each defaulted field against a marker; an event is built per step)
        self.kind = kind
        self.agent_id = agent_id
        self.parent_id = parent_id
        self.depth = depth
        self.data = {} if data is None else data
        self.ts = time.time() if ts is None else ts
        self.nickname = nickname

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "agent_id": self.agent_id, "nickname": self.nickname,
                "parent_id": self.parent_id, "depth": self.depth, "ts": self.ts, **self.data}


EventCallback = Callable[[Event], Any]

CURRENT_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar("subagents_current_call", default=None)
"""The id of the tool call the running agent task is executing (set by the loop only while someone listens):
``subagent_spawned`` carries it as ``call_id``, so a listener knows which call started a child."""


class _Subscription:
    __slots__ = ("closed", "queue", "waiter")

    def __init__(self) -> None:
        self.queue: collections.deque[Event] = collections.deque()
        self.waiter: asyncio.Future[None] | None = None
        self.closed = False

    def push(self, ev: Event) -> None:
        self.queue.append(ev)
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)


class EventBus:
    """Fan-out of events to subscribers (async iterators) and callbacks, in publish order."""

    __slots__ = ("_busy", "_callbacks", "_closed", "_failures", "_held", "_sinks", "_subs", "active")

    def __init__(self) -> None:
        self._subs: list[_Subscription] = []
        self._callbacks: list[EventCallback] = []
        self._sinks: tuple[Callable[[Event], Any], ...] = ()  # the callbacks, then the subscriptions' pushes
        self._held: collections.deque[Event | Gate] = collections.deque()
        self._failures: dict[int, int] = {}  # id(callback) -> how many times it raised
        # an event is being handed out: what a listener publishes (or a gate it opens) meanwhile queues behind it,
        # so every listener sees one order
        self._busy = False
        self._closed = False
        self.active = False

    # -- gates: "publish nothing past this point until the store has committed" ------------------
    def gate(self) -> Gate:
        """Hold every event published from now on (in order) until :meth:`open` is called for this gate.

        The manager puts a gate before each status event and asks the store to open it once the
        status is committed (``Gate.open_threadsafe`` from the store's writer thread), so no one
        sees a status the store does not hold — while the caller never waits for the disk.
        """
        g = Gate(self, asyncio.get_running_loop())
        self._held.append(g)
        return g

    def hold(self, g: Gate) -> None:
        """Queue ``g`` (made but not queued yet) at this point of the stream, unless it was opened already.

        What the recorder does after the store said it will call ``g`` on commit: a store that commits
        at once never gets a gate queued (no object in the stream, nothing to open).
        """
        if not g.is_open:
            self._held.append(g)

    def open(self, g: Gate) -> None:
        """Open ``g``; deliver what it held, up to the next gate still closed (a SQLite batch's events at once).

        Opened while an event is being handed out (a listener flushed the store), the delivery under way goes on
        past it."""
        g.is_open = True
        self._drain()

    def _drain(self) -> None:
        """Deliver the queued events up to the first gate still closed, unless a delivery is under way (it goes on
        past what was opened)."""
        if self._busy:
            return
        self._busy = True
        try:
            self._drain_held()
        finally:
            self._busy = False

    def _drain_held(self) -> None:
        q = self._held
        while q:
            x = q.popleft()
            if type(x) is Gate:
                if not x.is_open:
                    q.appendleft(x)
                    return
            else:
                for f in self._sinks:  # (read per event: a callback may subscribe or unsubscribe)
                    try:
                        f(x)  # type: ignore[arg-type]
                    except Exception:
                        self._failed(f, x)  # type: ignore[arg-type]

    def _release_all(self) -> None:
        for x in self._held:
            if type(x) is Gate:
                x.is_open = True
        self._drain()

    def _refresh(self) -> None:
        self._sinks = (*self._callbacks, *(s.push for s in self._subs))
        self.active = bool(self._sinks)

    def on(self, callback: EventCallback) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, synchronously, in publish order.

        An exception it raises is its own bug, not the run's: it is logged (logger ``subagents.events``: the first
        :data:`LOGGED_FAILURES` with their traceback, then one line) and the event goes on to the other listeners;
        the run never sees it.  (``KeyboardInterrupt`` and other ``BaseException`` s still propagate.)"""
        self._callbacks.append(callback)
        self._refresh()

        def off() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
                if callback not in self._callbacks:  # (its id may be another callback's later)
                    self._failures.pop(id(callback), None)
                self._refresh()

        return off

    def publish(self, ev: Event) -> None:
        """Deliver ``ev`` to every callback and subscription now, or behind the gates still closed (or behind the
        event being handed out: a listener that publishes, e.g. by spawning an agent, does not reorder the
        stream for the listeners after it)."""
        if self._held or self._busy:
            self._held.append(ev)
            return
        self._busy = True
        try:
            for f in self._sinks:
                try:
                    f(ev)
                except Exception:
                    self._failed(f, ev)
            if self._held:  # what the listeners published meanwhile
                self._drain_held()
        finally:
            self._busy = False

    def _failed(self, f: Callable[[Event], Any], ev: Event) -> None:
        """``f`` raised on ``ev`` (called in its ``except``): log it, at most :data:`LOGGED_FAILURES` times in full."""
        n = self._failures[id(f)] = self._failures.get(id(f), 0) + 1
        if n <= LOGGED_FAILURES:
            log.error("event listener %s raised on a %s event of agent %s (the run goes on; the listener keeps "
                      "receiving events)", _name(f), ev.kind, ev.agent_id, exc_info=True)
        if n == LOGGED_FAILURES:
            log.error("event listener %s failed %d times; its further failures are not logged", _name(f), n)

    def close(self) -> None:
        """End every subscription (their iterators stop after draining); held events are delivered first."""
        self._closed = True
        self._release_all()
        for s in self._subs:
            s.closed = True
            if s.waiter is not None and not s.waiter.done():
                s.waiter.set_result(None)
        self._subs.clear()
        self._refresh()

    def subscribe(self) -> AsyncIterator[Event]:
        """Every event from this call on, until the bus closes (or the consumer stops iterating).

        The subscription starts here, not at the first iteration: nothing published in between is
        lost.  Iterate it (or ``aclose()`` it) — an iterator never started keeps its events queued.  A wait for the
        next event that is cancelled (``asyncio.wait_for(stream.__anext__(), t)`` timing out) leaves the
        subscription as it was; on a closed bus the iterator ends at once.
        """
        sub = _Subscription()
        if self._closed:
            sub.closed = True
        else:
            self._subs.append(sub)
            self._refresh()
        return _Stream(self, sub)

    def _drop(self, sub: _Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)
            self._refresh()


class _Stream:
    """The iterator :meth:`EventBus.subscribe` returns; dropping or closing it ends the subscription.

    (An object, not an async generator: a generator's ``__anext__`` cancelled by a timeout ends the generator, and
    it cannot be closed while another task waits in it.)"""

    __slots__ = ("_bus", "_sub")

    def __init__(self, bus: EventBus, sub: _Subscription) -> None:
        self._bus, self._sub = bus, sub

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> Event:
        sub = self._sub
        while True:
            if sub.queue:
                return sub.queue.popleft()
            if sub.closed:
                self._bus._drop(sub)
                raise StopAsyncIteration
            w = sub.waiter
            if w is None or w.done():  # (two tasks waiting on one stream share the wake-up)
                w = sub.waiter = asyncio.get_running_loop().create_future()
            await w

    async def aclose(self) -> None:
        sub = self._sub
        sub.closed = True
        sub.queue.clear()
        if sub.waiter is not None and not sub.waiter.done():
            sub.waiter.set_result(None)  # a task waiting in __anext__ ends its iteration
        self._bus._drop(sub)

    def __del__(self) -> None:
        self._bus._drop(self._sub)


class Gate:
    """A point in the event stream that holds later events until it is opened (see :meth:`EventBus.gate`).

    Calling it opens it: at once on its own event loop (where the SQLite store calls a batch's commit
    callbacks, together), else by a hand-over to that loop (from any other thread).
    """

    __slots__ = ("bus", "is_open", "loop")

    def __init__(self, bus: EventBus, loop: asyncio.AbstractEventLoop) -> None:
        self.bus = bus
        self.loop = loop
        self.is_open = False

    def open_threadsafe(self) -> None:
        """Open the gate from any thread (the store's writer calls this after its commit)."""
        self.loop.call_soon_threadsafe(self.bus.open, self)

    def __call__(self) -> None:
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            here = False
        if here:
            self.bus.open(self)
        else:
            self.open_threadsafe()


def _name(f: Callable[..., Any]) -> str:
    return getattr(f, "__qualname__", None) or repr(f)
