"""What the permission layer costs: the delegation cycle with and without rules and hooks, next to the floor.

    python bench/authority.py [--iters 2000] [--rounds 5] [--store memory|sqlite]

A cycle is: the parent's model asks for ``spawn_agent`` (foreground), the child's model answers, the
parent's model answers (instant ``FunctionModel``).  Variants, measured in interleaved rounds in one
process so they share the machine's noise:

- ``floor``: the same workload as a ~20-line plain-asyncio loop (no framework);
- ``default``: permission mode ``default``, no rules, no hooks (what every user gets);
- ``yolo``: no checks that could ask;
- ``rules+hooks``: ``default`` with 20 rules (allow, ask, deny) and 2 Python callback hooks
  (``PreToolUse`` and ``PostToolUse``) that match every tool.

Prints one JSON line: median and mean µs per cycle for each variant and the ratios to the floor and to
``default``.
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

from _common import CHILD_TEXT, PARENT_TEXT, store_url

from subagents import HookInput, HookResult, Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

RULES = {
    "allow": [f"bash(tool-{i} *)" for i in range(8)] + ["write_file(docs/**)", "read_file"],
    "ask": [f"bash(git push{i}*)" for i in range(5)],
    "deny": ["read_file(.env)", "bash(rm -rf*)", "write_file(secrets/**)", "edit_file(*.pem)", "mcp__x__*"],
}


def script(req: ModelRequest) -> ModelResponse:
    if req.agent.depth > 0:
        return ModelResponse(CHILD_TEXT)
    if req.messages[-1].tool_results:
        assert req.messages[-1].tool_results[0].content.endswith(CHILD_TEXT)
        return ModelResponse(PARENT_TEXT)
    return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "go"})])


def pre(inp: HookInput) -> HookResult | None:
    return None


async def post(inp: HookInput) -> HookResult | None:
    return None


async def floor_cycle() -> str:
    async def loop(model: Any, tools: dict[str, Any], task: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        while True:
            resp = await model(messages)
            messages.append(resp)
            if not resp.get("calls"):
                return str(resp["content"])
            outs = await asyncio.gather(*(tools[c](**a) for c, a in resp["calls"]))
            messages += [{"role": "tool", "content": o} for o in outs]

    async def child_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"content": CHILD_TEXT}

    async def parent_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if messages[-1]["role"] == "tool":
            return {"content": PARENT_TEXT}
        return {"content": None, "calls": [("child", {"task": "go"})]}

    async def child(task: str) -> str:
        return await loop(child_model, {}, task)

    return await loop(parent_model, {"child": child}, "hi")


async def measure(variant: str, n: int, store: str, workdir: str) -> list[float]:
    out: list[float] = []
    if variant == "floor":
        for _ in range(n):
            t0 = time.perf_counter()
            assert await floor_cycle() == PARENT_TEXT
            out.append(time.perf_counter() - t0)
        return out
    kw: dict[str, Any] = {"permission_mode": "yolo" if variant == "yolo" else "default"}
    if variant == "rules+hooks":
        kw["hooks"] = {"PreToolUse": [pre], "PostToolUse": [post]}
    async with Runtime(FunctionModel(script, inline=True),
                       workdir=workdir, store=store, builtin_tools=False, **kw) as rt:
        if variant == "rules+hooks":
            auth = rt.manager.authority
            assert auth is not None
            from subagents.authority.permissions import Permissions

            auth.permissions = Permissions.from_texts(**RULES)
        for _ in range(n):
            t0 = time.perf_counter()
            r = await rt.run("hi")
            out.append(time.perf_counter() - t0)
            assert r.text == PARENT_TEXT, r.text
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    a = ap.parse_args()
    variants = ["floor", "default", "yolo", "rules+hooks"]
    samples: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as d:
        url, label = store_url(a.store, d)
        for v in variants:  # warm-up
            asyncio.run(measure(v, 100, url, d))
        per = max(1, a.iters // a.rounds)
        for _ in range(a.rounds):
            for v in variants:
                samples[v] += asyncio.run(measure(v, per, url, d))
    res: dict[str, Any] = {"bench": "authority", "store": label, "n": per * a.rounds}
    for v in variants:
        us = [x * 1e6 for x in samples[v]]
        res[v] = {"median_us": round(statistics.median(us), 1), "mean_us": round(statistics.fmean(us), 1)}
    floor, base = res["floor"], res["default"]
    for v in variants[1:]:
        res[v]["x_floor_mean"] = round(res[v]["mean_us"] / floor["mean_us"], 2)
        res[v]["x_default_median"] = round(res[v]["median_us"] / base["median_us"], 3)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
