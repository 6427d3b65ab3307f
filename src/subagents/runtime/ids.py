"""Agent ids: random (version 4) UUID strings, made cheaply.

``uuid.uuid4()`` calls ``os.urandom(16)`` once per id, a system call that releases the GIL; with a
store writer thread busy that can cost tens of microseconds per spawn.  This draws the random
bytes in blocks and formats them as standard UUID strings.
"""

from __future__ import annotations

import os
import uuid

__all__ = ["new_agent_id"]

_BLOCK = 16 * 512
_pool = b""
_pos = _BLOCK


def new_agent_id() -> str:
    """A random UUID (version 4, RFC 4122 variant) as a string, e.g. ``'5b0c…-4…'``."""
    global _pool, _pos
    if _pos >= len(_pool):
        _pool = os.urandom(_BLOCK)
        _pos = 0
    raw = _pool[_pos:_pos + 16]
    _pos += 16
    return str(uuid.UUID(bytes=raw, version=4))
