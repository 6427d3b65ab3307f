"""Numeric tool arguments are finite and bounded (issue #12, item 3).

``bash`` with ``timeout_s=10**400`` raised ``OverflowError`` out of the tool (not a tool error: the
agent ended, and the command it had started was left running); ``NaN`` (which Python's ``json``
accepts) passed every check.  Now the schema validator refuses non-finite and out-of-range numbers
with a tool error naming the argument and the range, and the run goes on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.schema import validate

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("bash", {"command": "echo hi", "timeout_s": 10**400},
     "invalid arguments for tool 'bash': arguments.timeout_s must be a number from 0.01 to 86400, got an integer "
     "of 401 digits. Fix the arguments and call it again."),
    ("bash", {"command": "echo hi", "timeout_s": math.nan},
     "invalid arguments for tool 'bash': arguments.timeout_s must be a finite number from 0.01 to 86400, got NaN. "
     "Fix the arguments and call it again."),
    ("bash", {"command": "echo hi", "timeout_s": -1},
     "invalid arguments for tool 'bash': arguments.timeout_s must be a number from 0.01 to 86400, got -1. "
     "Fix the arguments and call it again."),
    ("bash", {"command": "echo hi", "timeout_s": json.loads("Infinity")},
     "invalid arguments for tool 'bash': arguments.timeout_s must be a finite number from 0.01 to 86400, got "
     "Infinity. Fix the arguments and call it again."),
    ("read_file", {"path": "a.txt", "offset": 10**30},
     "invalid arguments for tool 'read_file': arguments.offset must be an integer from 1 to 1000000000, got "
     "1000000000000000000000000000000. Fix the arguments and call it again."),
    ("read_file", {"path": "a.txt", "limit": 0},
     "invalid arguments for tool 'read_file': arguments.limit must be an integer from 1 to 1000000000, got 0. "
     "Fix the arguments and call it again."),
]


@pytest.mark.timeout(30)
async def test_bad_numbers_are_tool_errors_and_the_run_goes_on(workdir: Path) -> None:
    (workdir / "a.txt").write_text("alpha\n")
    results: list[tuple[str, bool]] = []

    def script(req: ModelRequest) -> ModelResponse:
        done = [r for m in req.messages for r in m.tool_results]
        if len(done) < len(BAD_CALLS):
            name, args, _ = BAD_CALLS[len(done)]
            return ModelResponse(tool_calls=[ToolCall(name, args, f"c{len(done)}")])
        results.extend((r.content, r.is_error) for r in done)
        return ModelResponse("survived")

    async with Runtime(FunctionModel(script), workdir=workdir, store="memory://", permission_mode="yolo") as rt:
        r = await rt.run("go")
    assert r.outcome.value == "ok", r.error
    assert r.text == "survived"
    assert results == [(msg, True) for _, _, msg in BAD_CALLS]


def test_validator_refuses_non_finite_and_huge_numbers_everywhere() -> None:
    schema = {"type": "object", "properties": {
        "n": {"type": "number"}, "i": {"type": "integer", "minimum": 0},
        "xs": {"type": "array", "items": {"type": "number"}}, "any": {}}}
    assert validate({"n": 1.5, "i": 3, "xs": [1, 2.5], "any": {"deep": [1e15, "x", None, True]}}, schema) is None
    assert validate({"n": math.inf}, schema) == (
        "arguments.n must be a finite number from -9007199254740992 to 9007199254740992, got Infinity")
    assert validate({"n": -(2**60)}, schema) == (
        "arguments.n must be a number from -9007199254740992 to 9007199254740992, got -1152921504606846976")
    assert validate({"i": 2**53 + 1}, schema) == (
        "arguments.i must be an integer from 0 to 9007199254740992, got 9007199254740993")
    assert validate({"xs": [1, math.nan]}, schema) == (
        "arguments.xs[1] must be a finite number from -9007199254740992 to 9007199254740992, got NaN")
    assert validate({"any": {"deep": [1, -math.inf]}}, schema) == (
        "arguments.any.deep[1] must be a finite number from -9007199254740992 to 9007199254740992, got -Infinity")
    assert validate({"any": [1e300]}, schema) == (
        "arguments.any[0] must be a number from -9007199254740992 to 9007199254740992, got 1e+300")
    assert validate({"any": [10**400]}, schema) == (
        "arguments.any[0] must be a number from -9007199254740992 to 9007199254740992, got an integer of 401 digits")


async def test_bash_called_directly_refuses_bad_timeouts_before_starting_anything(tmp_path: Path) -> None:
    from subagents.exceptions import ToolError
    from subagents.models import AgentInfo
    from subagents.tools.base import ToolContext
    from subagents.tools.paths import Workspace
    from subagents.tools.shell import bash

    marker = tmp_path / "ran"
    ctx = ToolContext(agent=AgentInfo("a", "a", "general-purpose"), workspace=Workspace(tmp_path))
    for bad, shown in ((10**400, "from 0.01 to 86,400 seconds, got an integer of 401 digits"),
                       (math.nan, "positive number of seconds, got NaN"), (math.inf, "got Infinity"),
                       (-1, "positive number of seconds, got -1"), (1e6, "from 0.01 to 86,400 seconds, got 1000000")):
        with pytest.raises(ToolError, match=shown):
            await bash.call({"command": f"touch {marker}", "timeout_s": bad}, ctx)
    assert not marker.exists()
