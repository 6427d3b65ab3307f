"""The example of docs/scale-out.md runs as written (a dev server, a worker, a parent that delegates)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.temporal

DOC = Path(__file__).resolve().parents[3] / "docs" / "scale-out.md"


def test_the_scale_out_example_runs(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)[0]
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "SUBAGENTS_STORE": "memory://"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[-1] == "completed - my child says: the answer is 42"
