"""The ``openat2(2)`` call through ctypes (kept apart so ``ctypes`` loads only when a file tool first runs)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

__all__ = ["make_openat2"]


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


_HOW_SIZE = ctypes.sizeof(_OpenHow)


def make_openat2(number: int) -> Callable[[int, str, int, int, int], int]:
    """A function ``(dirfd, path, flags, mode, resolve) -> fd`` calling system call ``number``."""
    fn = ctypes.CDLL(None, use_errno=True).syscall  # a private CDLL: argtypes set here stay here
    fn.restype = ctypes.c_long
    fn.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_OpenHow), ctypes.c_size_t)
    hows: dict[tuple[int, int, int], _OpenHow] = {}

    def call(dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int:
        key = (flags, mode, resolve)
        how = hows.get(key)
        if how is None:  # a handful of distinct ones: keep them (the kernel only reads them)
            how = hows[key] = _OpenHow(flags, mode, resolve)
        fd = int(fn(number, dirfd, os.fsencode(path), how, _HOW_SIZE))
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)
        return fd

    return call
