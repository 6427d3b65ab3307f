"""SIGTERM and SIGHUP stop ``subagents run`` like Ctrl-C: agents closed, processes killed, exit 128 + signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

SCRIPT = str(Path(__file__).with_name("scripted_cli.py"))


def marked(marker: str) -> list[int]:
    """PIDs of live processes whose command line holds ``marker``."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
                with open(f"/proc/{d}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmd and state not in ("Z", "X") and int(d) != os.getpid():
                out.append(int(d))
    return out


def wait_for(cond: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_closes_the_run_and_kills_every_command(isolated: Path, sig: signal.Signals, code: int) -> None:
    marker = f"zz{uuid.uuid4().hex[:10]}"
    proc = subprocess.Popen([sys.executable, SCRIPT, "sleeper", "run", f"sleep {marker}", "--cwd", str(isolated),
                             "--permission-mode", "yolo"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (isolated / f"{marker}-0.started").exists() and (isolated / f"{marker}-1.started").exists())
        wait_for(lambda: len(marked(marker)) >= 2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert f"Stopped by {sig.name}: the agents were closed and their processes killed; " in err
    assert "Traceback" not in err
    wait_for(lambda: marked(marker) == [], timeout=5)
