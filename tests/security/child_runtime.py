"""Run one attacking agent in a fresh process: the runtime under attack, for tests that need it apart.

``python child_runtime.py SPEC_JSON`` runs ``kit.attack`` with the spec's workdir, calls and mode, and
prints one JSON line: the runtime's pid, the run's outcome and every step.  ``{runtime_pid}`` in a
call's string arguments becomes this process's pid.  Tests use it when the runtime must have the
secrets in its *initial* environment (``/proc/<pid>/environ`` shows only that), when an attack may
kill or stop the runtime, and when a tool could hang beyond recovery (the process is killed instead).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kit


def _fill(value: Any, pid: str) -> Any:
    if isinstance(value, str):
        return value.replace("{runtime_pid}", pid)
    if isinstance(value, dict):
        return {k: _fill(v, pid) for k, v in value.items()}
    return value


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    pid = str(os.getpid())
    calls = [(name, _fill(args, pid)) for name, args in spec["calls"]]
    a = await kit.attack(Path(spec["workdir"]), calls, mode=spec.get("mode", "yolo"), seeds=spec.get("seeds", ()),
                         timeout=spec.get("timeout", 60))
    return {
        "pid": os.getpid(),
        "run_id": a.result.id,
        "outcome": str(a.result.outcome),
        "error": a.result.error,
        "text": a.result.text,
        "expected": a.expected,
        "steps": [{"depth": s.depth, "tool": s.tool, "arguments": s.arguments, "content": s.content,
                   "is_error": s.is_error} for s in a.steps],
    }


if __name__ == "__main__":
    out = asyncio.run(main(json.loads(sys.argv[1])))
    sys.stdout.write("\nRESULT " + json.dumps(out) + "\n")
