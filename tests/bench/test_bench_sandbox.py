"""Smoke run of bench/sandbox.py with tiny sizes, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap and Landlock are Linux only")
def test_sandbox_bench_prints_one_json_line() -> None:
    p = subprocess.run([sys.executable, str(BENCH / "sandbox.py"), "--n", "3", "--warmup", "1"],
                       capture_output=True, text=True, timeout=120, check=True)
    (line,) = p.stdout.strip().splitlines()
    result = json.loads(line)
    assert set(result["rows"]) == {"floor", "plain", "off", "bwrap", "landlock", "landlock<6"}
    assert result["rows"]["bwrap"]["n"] == 3
    assert set(result["added_over_plain"]) == {"off", "bwrap", "landlock", "landlock<6"}
