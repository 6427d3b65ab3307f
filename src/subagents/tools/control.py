"""``AgentControl``: what the sub-agent tools (:mod:`subagents.tools.agents`) may ask of the manager.

Its own module, importing nothing of the tools, so that :class:`~subagents.tools.base.ToolContext`
can name it without an import cycle; the runtime implements it (``runtime/control.py``).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["AgentControl", "TeamControl"]


class AgentControl(Protocol):
    """What the sub-agent tools may ask of the manager, on behalf of the calling agent.

    Each method returns the text the model sees, or raises :class:`ToolError`.
    """

    async def spawn_agent(self, caller_id: str, agent_type: str, prompt: str, description: str,
                          background: bool | None, model: str | None, isolation: str | None = None, *,
                          label: str | None = None, cleanup: str | None = None,
                          run_timeout_s: float | None = None, output_schema: dict[str, Any] | None = None) -> str: ...

    async def send_input(self, caller_id: str, agent_id: str, message: str) -> str: ...

    async def wait(self, caller_id: str, agent_ids: list[str] | None, timeout_s: float | None,
                   return_when: str) -> str: ...

    async def close_agent(self, caller_id: str, agent_id: str) -> str: ...

    async def resume_agent(self, caller_id: str, agent_id: str, message: str) -> str: ...

    async def list_agents(self, caller_id: str) -> str: ...

    @property
    def teams(self) -> TeamControl | None:
        """The runtime's team service (``None``: this runtime has no teams)."""
        ...


class TeamControl(Protocol):
    """What the team tools (:mod:`subagents.tools.team`) may ask of the runtime's team service, on behalf
    of the calling agent (``caller_id``).  Each method returns the text the model sees, or raises
    :class:`~subagents.exceptions.ToolError` (a sentence saying what to do)."""

    async def team_create(self, caller_id: str, name: str, description: str) -> str: ...

    async def team_delete(self, caller_id: str, name: str | None) -> str: ...

    async def spawn_teammate(self, caller_id: str, team: str | None, name: str, agent_type: str, prompt: str,
                             model: str | None, require_plan_approval: bool) -> str: ...

    async def task_create(self, caller_id: str, subject: str, description: str, blocked_by: list[int]) -> str: ...

    async def task_list(self, caller_id: str) -> str: ...

    async def task_get(self, caller_id: str, task_id: int) -> str: ...

    async def task_claim(self, caller_id: str, task_id: int | None) -> str: ...

    async def task_update(self, caller_id: str, task_id: int, status: str | None, note: str | None) -> str: ...

    async def send_message(self, caller_id: str, to: str, text: str, approve_plan: bool) -> str: ...

    async def broadcast(self, caller_id: str, text: str) -> str: ...

    async def team_shutdown(self, caller_id: str, name: str | None) -> str: ...
