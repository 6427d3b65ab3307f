"""The SQLite writer process imports little: its start is what a runtime's first writes wait for (~80 ms here,
of which json, re, pathlib and typing were ~30 ms; then ~65 ms, of which contextlib, signal's enums, the sqlite3
package's datetime adapters and threading were ~20 ms)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import subagents.store

STORE = Path(subagents.store.__file__).parent

PROBE = """
import importlib.machinery, sys, types
path = sys.argv[1]
m = types.ModuleType("_writer_main"); m.__file__ = path
importlib.machinery.SourceFileLoader("_writer_main", path).exec_module(m)
fold = m._load_fold()
fold["sibling"]("_checkpoint")
print(" ".join(sorted(n for n in ("json", "re", "pathlib", "typing", "hashlib", "contextlib", "signal", "enum",
                                   "sqlite3", "datetime", "threading") if n in sys.modules)))
"""


def test_the_writer_and_what_it_loads_import_only_the_c_parts_of_what_they_use() -> None:
    out = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE, str(STORE / "_writer_main.py")],
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == [], out.stdout


def test_the_json_the_writer_makes_is_the_json_modules() -> None:
    import json

    from subagents.store import _fold

    for v in ({"a": 1, "é": [1.5, None, True]}, {"input_tokens": 3}, [], "x\u2028\"", float("inf")):
        assert _fold.encode(v) == json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    with pytest.raises(TypeError, match="is not JSON serializable"):
        _fold.encode({"x": object()})
