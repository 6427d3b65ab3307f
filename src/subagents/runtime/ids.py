"""Agent ids: random (version 4) UUID strings, made cheaply.

``uuid.uuid4()`` calls ``os.urandom(16)`` once per id, a system call that releases the GIL; with a
store writer thread busy that can cost tens of microseconds per spawn.  This draws the random
bytes in blocks and formats them as standard UUID strings.
"""

from __future__ import annotations

import os

__all__ = ["new_agent_id"]

_BLOCK = 16 * 512
_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}
_pool = b""
_pos = _BLOCK


def new_agent_id() -> str:
    """A random UUID (version 4, RFC 4122 variant) as a string, e.g. ``'5b0c…-4…'``."""
    global _pool, _pos
    if _pos >= len(_pool):
        _pool = os.urandom(_BLOCK)
        _pos = 0
    h = _pool[_pos:_pos + 16].hex()
    _pos += 16
    # version 4 in the 13th hex digit, the RFC 4122 variant (10xx) in the 17th
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"
