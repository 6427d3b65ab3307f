"""Confinement: one implementation of "what may this agent touch", used by every tool that touches things.

- :mod:`.policy` — :class:`SandboxPolicy`, the ``[sandbox]`` settings;
- :mod:`.workspace` — :class:`Workspace`: the root, protected paths, hidden paths;
"""

from __future__ import annotations

from .policy import CREDENTIAL_PATHS, DEFAULT_PROTECTED, SandboxPolicy
from .workspace import Workspace

__all__ = ["CREDENTIAL_PATHS", "DEFAULT_PROTECTED", "SandboxPolicy", "Workspace"]
