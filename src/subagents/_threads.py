"""Synchronous user code off the event loop, in daemon threads that can never hold up a run or an exit.

``asyncio.to_thread`` runs a call in the loop's default executor, whose threads are not daemons:
``asyncio.run`` waits for them when it ends and the interpreter joins them at exit, so one
``@tool`` function stuck in ``time.sleep(3600)`` or in a read from a FIFO kept the process alive
forever after its run had timed out.  :func:`call_in_thread` runs the call in a small pool of
*daemon* threads instead and hands the result back through an asyncio future:

- the awaiting task can always be cancelled (a run's ``timeout_s``, ``close_agent``, Ctrl-C): it
  stops waiting at once; the call itself cannot be interrupted, so it is left to finish (or not)
  in its daemon thread, which never delays the end of the process;
- the call is told: :func:`cancelled` turns true inside it, so long loops (``grep`` over a big
  tree) stop at their next check;
- threads are reused (a hop costs about as much as ``asyncio.to_thread``), a stuck one is simply
  replaced, and idle ones end after :data:`IDLE_S`.

>>> import asyncio
>>> asyncio.run(call_in_thread(sum, [1, 2, 3]))
6
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = ["IDLE_S", "call_in_thread", "cancelled"]

P = ParamSpec("P")
T = TypeVar("T")

IDLE_S = 30.0
"""An idle worker thread ends after this many seconds without work."""

_stop: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("subagents_thread_stop", default=None)


def cancelled() -> bool:
    """Inside a call made by :func:`call_in_thread`: whether its caller stopped waiting (cancelled)."""
    ev = _stop.get()
    return ev is not None and ev.is_set()


_Job = Callable[[], Callable[[], None] | None]
"""A job runs the call and returns what hands its outcome over (``None``: nothing to hand over)."""


class _Pool:
    """Daemon worker threads over one job queue.

    ``idle`` is the number of workers waiting for a job minus the jobs queued: a job is queued only
    after a worker was reserved for it (``idle`` decremented) or a new worker was started, so a job
    never waits behind a call that hangs.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.idle = 0
        self.names = itertools.count(1)

    def submit(self, job: _Job) -> None:
        with self.lock:
            spawn = self.idle == 0
            if not spawn:
                self.idle -= 1
        self.jobs.put(job)
        if spawn:
            threading.Thread(target=self.work, name=f"subagents-call-{next(self.names)}", daemon=True).start()

    def work(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE_S)
            except queue.Empty:
                with self.lock:
                    if self.idle > 0:  # no job is promised to this worker: leave
                        self.idle -= 1
                        return
                continue  # a job was reserved for a waiting worker and is being queued
            deliver = job()
            del job  # nothing of a finished call stays referenced while the worker waits
            with self.lock:  # idle again before the caller hears back: its next call reuses this worker
                self.idle += 1
            if deliver is not None:
                deliver()
                del deliver


_pool = _Pool()


def _reset_after_fork() -> None:
    global _pool
    _pool = _Pool()  # the parent's workers do not exist in the child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if fut.done():  # the caller stopped waiting
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


def _deliver(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for this any more
        loop.call_soon_threadsafe(_settle, fut, ok, value)


async def call_in_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a daemon worker thread (with the caller's context variables).

    Cancelling the awaiting task returns at once (the call is flagged: :func:`cancelled`), and a
    call that never returns holds up neither the event loop nor the exit of the process.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()
    stop = threading.Event()
    ctx = contextvars.copy_context()

    def run() -> T:
        _stop.set(stop)
        return fn(*args, **kwargs)

    def job() -> Callable[[], None] | None:
        if stop.is_set():  # cancelled before a worker got to it
            return None
        try:
            result = ctx.run(run)
        except BaseException as e:  # handed to the awaiting task, like asyncio.to_thread does
            return functools.partial(_deliver, loop, fut, False, e)  # (no cycle through the traceback)
        return functools.partial(_deliver, loop, fut, True, result)

    _pool.submit(job)
    try:
        return await fut
    except asyncio.CancelledError:
        stop.set()
        raise
