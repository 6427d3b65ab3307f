"""The sub-agent tools (``spawn_agent``, ``send_input``, ``wait``, ``close_agent``, ``resume_agent``,
``list_agents``) and ``AgentControl``, the small interface through which they reach the manager.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["AgentControl"]


class AgentControl(Protocol):
    """What the sub-agent tools may ask of the agent manager, on behalf of the calling agent."""

    async def spawn_tool(self, caller_id: str, arguments: dict[str, Any]) -> str: ...
