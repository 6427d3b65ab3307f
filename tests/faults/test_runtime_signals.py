"""A signal stops ``subagents run`` and records its agents as ``interrupted``, resumable (issue #12).

Before: SIGTERM / SIGHUP closed the agents as ``cancelled`` (``shutdown``), which says the user
closed them on purpose; Ctrl-C did the same.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cli.test_signals import marked, wait_for
from subagents.store import open_store

SCRIPT = str(Path(__file__).parents[1] / "cli" / "scripted_cli.py")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_a_signal_records_the_runs_as_interrupted_and_they_resume(tmp_path: Path, sig: signal.Signals,
                                                                   code: int) -> None:
    project = tmp_path / "project"
    project.mkdir()
    db = tmp_path / "state.db"
    env = {**os.environ, "SUBAGENTS_STORE": f"sqlite:///{db}", "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    marker = f"zz{uuid.uuid4().hex[:10]}"
    proc = subprocess.Popen([sys.executable, SCRIPT, "sleeper", "run", f"sleep {marker}", "--cwd", str(project),
                             "--permission-mode", "yolo"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=project)
    try:
        wait_for(lambda: (project / f"{marker}-0.started").exists() and (project / f"{marker}-1.started").exists())
        wait_for(lambda: len(marked(marker)) >= 2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    store = open_store(f"sqlite:///{db}", project)
    try:
        runs = store.list_runs(include_archived=True)
    finally:
        store.close()
    assert len(runs) == 2
    assert {(r.status, r.outcome) for r in runs} == {("errored", "interrupted")}, [(r.status, r.outcome) for r in runs]
    assert all(sig.name in (r.error or "") and "subagents runs resume" in (r.error or "") for r in runs)
    root = next(r for r in runs if r.parent_id is None)
    out = subprocess.run([sys.executable, SCRIPT, "sleeper", "runs", "--cwd", str(project), "resume", root.run_id,
                          "wake up"], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, cwd=project,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "woke up" in out.stdout + out.stderr


def test_with_json_a_signal_is_told_as_a_json_error(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {**os.environ, "SUBAGENTS_STORE": "memory://", "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    marker = f"zz{uuid.uuid4().hex[:10]}"
    proc = subprocess.Popen([sys.executable, SCRIPT, "sleeper", "run", f"sleep {marker}", "--cwd", str(project),
                             "--permission-mode", "yolo", "--json"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project)
    try:
        wait_for(lambda: (project / f"{marker}-0.started").exists())
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    last = json.loads(out.strip().splitlines()[-1])
    assert last["kind"] == "error"
    assert last["exit_code"] == 143
    assert "Stopped by SIGTERM" in last["message"]
