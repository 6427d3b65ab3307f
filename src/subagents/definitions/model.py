"""``AgentDefinition``: what an agent type is (prompt, tools, model, limits, defaults)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..limits import Limits

__all__ = ["MODEL_ALIASES", "AgentDefinition"]

# Claude Code / Qwen definitions name models by family.
MODEL_ALIASES = {
    "sonnet": "anthropic:claude-sonnet-4-5",
    "opus": "anthropic:claude-opus-4-5",
    "haiku": "anthropic:claude-haiku-4-5",
}


@dataclass(slots=True)
class AgentDefinition:
    """One agent type.

    ``tools`` is an allowlist (``None``: every tool the runtime has); ``disallowed_tools`` is
    subtracted from it.  ``delegate_tools`` are tools the agent hands to its sub-agents without
    calling them itself (``["*"]``: every tool its own parent could give it); a coordinator holds the
    file tools this way so its workers can edit while it only delegates.  ``model`` is ``"inherit"``
    (the parent's model) or a model string.

    >>> d = AgentDefinition("reviewer", "Reviews diffs", "You review code.", tools=["read_file", "grep"])
    >>> d.limits()
    Limits(max_turns=None, max_tokens=None, timeout_s=None, max_cost_usd=None)
    """

    name: str
    description: str = ""
    system_prompt: str = ""
    tools: list[str] | None = None
    disallowed_tools: list[str] = field(default_factory=list)
    delegate_tools: list[str] = field(default_factory=list)
    model: str = "inherit"
    max_turns: int | None = None
    max_tokens: int | None = None
    timeout_s: float | None = None
    max_cost_usd: float | None = None
    background: bool = False
    nickname_candidates: list[str] = field(default_factory=list)
    permission_mode: str | None = None
    isolation: str | None = None
    source: str = "session"
    extra: dict[str, Any] = field(default_factory=dict)

    def limits(self) -> Limits:
        return Limits(self.max_turns, self.max_tokens, self.timeout_s, self.max_cost_usd)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "tools": self.tools,
            "disallowed_tools": self.disallowed_tools, "delegate_tools": self.delegate_tools, "model": self.model,
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens, "timeout_s": self.timeout_s, "max_cost_usd": self.max_cost_usd,
            "background": self.background, "nickname_candidates": self.nickname_candidates,
            "permission_mode": self.permission_mode, "isolation": self.isolation, "source": self.source,
            "system_prompt": self.system_prompt,
        }
