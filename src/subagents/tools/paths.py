"""Compatibility: :class:`Workspace` lives in :mod:`subagents.sandbox.workspace`."""

from __future__ import annotations

from ..sandbox.workspace import Workspace

__all__ = ["Workspace"]
