"""What the :class:`~subagents.runtime.runtime.Runtime` hands back about agents: handles and summaries."""

from __future__ import annotations

from dataclasses import dataclass

from .status import Status

__all__ = ["AgentHandle", "AgentSummary"]


@dataclass(slots=True, frozen=True)
class AgentHandle:
    """What ``spawn`` and ``resume`` return: the agent's id (a UUID) and nickname; ``queued``: no thread slot
    was free (``when_full="queue"``), it starts when one frees (its status is ``pending_init`` until then)."""

    id: str
    nickname: str
    agent_type: str
    queued: bool = False


@dataclass(slots=True, frozen=True)
class AgentSummary:
    id: str
    nickname: str
    agent_type: str
    status: Status
    depth: int
    parent_id: str | None
    label: str
