"""Cost of the shell sandbox: a trivial ``bash`` call (``true``) through the tool, per backend.

    .venv/bin/python bench/sandbox.py [--n 200] [--warmup 20]

Measures, interleaved in one process so that drift hits every row alike:

- ``floor``: ``asyncio.create_subprocess_exec("/bin/true")`` and its ``wait()``: the cost of any
  child process from asyncio;
- ``plain``: the ``bash`` tool with ``[sandbox] mode = "off"`` and no reaper (``/bin/bash -c true``, pipe,
  reap): an unconfined, unsupervised command, the base of the added costs;
- ``off``: the same with the reaper commands without a PID namespace run under (``sandbox/supervisor.py``);
- ``bwrap`` / ``landlock``: the same call through each sandbox backend (Landlock with the reaper);
- ``landlock<6``: Landlock as on a kernel before 6.12 (its ABI taken as 5): no signal scope, the command's signals
  decided on by the command's reaper instead (``sandbox/signals.py``).

Prints ONE JSON line (median, mean, p10, p90 in µs per row, and the added cost of ``off`` — the reaper —
and of each backend over ``plain``); a readable summary goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import summ_us

from subagents.models.base import AgentInfo
from subagents.sandbox import SandboxPolicy, Workspace, landlock
from subagents.sandbox.shell import ShellSandbox
from subagents.tools.base import ToolContext
from subagents.tools.shell import bash

MODES = ("plain", "off", "bwrap", "landlock", "landlock<6")


class _Unsupervised(ShellSandbox):
    """``mode = "off"`` without the reaper: the unconfined command alone, the base every cost is added to."""

    @staticmethod
    def _supervised(argv: list[str], env: dict[str, str], cwd: Path, landlock: object = None) -> list[str]:
        return argv


async def main(n: int, warmup: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for name in (".git", ".subagents", "src"):
            (root / name).mkdir()
        ctxs = {}
        for mode in MODES:
            ws = Workspace(root, SandboxPolicy(mode={"plain": "off", "landlock<6": "landlock"}.get(mode, mode)))
            box = (_Unsupervised if mode == "plain" else ShellSandbox)(ws)
            if box.backend != ws.policy.mode:
                raise SystemExit(f"backend {mode} is not available here: {box.unavailable()}")
            ctxs[mode] = ToolContext(agent=AgentInfo("b", "b", "general-purpose"), workspace=ws, sandbox=box)

        async def floor() -> None:
            proc = await asyncio.create_subprocess_exec("/bin/true")
            await proc.wait()

        real_abi = landlock.abi_version

        async def tool(mode: str) -> None:
            if mode == "landlock<6":
                landlock.abi_version = lambda: 5  # type: ignore[assignment]
            try:
                out = await bash.call({"command": "true"}, ctxs[mode])
            finally:
                landlock.abi_version = real_abi
            assert out == "(no output)\nexit code 0", out

        samples: dict[str, list[float]] = {"floor": [], **{m: [] for m in MODES}}
        jobs = [("floor", floor), *((m, lambda m=m: tool(m)) for m in MODES)]
        for i in range(warmup + n):
            for name, job in jobs[i % len(jobs):] + jobs[: i % len(jobs)]:  # rotate the order
                t0 = time.perf_counter()
                await job()
                dt = time.perf_counter() - t0
                if i >= warmup:
                    samples[name].append(dt)
    rows = {name: summ_us(xs) for name, xs in samples.items()}
    added = {m: {"median_us": rows[m]["median_us"] - rows["plain"]["median_us"],
                 "mean_us": rows[m]["mean_us"] - rows["plain"]["mean_us"]} for m in MODES[1:]}
    return {"bench": "sandbox", "n": n, "rows": rows, "added_over_plain": added,
            "stdev_us": {name: statistics.stdev([x * 1e6 for x in xs]) for name, xs in samples.items()}}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    result = asyncio.run(main(a.n, a.warmup))
    for name, r in result["rows"].items():
        print(f"{name:>10}: median {r['median_us'] / 1000:6.2f} ms  mean {r['mean_us'] / 1000:6.2f} ms  "
              f"p90 {r['p90_us'] / 1000:6.2f} ms", file=sys.stderr)
    for name, r in result["added_over_plain"].items():
        print(f"{name:>10} adds: median {r['median_us'] / 1000:+.2f} ms, mean {r['mean_us'] / 1000:+.2f} ms",
              file=sys.stderr)
    print(json.dumps(result))
