"""Default turn limits: a root stops at [limits] root_max_turns, a sub-agent at [limits] max_turns; 0 = no limit."""

from __future__ import annotations

from pathlib import Path

from subagents import Limits, Outcome, Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def restless(req: ModelRequest) -> ModelResponse:
    """Never answers: the root delegates once to a restless child, then both call list_dir forever."""
    if req.agent.depth == 0 and len(req.messages) == 1:
        return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "loop"})])
    return ModelResponse("", [ToolCall("list_dir", {})])


async def test_children_stop_at_50_turns_and_roots_at_200_by_default(workdir: Path) -> None:
    async with Runtime(FunctionModel(restless), workdir=workdir, store="memory://") as rt:
        r = await rt.run("go")
        child = next(n for n in rt.manager.nodes.values() if n.depth == 1)
    assert child.result is not None
    assert (child.result.outcome, child.result.limit, child.result.turns) == (Outcome.LIMIT, "max_turns", 50)
    assert (r.outcome, r.limit, r.turns) == (Outcome.LIMIT, "max_turns", 200)


async def test_the_defaults_come_from_the_config_and_zero_means_no_limit(workdir: Path) -> None:
    cfg = workdir / ".subagents" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text("[limits]\nmax_turns = 0\nroot_max_turns = 7\n")
    calls = {"child": 0}

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            calls["child"] += 1
            return ModelResponse("", [ToolCall("list_dir", {})]) if calls["child"] < 120 else ModelResponse("done")
        return restless(req)

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        r = await rt.run("go")
        child = next(n for n in rt.manager.nodes.values() if n.depth == 1)
    assert child.result is not None
    assert (child.result.outcome, child.result.turns) == (Outcome.OK, 120)  # no limit for sub-agents
    assert (r.outcome, r.turns) == (Outcome.LIMIT, 7)
    cfg.unlink()  # back to the defaults: the restless child stops at 50 turns
    async with Runtime(FunctionModel(restless), workdir=workdir, store="memory://") as rt:
        r = await rt.run("go", limits=Limits(max_turns=3))  # an explicit limit wins over the default
    assert (r.outcome, r.turns) == (Outcome.LIMIT, 3)
