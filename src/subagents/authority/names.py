"""The names of the authority layer that configuration also needs: permission modes and hook events.

A small module with no imports, so :mod:`subagents.config` can validate settings without loading
the permission engine.

>>> canonical_mode("acceptEdits")
'autoEdit'
>>> canonical_mode("bypassPermissions")
'yolo'
"""

from __future__ import annotations

__all__ = ["HOOK_EVENTS", "MODES", "MODE_ALIASES", "canonical_mode"]

MODES = ("plan", "default", "autoEdit", "yolo")
"""The permission modes, narrowest first (a child's mode is never wider than its parent's)."""

MODE_ALIASES = {"acceptEdits": "autoEdit", "bypassPermissions": "yolo", "auto_edit": "autoEdit",
                "autoedit": "autoEdit", "accept_edits": "autoEdit", "bypass_permissions": "yolo"}
"""Claude Code's names (and spellings people type) for our modes."""

HOOK_EVENTS = ("PreToolUse", "PostToolUse", "SubagentStart", "SubagentStop", "Stop", "PermissionRequest",
               "UserPromptSubmit", "TaskCreated", "TaskCompleted", "TeammateIdle")
"""Events a hook can be configured for (the team events fire once teams exist)."""


def canonical_mode(name: str) -> str:
    """Our name for a mode or one of its aliases; ``ValueError`` naming the choices otherwise."""
    if name in MODES:
        return name
    alias = MODE_ALIASES.get(name)
    if alias is None:
        raise ValueError(f"unknown permission mode {name!r}; use one of {', '.join(MODES)} "
                         "(or Claude Code's acceptEdits, bypassPermissions)")
    return alias
