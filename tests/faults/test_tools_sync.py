"""Synchronous user callables never hang a run or the process (issue #12, item 2).

A ``@tool`` function or a sync ``FunctionModel`` script that never returns (``time.sleep(3600)``, a
read from a FIFO nobody writes) used to run in ``asyncio.to_thread`` (the tool: ``asyncio.run`` then
waits for the non-daemon executor thread at exit, forever) or on the event loop itself (the model:
``timeout_s`` could never fire).  Each case runs a small script in a subprocess, so a regression is a
subprocess that does not exit, not a hung test run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from subagents.exceptions import ToolError
from subagents.models import AgentInfo
from subagents.tools.base import ToolContext
from subagents.tools.files import grep, read_file
from subagents.tools.paths import Workspace

PRELUDE = """
import os, sys, time
from subagents import Limits, Runtime, tool
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

FIFO = sys.argv[1]

def hang() -> None:
    if FIFO == "-":
        time.sleep(3600)
    else:
        with open(FIFO, "rb") as f:  # nobody ever opens the other end
            f.read()

@tool(category="read")
def stuck(what: str) -> str:
    '''Never returns.

    Args:
        what: anything.
    '''
    print("IN-TOOL", flush=True)
    hang()
    return "unreachable"

def calls_stuck(req: ModelRequest) -> ModelResponse:
    if any(m.tool_results for m in req.messages):
        return ModelResponse("done")
    return ModelResponse(tool_calls=[ToolCall("stuck", {"what": "x"})])

def stuck_model(req: ModelRequest) -> ModelResponse:
    print("IN-MODEL", flush=True)
    hang()
    return ModelResponse("unreachable")

def runtime(script, workdir):
    return Runtime(FunctionModel(script), workdir=workdir, store="memory://", tools=[stuck], builtin_tools=False)

t0 = time.monotonic()
"""

RUN_WITH_TIMEOUT = PRELUDE + """
script = calls_stuck if sys.argv[2] == "tool" else stuck_model
r = runtime(script, sys.argv[3]).run_sync("go", limits=Limits(timeout_s=0.5))
print(f"OUTCOME {r.outcome.value} {time.monotonic() - t0:.2f}", flush=True)
"""

RUN_UNTIL_SIGNALLED = PRELUDE + """
script = calls_stuck if sys.argv[2] == "tool" else stuck_model
try:
    runtime(script, sys.argv[3]).run_sync("go")
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""

EXIT_WITHIN_S = 8.0
"""How long the whole subprocess may take (interpreter start and imports included: about 0.3 s)."""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(p: subprocess.Popen[str], within: float) -> tuple[str, str]:
    try:
        out, err = p.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"the process did not exit within {within} s; stdout: {out!r}, stderr: {err[-2000:]!r}")
    return out, err


def _hang_arg(kind: str, tmp_path: Path) -> str:
    if kind == "sleep":
        return "-"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return str(fifo)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("hang", ["sleep", "fifo"])
@pytest.mark.parametrize("who", ["tool", "model"])
def test_a_stuck_sync_callable_times_out_and_the_process_exits(who: str, hang: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    p = _spawn(RUN_WITH_TIMEOUT, _hang_arg(hang, tmp_path), who, str(tmp_path))
    out, err = _finish(p, EXIT_WITHIN_S)
    elapsed = time.monotonic() - t0
    assert p.returncode == 0, err
    assert f"IN-{who.upper()}" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("OUTCOME"))
    _, outcome, run_s = line.split()
    assert outcome == "timeout"
    assert float(run_s) < 2.0  # timeout_s=0.5: the run ends on time
    assert elapsed < EXIT_WITHIN_S
    assert "Traceback" not in err


@pytest.mark.timeout(30)
@pytest.mark.parametrize("who", ["tool", "model"])
def test_ctrl_c_ends_a_run_stuck_in_a_sync_callable(who: str, tmp_path: Path) -> None:
    p = _spawn(RUN_UNTIL_SIGNALLED, "-", who, str(tmp_path))
    assert p.stdout is not None
    assert p.stdout.readline().strip() == f"IN-{who.upper()}"  # the callable is running, and stuck
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = _finish(p, EXIT_WITHIN_S)
    assert time.monotonic() - sent < 3.0
    assert "INTERRUPTED" in out, err


@pytest.mark.timeout(20)
async def test_file_tools_never_open_a_fifo(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    os.mkfifo(root / "pipe")
    (root / "a.txt").write_text("needle\n")
    ctx = ToolContext(agent=AgentInfo("a", "a", "general-purpose"), workspace=Workspace(root))
    with pytest.raises(ToolError, match="is a FIFO"):
        await read_file.call({"path": "pipe"}, ctx)
    assert await grep.call({"pattern": "needle"}, ctx) == "a.txt:1: needle"
    with pytest.raises(ToolError, match="is a FIFO"):
        await grep.call({"pattern": "needle", "path": "pipe"}, ctx)
