"""The frames between the SQLite store and its writer process (:mod:`._proc`, :mod:`._writer_main`)."""

from __future__ import annotations

import marshal
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ._support import store_error
from ._writer_main import HEADER, PREPARE

__all__ = ["frame", "writer_error"]


class _Failure(Exception):
    """An error the writer process reported, for :func:`store_error`'s wording (``_OSFailure``: an ``OSError``)."""


class _OSFailure(OSError):
    pass


def frame(msg: tuple[Any, ...]) -> bytes:
    """``msg`` as one frame: its length and its :mod:`marshal` payload (a subclass of a plain type — a str enum —
    goes as the plain value).  ``ValueError``: a value :mod:`marshal` cannot carry."""
    try:
        data = marshal.dumps(msg)
    except ValueError:
        data = marshal.dumps(_plain(msg))
    return HEADER.pack(len(data)) + data


def _plain(v: Any) -> Any:
    t = type(v)
    if t is list or t is tuple:
        return [_plain(x) for x in v]
    if t is dict:
        return {_plain(k): _plain(x) for k, x in v.items()}
    if t in (str, int, float, bytes, bool) or v is None:
        return v
    if isinstance(v, str):
        return str.__str__(v)
    base: Any
    for base in (int, float, bytes, list, tuple, dict):
        if isinstance(v, base):
            return _plain(base(v))
    return v  # (marshal refuses it: the caller reports it)


def writer_error(path: Path, error: tuple[str, str]) -> StoreError:
    """The :class:`StoreError` of a failure the writer process reported as ``(kind, message)``."""
    kind, text = error
    e: Exception = _OSFailure(text) if kind == "os" else _Failure(text)
    return store_error(path, e, "preparing a write" if kind == PREPARE else "writing to it")
