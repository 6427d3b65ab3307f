"""``subagents run --json ... | head -1``: the reader goes away after one line; the run finishes quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = str(Path(__file__).with_name("scripted_cli.py"))


def test_a_json_stream_whose_reader_left_ends_the_run_quietly(isolated: Path) -> None:
    cmd = [sys.executable, SCRIPT, "paced", "run", "--json", "write two files", "--cwd", str(isolated),
           "--permission-mode", "autoEdit"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    assert proc.stderr is not None
    first = proc.stdout.readline()
    assert first.startswith(b'{"kind": ')
    proc.stdout.close()  # like `head -1`
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in err
    assert "raised on a" not in err  # no listener failure per event either
    assert (isolated / "b.txt").read_text() == "b.txt"  # the run went on to its end (b.txt: its last tool call)
