"""Confinement: one implementation of "what may this agent touch", used by every tool that touches things.

- :mod:`.policy` — :class:`SandboxPolicy`, the ``[sandbox]`` settings;
- :mod:`.workspace` — :class:`Workspace`: the root, protected paths, hidden paths;
- :mod:`.shell` — :class:`ShellSandbox`: commands confined by bubblewrap (:mod:`.bwrap`), Landlock
  (:mod:`.landlock`, :mod:`.seccomp`) or Seatbelt (:mod:`.seatbelt`), and their process groups;
- :mod:`.env` — the allowlisted environment of every process started for an agent;
"""

from __future__ import annotations

from .policy import CREDENTIAL_PATHS, DEFAULT_PROTECTED, SandboxPolicy
from .shell import SandboxUnavailable, ShellSandbox, kill_all_process_groups
from .workspace import Workspace

__all__ = ["CREDENTIAL_PATHS", "DEFAULT_PROTECTED", "SandboxPolicy", "SandboxUnavailable", "ShellSandbox", "Workspace",
           "kill_all_process_groups"]
