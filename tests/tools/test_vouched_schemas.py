"""The package's own tool schemas are compiled at their tool's first call, not as every process's first Runtime opens.

A process's first ``Runtime(...)`` compiled the ~30 schemas of the built-in, agent and team tools (fastjsonschema
generates and runs Python for each): ~35 ms of its ~70 ms, paid by every command line run.  They are vouched for
(``validation.vouch``) and compiled on first use; this file compiles every one of them, so a bad one still fails
here rather than at a model's first call, and checks that a tool of the user's is still refused as it is given.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.exceptions import DefinitionError
from subagents.models import FunctionModel
from subagents.runtime.events import Event
from subagents.tools import validation
from subagents.tools.agents import AGENT_TOOLS
from subagents.tools.base import FunctionTool
from subagents.tools.builtin import BUILTIN_TOOLS, builtin_tools
from subagents.tools.team import TEAM_TOOLS

OURS = (*BUILTIN_TOOLS, *AGENT_TOOLS, *TEAM_TOOLS)


@pytest.mark.parametrize("tool", OURS, ids=[t.name for t in OURS])
def test_every_vouched_schema_compiles_and_checks_arguments(tool: FunctionTool) -> None:
    schema = tool.parameters
    assert validation._VOUCHED.get(id(schema)) is schema
    assert validation._entry(schema)[2] is None  # no fault: the schema compiles
    assert validation.validate({"no_such_argument_anywhere": 1}, schema) is not None  # and it refuses a stranger


def test_the_built_in_tools_of_a_runtime_are_the_vouched_ones(tmp_path: Path) -> None:
    """``builtin_tools(workdir)`` makes a new skill tool per project: its schema must still be the shared one."""
    for t in builtin_tools(tmp_path):
        assert validation._VOUCHED.get(id(t.parameters)) is t.parameters, t.name


def test_a_first_runtime_compiles_no_schema_of_the_package(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import asyncio
        from subagents import Runtime
        from subagents.models import FunctionModel
        from subagents.tools import validation
        rt = Runtime(FunctionModel(lambda r: "ok", inline=True), workdir={str(tmp_path)!r}, store="memory://")
        print(len(validation._CACHE))
        print(asyncio.run(rt.run("hi")).text)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["0", "ok"]  # was 29: every tool's schema compiled as the runtime opened


async def test_a_vouched_tool_still_refuses_bad_arguments_at_its_first_call(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    calls = iter([("read_file", {"path": 5}), None])

    def model(req: object) -> object:
        from subagents.models import ModelResponse, ToolCall
        step = next(calls)
        return ModelResponse("done") if step is None else ModelResponse("", [ToolCall(*step)])

    seen: list[str] = []

    def heard(e: Event) -> None:
        if e.kind == "tool_end":
            seen.append(e.data["output"])

    async with Runtime(FunctionModel(model, inline=True), workdir=tmp_path, store="memory://", on_event=heard) as rt:
        assert (await rt.run("read it")).text == "done"
    (said,) = seen
    assert "path" in said
    assert "string" in said


def test_a_tool_of_the_user_with_a_bad_schema_is_still_refused_as_it_is_given(tmp_path: Path) -> None:
    bad = FunctionTool(lambda x: x, name="mine", description="d", parameters={"type": "object", "properties": {
        "x": {"type": "string", "pattern": "("}}})
    with pytest.raises(DefinitionError, match="tool 'mine' has an invalid parameters schema"):
        Runtime(FunctionModel(lambda r: "ok", inline=True), workdir=tmp_path, store="memory://", tools=[bad])
