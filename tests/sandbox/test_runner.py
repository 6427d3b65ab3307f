"""The shell sandbox runner: backend choice, refusing without a backend, the "off" warning, process groups."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import pytest

from subagents.messages import ToolUseBlock
from subagents.models.base import AgentInfo
from subagents.sandbox import SandboxPolicy, Workspace, backends, landlock
from subagents.sandbox.shell import SandboxUnavailable, ShellSandbox, live_process_groups
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.shell import bash

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux backends")


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.fixture
def nothing_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "choose", backends.choose.__wrapped__)
    monkeypatch.setattr(backends, "probe_bwrap", lambda: (None, (), "bubblewrap failed (setting up uid map: "
                                                             "Permission denied)"))
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)


def test_auto_prefers_bubblewrap_here(tmp_path: Path) -> None:
    assert ShellSandbox(Workspace(tmp_path)).backend == "bwrap"
    assert ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="landlock"))).backend == "landlock"
    assert ShellSandbox(Workspace(tmp_path)).warning is None


@pytest.mark.usefixtures("nothing_works")
@pytest.mark.parametrize("mode", ["auto", "bwrap", "landlock"])
async def test_no_backend_refuses_with_what_failed_and_how_to_fix_it(mode: str, tmp_path: Path) -> None:
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode=mode)))
    assert box.backend == "none"
    with pytest.raises(SandboxUnavailable) as info:
        await box.spawn(["/bin/true"])
    msg = str(info.value)
    assert msg.startswith(f'Commands cannot run: no shell sandbox works on this machine ([sandbox] mode = "{mode}")')
    if mode != "landlock":
        assert "bubblewrap failed (setting up uid map: Permission denied)" in msg
    if mode != "bwrap":
        assert "Landlock is not enabled in this kernel" in msg
    assert "install bubblewrap" in msg
    assert "kernel.unprivileged_userns_clone=1" in msg
    assert 'set `[sandbox] mode = "off"` in .subagents/config.toml (a warning is then printed on every run)' in msg


@pytest.mark.usefixtures("nothing_works")
async def test_the_model_gets_the_refusal_as_a_tool_error(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ctx = ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=ws, sandbox=ShellSandbox(ws))
    result = await ToolRegistry([bash]).execute(ToolUseBlock("c1", "bash", {"command": "echo hi"}), ctx)
    assert result.is_error
    assert result.content.startswith("Commands cannot run: no shell sandbox works on this machine")


async def test_off_warns_and_runs_unconfined(tmp_path: Path) -> None:
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="off")))
    assert box.backend == "off"
    assert box.warning == (
        'WARNING: the shell sandbox is off ([sandbox] mode = "off"): agent commands run unconfined, with your '
        "user's full access to files, network and processes, even in plan mode.")
    host = f"/tmp/subagents-off-{uuid.uuid4().hex[:8]}"
    proc = await box.spawn(["/bin/sh", "-c", f"echo x > {host}"])
    assert await proc.wait() == 0
    try:
        assert read(host) == "x\n"
    finally:
        os.unlink(host)


async def test_groups_are_recorded_until_reaped(tmp_path: Path) -> None:
    box = ShellSandbox(Workspace(tmp_path))
    proc = await box.spawn(["/bin/sh", "-c", "exit 3"])
    assert proc.pid in live_process_groups()
    assert await proc.wait() == 3
    for _ in range(100):
        if proc.pid not in live_process_groups():
            break
        await asyncio.sleep(0.01)
    assert proc.pid not in live_process_groups()
    assert box.finish(proc) == []


async def test_kill_stops_the_group(tmp_path: Path) -> None:
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="landlock")))
    proc = await box.spawn(["/bin/sh", "-c", "trap '' TERM; sleep 300 & wait"])
    await box.kill(proc)
    assert proc.returncode is not None
    assert proc.pid not in live_process_groups()
