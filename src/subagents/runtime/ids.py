"""Agent ids (see :mod:`subagents.ids`)."""

from __future__ import annotations

from ..ids import new_agent_id

__all__ = ["new_agent_id"]
