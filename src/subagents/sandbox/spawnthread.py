"""Start a subprocess from a short-lived thread that first confines itself (Landlock, seccomp, caps).

Landlock, seccomp, ``PR_SET_NO_NEW_PRIVS`` and capabilities belong to a *thread*, and a child
inherits them from the thread that forked it.  So instead of a ``preexec_fn`` (which makes Python
``fork`` the whole runtime and run Python in the child: ~13 ms per command at 90 MB of memory,
measured), the runner confines a fresh helper thread and lets *it* call ``subprocess.Popen``, which
then uses ``vfork`` (well under a millisecond).  The thread ends right after; the child is
re-parented to another thread of the runtime, whose asyncio child watcher reaps it as usual.

asyncio builds its ``Popen`` in ``_UnixSubprocessTransport._start``; :func:`install` wraps that
method once so that, when the context variable :data:`CONFINE` is set (only inside
:func:`create_confined`), the original method runs in such a thread.  Every other subprocess of the
runtime is untouched.  If this Python's asyncio has no such method, :func:`available` is false and
the runner falls back to ``preexec_fn``.

A child that asks to die with its parent (``PR_SET_PDEATHSIG``: bubblewrap's ``--die-with-parent``) dies when
the *thread* that started it ends, not the process: a helper that ends right after the start would kill it
(seen: 2% of bubblewrap's commands, 77% with another thread busy).  For such children a :class:`Spawner` keeps
one confined thread for the life of the process and starts each of them from it
(:func:`create_from`): every child shares that thread's confinement.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CONFINE", "Spawner", "available", "create_confined", "create_from", "install"]

Runner = Callable[[Callable[[], None]], None]
"""Runs a job (asyncio's start of the ``Popen``) in a confined thread, waits for it and re-raises its error."""

CONFINE: contextvars.ContextVar[Runner | None] = contextvars.ContextVar("subagents_confine", default=None)
"""How the subprocess the current task is starting is started (``None``: as usual, in the caller's thread)."""

_installed = False


def _transport_class() -> Any:
    try:
        from asyncio import unix_events
    except ImportError:  # Windows
        return None
    cls = getattr(unix_events, "_UnixSubprocessTransport", None)
    return cls if cls is not None and callable(getattr(cls, "_start", None)) else None


def available() -> bool:
    """Whether this Python's asyncio can start subprocesses through :func:`create_confined`."""
    return _transport_class() is not None


def install() -> None:
    """Wrap asyncio's ``_UnixSubprocessTransport._start`` (once; a no-op when unavailable)."""
    global _installed
    cls = _transport_class()
    if _installed or cls is None:
        return
    original = cls._start

    def _start(self: Any, *args: Any, **kwargs: Any) -> None:
        runner = CONFINE.get()
        if runner is None:
            return original(self, *args, **kwargs)  # type: ignore[no-any-return]
        runner(lambda: original(self, *args, **kwargs))
        return None

    cls._start = _start
    _installed = True


def _one_shot(confine: Callable[[], None]) -> Runner:
    """A runner that confines a fresh thread, runs the job in it and lets it end."""

    def run_job(job: Callable[[], None]) -> None:
        failure: list[BaseException] = []

        def run() -> None:
            try:
                confine()
                job()
            except BaseException as e:  # handed to the caller's thread
                failure.append(e)

        helper = threading.Thread(target=run, name="subagents-confined-spawn", daemon=True)
        helper.start()
        helper.join()
        if failure:
            raise failure[0]

    return run_job


class Spawner:
    """One thread, confined once by ``confine`` when first used, that runs every job given to it for the life of
    the process (a child started from it may die with it: ``PR_SET_PDEATHSIG``).  After a ``fork`` the child
    process gets a thread of its own.  A failed confinement fails every job with its error.

    >>> spawner = Spawner(lambda: None)
    >>> seen = []
    >>> spawner(lambda: seen.append(threading.current_thread().name))
    >>> seen
    ['subagents-confined-spawner']
    """

    def __init__(self, confine: Callable[[], None]) -> None:
        self._confine = confine
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event, list[BaseException]]] | None = None
        self._pid = 0

    def __call__(self, job: Callable[[], None]) -> None:
        done, failure = threading.Event(), list[BaseException]()
        self._queue().put((job, done, failure))
        done.wait()
        if failure:
            raise failure[0]

    def _queue(self) -> queue.SimpleQueue[tuple[Callable[[], None], threading.Event, list[BaseException]]]:
        with self._lock:
            if self._jobs is None or self._pid != os.getpid():
                self._jobs, self._pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(target=self._serve, args=(self._jobs,), name="subagents-confined-spawner",
                                 daemon=True).start()
            return self._jobs

    def _serve(self, jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event, list[BaseException]]]
               ) -> None:
        broken: BaseException | None = None
        try:
            self._confine()
        except BaseException as e:
            broken = e
        while True:
            job, done, failure = jobs.get()
            try:
                if broken is not None:
                    raise broken
                job()
            except BaseException as e:  # handed to the caller's thread
                failure.append(e)
            done.set()


async def create_confined(confine: Callable[[], None], *argv: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec(*argv, **kwargs)``, started from a fresh thread confined by ``confine``."""
    return await create_from(_one_shot(confine), *argv, **kwargs)


async def create_from(runner: Runner, *argv: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec(*argv, **kwargs)``, started through ``runner`` (a :class:`Spawner`)."""
    install()
    token = CONFINE.set(runner)
    try:
        return await asyncio.create_subprocess_exec(*argv, **kwargs)
    finally:
        CONFINE.reset(token)
