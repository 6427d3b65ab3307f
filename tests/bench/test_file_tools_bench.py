"""Smoke run of bench/file_tools.py with tiny sizes, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_file_tools_bench_prints_one_json_line(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, str(BENCH / "file_tools.py"), "--iters", "4", "--warmup", "1",
                        "--dir", str(tmp_path)], capture_output=True, text=True, timeout=120, check=True)
    (line,) = p.stdout.strip().splitlines()
    r = json.loads(line)
    for tool in ("read_file", "write_file", "edit_file", "grep"):
        assert r[tool]["n"] == 4
    assert r["fsync"] is True
    assert "median" in p.stderr
