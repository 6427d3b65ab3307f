"""``subagents run --engine temporal://...`` on a terminal asks for approvals as a local run does: the worker (in
permission mode default) waits, the CLI's terminal prompt asks the person, ``y`` lets the call run.  Three
processes (worker, CLI in a pty, this test) and a dev server, as in production."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest
from temporalio.testing import WorkflowEnvironment

from subagents.demo import DEMO_PROMPT, REPORT_PATH

from .test_cli_run import _project, _worker

pytestmark = [pytest.mark.temporal]


def test_run_on_a_terminal_asks_for_the_worker_s_call(temporal_env: WorkflowEnvironment, tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    with _worker(temporal_env, project, tmp_path / "worker.log", "--model", "subagents.demo:demo_model") as url:
        child = pexpect.spawn(sys.executable, ["-m", "subagents.cli.main", "run", "--engine", url, "--max-turns", "20",
                                               DEMO_PROMPT], cwd=str(project), encoding="utf-8",
                              env={**os.environ, "TERM": "xterm", "NO_COLOR": "1"}, dimensions=(40, 160), timeout=90)
        try:
            child.expect_exact("approval needed")
            child.expect_exact("wants to run write_file")
            child.expect_exact("your choice [y/a/n]:")
            child.sendline("y")
            child.expect(pexpect.EOF)
        finally:
            if child.isalive():
                child.terminate(force=True)
        child.close()
        out = str(child.before)
        assert child.exitstatus == 0, out
        assert "Survey done (scripted model" in out
        assert (project / REPORT_PATH).is_file()  # the worker wrote it once the person said yes
