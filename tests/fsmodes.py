"""Helpers for the fs tests: the three ways :mod:`subagents.sandbox.fs` resolves paths, and a swapper.

- ``openat2``: ``openat2(2)`` with ``RESOLVE_BENEATH`` (this machine's kernel has it);
- ``walk``: the component-by-component walk with ``O_PATH`` descriptors (kernels before 5.6);
- ``portable``: the walk without ``O_PATH`` and ``/proc`` (what non-Linux systems get).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from subagents.sandbox import fs

MODES = ("openat2", "walk", "portable")


def set_mode(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Force ``mode`` for the rest of the test (undone by ``monkeypatch``)."""
    if mode == "openat2":
        monkeypatch.setattr(fs, "_state", fs._State())
        if sys.platform == "linux":  # the kernel here is 6.x: openat2 must be found and used
            assert fs.openat2_enabled(), "openat2 should be available on this Linux kernel"
    elif mode == "walk":
        monkeypatch.setattr(fs, "_state", fs._State(openat2=False))
    else:
        monkeypatch.setattr(fs, "_state", fs._State(openat2=False, proc=False))


_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    """Atomically swap two names (``renameat2(RENAME_EXCHANGE)``): neither is ever missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(a))


@contextmanager
def swapping(a: Path, b: Path) -> Iterator[None]:
    """A thread that keeps exchanging ``a`` and ``b`` (e.g. a directory and a symlink) until the block ends."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            exchange(a, b)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
