"""What one turn of :class:`~subagents.runtime.loop.AgentCore` decides, and the guard it calls tools through.

Kept apart from :mod:`.loop` (which re-exports every name) so the loop stays one screenful of logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..messages import ToolResultBlock, ToolUseBlock
from ..tools.base import ToolContext, ToolRegistry
from .status import Outcome

__all__ = ["CallGuard", "Final", "RunAgain", "Stopped", "TurnDecision"]


@dataclass(slots=True, frozen=True)
class Final:
    """The model gave its final answer."""

    text: str


@dataclass(slots=True, frozen=True)
class RunAgain:
    """Tool results were appended; call the model again."""


@dataclass(slots=True, frozen=True)
class Stopped:
    """The runtime stopped the run (a limit, a timeout, an error, a close)."""

    outcome: Outcome
    limit: str | None = None
    error: str | None = None


TurnDecision = Final | RunAgain | Stopped


class CallGuard(Protocol):
    """The authority's interface to the loop (``authority.guard.AgentGuard``): every tool call goes through it."""

    async def run_call(self, call: ToolUseBlock, registry: ToolRegistry, ctx: ToolContext) -> ToolResultBlock: ...

    async def on_start(self, prompt: str) -> tuple[str, str | None]: ...

    async def on_final(self, text: str, again: bool) -> str | None: ...
