"""Latency of small file-tool calls (read_file, write_file, edit_file, grep) through the tool objects.

    .venv/bin/python bench/file_tools.py [--iters 2000] [--warmup 200] [--dir /dev/shm]

Each call is ``await tool.call({...}, ctx)``, exactly what the agent loop does (validation aside):
the thread hop of a sync tool included.  The workspace is a fresh directory under ``--dir`` (default:
the system temp dir) holding a 40-line file to read, a 40-line file to edit (the edit flips one line
back and forth, so every call succeeds), a file that ``write_file`` overwrites with 40 lines, and a
tree of 20 files × 40 lines for ``grep``.  ``--dir`` matters for the write tools: on a disk-backed
file system their time is dominated by fsync, on tmpfs (``/dev/shm``) it is not; ``--no-fsync``
turns fsync into a no-op to show what the rest costs.

To compare two checkouts, run the same script with the other one's ``src`` first on PYTHONPATH:
``PYTHONPATH=/tmp/base/src .venv/bin/python bench/file_tools.py``.  Prints ONE JSON line on stdout
(``_common.summ_us`` per tool) and a short table on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import summ_us

import subagents
from subagents.models import AgentInfo
from subagents.tools.base import FunctionTool, ToolContext
from subagents.tools.files import edit_file, grep, read_file, write_file
from subagents.tools.paths import Workspace

LINES = 40


def _text(tag: str) -> str:
    return "".join(f"{tag} line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(LINES))


def setup(root: Path) -> None:
    (root / "small.txt").write_text(_text("read"))
    (root / "edit.txt").write_text(_text("edit").replace("edit line 7:", "MARK-A line 7:"))
    (root / "write.txt").write_text("old\n")
    tree = root / "src"
    for i in range(20):
        d = tree / f"pkg{i % 4}"
        d.mkdir(parents=True, exist_ok=True)
        body = _text(f"f{i}")
        (d / f"mod{i}.py").write_text(body if i % 5 else body + "needle = True\n")


async def measure(t: FunctionTool, ctx: ToolContext, args: list[dict[str, Any]], iters: int, warmup: int,
                  expect: str) -> list[float]:
    samples: list[float] = []
    for i in range(iters + warmup):
        a = args[i % len(args)]
        t0 = time.perf_counter()
        out = await t.call(a, ctx)
        dt = time.perf_counter() - t0
        assert expect in out, out
        if i >= warmup:
            samples.append(dt)
    return samples


def fs_type(path: str) -> str:
    p = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return p.stdout.strip() or "?"


async def main(iters: int, warmup: int, where: str | None) -> dict[str, Any]:
    content = _text("write")
    edits = [{"path": "edit.txt", "old_string": "MARK-A", "new_string": "MARK-B"},
             {"path": "edit.txt", "old_string": "MARK-B", "new_string": "MARK-A"}]
    cases: list[tuple[str, FunctionTool, list[dict[str, Any]], str]] = [
        ("read_file", read_file, [{"path": "small.txt"}], "read line 39"),
        ("write_file", write_file, [{"path": "write.txt", "content": content}], "write.txt"),
        ("edit_file", edit_file, edits, "Edited edit.txt"),
        ("grep", grep, [{"pattern": "needle", "path": "src"}], "needle = True"),
    ]
    out: dict[str, Any] = {"iters": iters, "subagents_src": str(Path(subagents.__file__).parent)}
    with tempfile.TemporaryDirectory(dir=where) as d:
        root = Path(d) / "ws"
        root.mkdir()
        setup(root)
        out["fs"] = fs_type(d)
        ctx = ToolContext(agent=AgentInfo("bench", "bench", "general-purpose"), workspace=Workspace(root))
        for name, t, args, expect in cases:
            out[name] = summ_us(await measure(t, ctx, args, iters, warmup, expect))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--dir", default=None, help="where the temporary workspace goes (default: the temp dir)")
    ap.add_argument("--no-fsync", action="store_true",
                    help="make os.fsync a no-op, to separate the cost of durability from the rest (diagnostic only)")
    a = ap.parse_args()
    if a.no_fsync:
        os.fsync = lambda fd: None
    r = asyncio.run(main(a.iters, a.warmup, a.dir))
    for k in ("read_file", "write_file", "edit_file", "grep"):
        print(f"{k:>10}: median {r[k]['median_us']:8.1f} µs  mean {r[k]['mean_us']:8.1f} µs", file=sys.stderr)
    print(f"({r['fs']} at {a.dir or tempfile.gettempdir()}{', fsync off' if a.no_fsync else ''}, {a.iters} calls "
          f"each, src {r['subagents_src']})", file=sys.stderr)
    r["fsync"] = not a.no_fsync
    print(json.dumps(r))
