"""Helpers of the SQLite store: the wording of its errors, the ``.subagents/.gitignore`` it writes, the running loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from ..exceptions import StoreError

__all__ = ["GITIGNORE", "running_loop", "store_error", "write_gitignore"]

#: What ``.subagents/.gitignore`` holds: the state stays out of git, config and agent definitions may go in.
GITIGNORE = """\
# Written by subagents when it first created its state here: the run store (state.db and its
# WAL files) must never be committed; the project's config and agent definitions may be.
*
!.gitignore
!config.toml
!agents/
!agents/**
"""


def write_gitignore(directory: Path) -> None:
    """Create ``directory/.gitignore`` (:data:`GITIGNORE`) when ``directory`` is a ``.subagents`` directory
    and has none; an existing file is never overwritten, and a failure never stops the store."""
    if directory.name != ".subagents":
        return
    with contextlib.suppress(OSError), open(directory / ".gitignore", "x", encoding="utf-8") as f:
        f.write(GITIGNORE)


def store_error(path: Path, e: BaseException, doing: str) -> StoreError:
    """A :class:`StoreError` naming the file, what went wrong and what to do."""
    msg = str(e)
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return StoreError(
            f"the run store {path} is locked by another process ({msg}) while {doing}; stop the other "
            "subagents process that holds it, or point [store] url at another file")
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return StoreError(
            f"the run store {path} is corrupt or not a SQLite database ({msg}); move it aside "
            f"(mv {path} {path}.bad) to start a new store, or restore it from a backup")
    if "decode to utf-8" in low or isinstance(e, UnicodeDecodeError):
        return StoreError(
            f"the run store {path} holds text that is not UTF-8 ({msg}) while {doing}: it may have come with the "
            f"project or been damaged; move it aside (mv {path} {path}.bad) to start a new store, or restore it "
            "from a backup")
    if "readonly" in low or "unable to open" in low or "permission" in low or "disk i/o" in low \
            or isinstance(e, OSError):
        return StoreError(
            f"the run store {path} cannot be written ({msg}) while {doing}; check the permissions and free "
            "space of the file and its directory, or point [store] url at a writable path")
    return StoreError(f"the run store {path} failed while {doing} ({msg}); run 'subagents runs list' to check it, "
                      "or point [store] url at another file")


running_loop: Callable[[], asyncio.AbstractEventLoop | None] = asyncio.events._get_running_loop
"""The event loop running in this thread, if any (``None``: asyncio's own C function, called on every store
write: no Python frame, no exception when there is none)."""


def on_loop(loop: asyncio.AbstractEventLoop | None, fn: Callable[[], None]) -> bool:
    """From a thread other than ``loop``'s (a model or tool thread flushing the store): run ``fn`` on ``loop``,
    wait for it and re-raise what it raised.  ``False`` (nothing done) when ``fn`` belongs in this thread: no
    loop, a loop that is not running, or the caller runs on it — also when the loop stops (or closes) before it
    got to ``fn``: the caller then runs it itself; ``fn`` runs once either way."""
    if loop is None or not loop.is_running() or running_loop() is loop:
        return False
    done, failed = threading.Event(), []
    claim = threading.Lock()  # whoever takes it runs fn: the loop, or the caller once the loop is gone

    def run() -> None:
        if not claim.acquire(blocking=False):
            return
        try:
            fn()
        except BaseException as e:  # handed to the thread that asked
            failed.append(e)
        finally:
            done.set()

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError:  # that loop is closed
        return False
    while not done.wait(0.1):
        if (loop.is_closed() or not loop.is_running()) and claim.acquire(blocking=False):
            return False  # it stopped before running fn (and never will now): the caller does it
    if failed:
        raise failed[0]
    return True
