"""The ``bash`` tool given commands no process can be started with: a NUL character, a lone surrogate, a
command longer than the system takes.  Each is a clear :class:`ToolError` telling the model what to change,
not a ``ValueError``/``UnicodeEncodeError``/``OSError`` from deep inside ``exec``; nothing is left behind."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from subagents.exceptions import ToolError
from subagents.models.base import AgentInfo
from subagents.sandbox import SandboxPolicy, Workspace
from subagents.sandbox.shell import ShellSandbox, live_process_groups
from subagents.tools.base import ToolContext
from subagents.tools.shell import bash

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the limits are Linux's")


@pytest.fixture(params=["bwrap", "landlock", "off"])
def ctx(ws_root: Path, request: pytest.FixtureRequest) -> ToolContext:
    ws = Workspace(ws_root, SandboxPolicy(mode=str(request.param)))
    box = ShellSandbox(ws)
    assert box.backend == request.param
    return ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=ws, sandbox=box)


async def test_a_nul_in_the_command_is_a_clear_tool_error(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="contains a NUL character"):
        await bash.call({"command": "echo a\0b"}, ctx)


async def test_a_lone_surrogate_in_the_command_is_a_clear_tool_error(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="no UTF-8 form"):
        await bash.call({"command": "echo \ud800"}, ctx)


async def test_a_command_too_long_for_exec_is_a_clear_tool_error(ctx: ToolContext) -> None:
    before = live_process_groups()
    with pytest.raises(ToolError, match="too long for the system to run"):
        await bash.call({"command": "echo " + "x" * 300_000}, ctx)
    assert live_process_groups() == before


async def test_surrogate_escaped_bytes_still_run(ctx: ToolContext) -> None:
    out = await bash.call({"command": "printf '%s' \udcff | od -An -tx1"}, ctx)
    assert out.split() == ["ff", "exit", "code", "0"]
