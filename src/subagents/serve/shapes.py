"""The structured content of the server's tool results (their MCP ``outputSchema``), and how it is made.

Every tool answers twice: a short text a model reads, and one of these shapes for a program.
"""

from __future__ import annotations

from typing_extensions import TypedDict  # pydantic needs it below Python 3.12

from ..runtime.result import RunResult

__all__ = ["AgentOut", "ListOut", "ResultOut", "SpawnOut", "StatusOut", "UsageOut", "WaitOut", "result_out"]


class UsageOut(TypedDict):
    """Tokens an agent used."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class ResultOut(TypedDict):
    """A finished agent's result and stats (the fields of :class:`~subagents.RunResult`)."""

    id: str
    nickname: str
    agent: str
    status: str
    outcome: str
    text: str
    truncated: bool
    limit: str | None
    turns: int
    usage: UsageOut
    cost_usd: float | None
    duration_s: float
    error: str | None
    tool_calls: int
    parent_id: str | None
    depth: int


class AgentOut(TypedDict):
    """One agent: who it is and where it stands."""

    agent_id: str
    nickname: str
    agent_type: str
    status: str
    depth: int
    parent_id: str | None
    label: str


class SpawnOut(TypedDict):
    """What ``spawn_agent`` and ``resume_agent`` return: the agent, and its result when they waited for it."""

    agent_id: str
    nickname: str
    agent_type: str
    status: str
    queued: bool
    result: ResultOut | None


class WaitOut(TypedDict):
    """What ``wait`` returns: the finished agents' results, the ids still running, and whether it timed out."""

    results: list[ResultOut]
    running: list[str]
    timed_out: bool


class StatusOut(TypedDict):
    """What ``status``, ``send_input`` and ``result`` say about one agent (``result`` once it has finished)."""

    agent_id: str
    nickname: str
    agent_type: str
    status: str
    outcome: str | None
    result: ResultOut | None


class ListOut(TypedDict):
    """What ``list_agents`` returns."""

    agents: list[AgentOut]
    running: int
    max_threads: int


def result_out(r: RunResult) -> ResultOut:
    """A :class:`RunResult` as structured content."""
    u = r.usage
    return ResultOut(id=r.id, nickname=r.nickname, agent=r.agent, status=str(r.status), outcome=str(r.outcome),
                     text=r.text, truncated=r.truncated, limit=r.limit, turns=r.turns,
                     usage=UsageOut(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                                    cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens),
                     cost_usd=r.cost_usd, duration_s=round(r.duration_s, 6), error=r.error,
                     tool_calls=r.tool_calls, parent_id=r.parent_id, depth=r.depth)
