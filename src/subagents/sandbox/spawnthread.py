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
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CONFINE", "available", "create_confined", "install"]

CONFINE: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("subagents_confine",
                                                                                   default=None)
"""The confining function for the subprocess the current task is starting (``None``: none)."""

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
        confine = CONFINE.get()
        if confine is None:
            return original(self, *args, **kwargs)  # type: ignore[no-any-return]
        failure: list[BaseException] = []

        def run() -> None:
            try:
                confine()
                original(self, *args, **kwargs)
            except BaseException as e:  # handed to the caller's thread
                failure.append(e)

        helper = threading.Thread(target=run, name="subagents-confined-spawn", daemon=True)
        helper.start()
        helper.join()
        if failure:
            raise failure[0]
        return None

    cls._start = _start
    _installed = True


async def create_confined(confine: Callable[[], None], *argv: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec(*argv, **kwargs)``, started from a thread confined by ``confine``."""
    install()
    token = CONFINE.set(confine)
    try:
        return await asyncio.create_subprocess_exec(*argv, **kwargs)
    finally:
        CONFINE.reset(token)
