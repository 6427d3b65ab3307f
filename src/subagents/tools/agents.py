"""The sub-agent tools the model sees; they reach the manager through ``AgentControl``.

``spawn_agent(prompt, agent_type?, description?, background?, model?, label?, cleanup?, run_timeout_s?)``,
``send_input(agent_id, message)``, ``wait(agent_ids?, timeout_s?, return_when="all")``,
``close_agent(agent_id)``, ``resume_agent(agent_id, message)``, ``list_agents()``.

The tools never import the runtime: they call ``ctx.control`` (an :class:`AgentControl`), which
the manager hands to every agent's :class:`~subagents.tools.base.ToolContext` (the protocol lives in
:mod:`subagents.tools.control`, which imports nothing of the tools: no import cycle).
"""

from __future__ import annotations

from typing import Any, Literal

from ..exceptions import ToolError
from .base import FunctionTool, Tool, ToolCategory, ToolContext
from .control import AgentControl
from .validation import vouch

__all__ = ["AGENT_TOOLS", "AgentControl", "agent_tools"]


def _control(ctx: ToolContext) -> AgentControl:
    if ctx.control is None:
        raise ToolError("sub-agent tools need an agent manager; run this agent through subagents.Runtime")
    return ctx.control


async def spawn_agent(ctx: ToolContext, prompt: str, agent_type: str = "general-purpose", description: str = "",
                      background: bool | None = None, model: str | None = None,
                      isolation: Literal["worktree"] | None = None, team: str | None = None,
                      name: str | None = None, require_plan_approval: bool = False, label: str | None = None,
                      cleanup: Literal["keep", "delete"] | None = None,
                      run_timeout_s: float | None = None, output_schema: dict[str, Any] | None = None) -> str:
    """Start a sub-agent with a fresh conversation to do one task.

    In the foreground (default) this call returns when the sub-agent ends, with its final answer
    and a line of stats. With background=true it returns the new agent's id at once; its result
    is announced to you when it ends (or collect it with wait). You may answer an announcement with
    exactly NO_REPLY when the user needs no news of it.

    Args:
        prompt: the complete task; the sub-agent sees nothing of your conversation but this.
        agent_type: the kind of agent, e.g. general-purpose (the default), explore, plan, verify, coordinator.
        description: a short (3-5 word) label for the task.
        background: run concurrently and return at once (omitted: the agent type's default, usually false).
        model: optional model override, e.g. anthropic:claude-haiku-4-5.
        isolation: "worktree" to give the sub-agent its own git worktree (a new branch); its changes stay
            there for you to review, and the worktree is removed if it changed nothing.
        team: spawn a named teammate into this team (one you created with team_create): it runs in the
            background, works on the task board and talks by mail, and goes idle between pieces of work.
        name: the teammate's name in the team (with team).
        require_plan_approval: (with team) the teammate works in plan mode until you approve its plan
            with send_message(to=name, text=..., approve_plan=true).
        label: a human-readable name for the task, shown in its announcement and in agent listings
            (default: description).
        cleanup: what happens to the run's record and transcript once its result reached you: "keep"
            (default; archived later) or "delete".
        run_timeout_s: stop the sub-agent after this many seconds of wall time (it ends "timed out" with
            its partial work).
        output_schema: a JSON schema the sub-agent's result must match; it then ends by calling final_result,
            and you receive the validated result as JSON.
    """
    if model is not None and "@" in model:  # (teammates too: the team path does not reach the control's check)
        raise ToolError(f"model {model!r} names a server: an agent may choose a model, not where the runtime sends "
                        "the request (and the API key). Pass the model name alone, e.g. "
                        f"{model.split('@', 1)[0]!r}; a server is configured by the user in [providers.*] "
                        "base_url or an agent definition")
    if team is not None or name is not None:
        if output_schema is not None:
            raise ToolError("output_schema is for plain sub-agents; a teammate reports by mail")
        if team is None or name is None:
            raise ToolError("a teammate needs both team and name: spawn_agent(..., team='<team>', name='<name>')")
        teams = _control(ctx).teams
        if teams is None:
            raise ToolError("this runtime has no team service; spawn a plain sub-agent (omit team and name)")
        return await teams.spawn_teammate(ctx.agent.id, team, name, agent_type, prompt, model, require_plan_approval)
    return await _control(ctx).spawn_agent(ctx.agent.id, agent_type, prompt, description, background, model,
                                           isolation, label=label, cleanup=cleanup, run_timeout_s=run_timeout_s,
                                           output_schema=output_schema)


async def send_input(ctx: ToolContext, agent_id: str, message: str) -> str:
    """Send more instructions to a running sub-agent; it reads them at its next tool boundary.

    Args:
        agent_id: the sub-agent's id or nickname.
        message: what to tell it.
    """
    return await _control(ctx).send_input(ctx.agent.id, agent_id, message)


async def wait(ctx: ToolContext, agent_ids: list[str] | None = None, timeout_s: float | None = None,
               return_when: Literal["all", "any"] = "all") -> str:
    """Wait for sub-agents to finish and collect their results (no polling needed).

    Args:
        agent_ids: ids or nicknames; omit to wait for all of your sub-agents.
        timeout_s: give up after this many seconds; the reply lists who is still running.
        return_when: "all" (default) or "any" to return as soon as one finishes.
    """
    return await _control(ctx).wait(ctx.agent.id, agent_ids, timeout_s, return_when)


async def close_agent(ctx: ToolContext, agent_id: str) -> str:
    """Stop a sub-agent and all of its descendants now; its partial result is kept.

    Args:
        agent_id: the sub-agent's id or nickname.
    """
    return await _control(ctx).close_agent(ctx.agent.id, agent_id)


async def resume_agent(ctx: ToolContext, agent_id: str, message: str) -> str:
    """Give a finished (completed, errored or closed) sub-agent more work; it keeps its whole conversation.

    Args:
        agent_id: the sub-agent's id or nickname.
        message: the new instructions.
    """
    return await _control(ctx).resume_agent(ctx.agent.id, agent_id, message)


async def list_agents(ctx: ToolContext) -> str:
    """List the agents of this tree with their status and depth, and the capacity left."""
    return await _control(ctx).list_agents(ctx.agent.id)


AGENT_TOOLS: tuple[Tool, ...] = tuple(
    FunctionTool(f, category=ToolCategory.AGENT)
    for f in (spawn_agent, send_input, wait, close_agent, resume_agent, list_agents)
)
vouch(*(t.parameters for t in AGENT_TOOLS))  # (compiled at their first call: see tools/validation.py)


def agent_tools() -> list[Tool]:
    return list(AGENT_TOOLS)
