"""``AgentControl``: what the sub-agent tools (:mod:`subagents.tools.agents`) may ask of the manager.

Its own module, importing nothing of the tools, so that :class:`~subagents.tools.base.ToolContext`
can name it without an import cycle; the runtime implements it (``runtime/control.py``).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["AgentControl"]


class AgentControl(Protocol):
    """What the sub-agent tools may ask of the manager, on behalf of the calling agent.

    Each method returns the text the model sees, or raises :class:`ToolError`.
    """

    async def spawn_agent(self, caller_id: str, agent_type: str, prompt: str, description: str,
                          background: bool, model: str | None, isolation: str | None = None) -> str: ...

    async def send_input(self, caller_id: str, agent_id: str, message: str) -> str: ...

    async def wait(self, caller_id: str, agent_ids: list[str] | None, timeout_s: float | None,
                   return_when: str) -> str: ...

    async def close_agent(self, caller_id: str, agent_id: str) -> str: ...

    async def resume_agent(self, caller_id: str, agent_id: str, message: str) -> str: ...

    async def list_agents(self, caller_id: str) -> str: ...
