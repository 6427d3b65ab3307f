"""Entry points of installed distributions (agent-type extensions: ``subagents.agents``), found without
importing ``importlib.metadata`` when no installed distribution declares the group."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["entry_points"]


def entry_points(group: str) -> list[Any]:
    """The installed distributions' entry points of ``group`` (``importlib.metadata``), read only when one may
    declare any (:func:`_may_declare`)."""
    if not _may_declare(group):
        return []
    from importlib import metadata  # lazy: 10-40 ms of import time, and ~7 ms to read every distribution

    return list(metadata.entry_points(group=group))


def _may_declare(group: str) -> bool:
    """Whether an installed distribution may declare entry points of ``group``: a look at the ``entry_points.txt``
    of each ``*.dist-info`` / ``*.egg-info`` on ``sys.path`` (~1 ms) before importing ``importlib.metadata``, which
    every ``Runtime`` paid when no extension is installed.  Unsure (a zip or an egg on the path, a finder of
    distributions other than the standard one): yes."""
    import importlib.machinery
    import sys

    if any(hasattr(f, "find_distributions") and f is not importlib.machinery.PathFinder for f in sys.meta_path):
        return True
    for entry in sys.path:
        try:
            found = os.scandir(entry or ".")
        except NotADirectoryError:  # a zip archive on the path
            return True
        except OSError:
            continue
        with found:
            for e in found:
                if e.name.endswith(".egg"):
                    return True
                if e.name.endswith((".dist-info", ".egg-info")):
                    try:
                        with open(os.path.join(e.path, "entry_points.txt"), encoding="utf-8", errors="replace") as f:
                            if group in f.read():
                                return True
                    except OSError:  # none: no entry points
                        continue
    return False
