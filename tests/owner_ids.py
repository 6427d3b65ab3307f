"""Owner ids that tests write by hand, tagged as this user's: restart recovery takes their runs over.

Recovery takes over, unasked, only the runs of a SQLite store whose owner id carries this user's tag
(:mod:`subagents.owner_key`).  ``tests/conftest.py`` has every key a test's runtimes make be
:data:`TEST_OWNER_KEY`, so a record seeded with ``owner=mine("<host>:<pid>:<token>")`` is a crashed runtime of
this user's.
"""

from __future__ import annotations

import hashlib
import hmac

TEST_OWNER_KEY = bytes(range(32))


def mine(base: str) -> str:
    """``base`` (``<host>:<pid>:<token>``) tagged as this user's runtimes tag it."""
    return f"{base}:{hmac.new(TEST_OWNER_KEY, base.encode(), hashlib.sha256).hexdigest()[:16]}"
