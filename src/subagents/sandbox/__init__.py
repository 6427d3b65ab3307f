"""Confinement: one implementation of "what may this agent touch", used by every tool that touches things.

- :mod:`.policy` — :class:`SandboxPolicy`, the ``[sandbox]`` settings;
- :mod:`.workspace` — :class:`Workspace`: the root, protected paths, hidden paths;
- :mod:`.shell` — :class:`ShellSandbox`: commands confined by bubblewrap (:mod:`.bwrap`), Landlock
  (:mod:`.landlock`, :mod:`.seccomp`) or Seatbelt (:mod:`.seatbelt`), and their process groups;
- :mod:`.env` — the allowlisted environment of every process started for an agent;
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .policy import CREDENTIAL_PATHS, DEFAULT_PROTECTED, SandboxPolicy
from .workspace import Workspace

if TYPE_CHECKING:
    from .shell import SandboxUnavailable, ShellSandbox, kill_all_process_groups

__all__ = ["CREDENTIAL_PATHS", "DEFAULT_PROTECTED", "SandboxPolicy", "SandboxUnavailable", "ShellSandbox", "Workspace",
           "kill_all_process_groups"]

_LAZY = {"SandboxUnavailable", "ShellSandbox", "kill_all_process_groups"}


def __getattr__(name: str) -> Any:
    """The shell sandbox loads on first use (``import subagents`` stays fast)."""
    if name in _LAZY:
        return getattr(importlib.import_module(".shell", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
