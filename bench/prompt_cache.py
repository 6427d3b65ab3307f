"""Prompt-cache sharing in the demo's agent tree, measured on the Anthropic wire format.

    .venv/bin/python bench/prompt_cache.py [--dir PATH] [--memory-bytes N]

Runs the offline demo (``subagents demo``: a scripted coordinator that fans out ``explore`` children)
over ``--dir`` (default: this repository), turns every model request into the Messages API body the
Anthropic adapter would send (:func:`~subagents.models.anthropic.to_anthropic`, cache breakpoints
included) and replays the bodies in call order through
:class:`~subagents.models.prompt_cache.PrefixCache`.  Prints one line per agent's first request on
stderr — how many of its bytes an earlier request's cache entry serves (``cached``) and how many an
ideal cache could (``matched``) — and one JSON line on stdout.  ``--memory-bytes`` pads the base prompt
as project memory (CLAUDE.md and the like) would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from _common import ROOT

from subagents import Runtime
from subagents.demo import DEMO_PROMPT, demo_model
from subagents.models import ModelRequest, ModelResponse
from subagents.models.anthropic import to_anthropic
from subagents.models.prompt_cache import PrefixCache
from subagents.runtime.prompts import DEFAULT_BASE_PROMPT


class Recording:
    """The demo's model, recording each request as the Anthropic adapter would send it."""

    def __init__(self) -> None:
        self.inner = demo_model()
        self.name = "anthropic:claude-sonnet-4-6"
        self.calls: list[tuple[str, str, int, dict[str, Any]]] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        body = to_anthropic(request.system, request.messages, request.tools, request.system_prefix)
        a = request.agent
        self.calls.append((a.id, f"{a.nickname} [{a.agent_type}]", a.depth, body))
        return await self.inner.request(request)


async def measure(workdir: Path, memory_bytes: int) -> dict[str, Any]:
    model = Recording()
    memory = "\n\n# Project memory\n" + ("x" * memory_bytes) if memory_bytes else ""
    async with Runtime(model, workdir=workdir, store="memory://", system_prompt=DEFAULT_BASE_PROMPT + memory,
                       permission_mode="yolo") as rt:
        result = await rt.run(DEMO_PROMPT)
    cache = PrefixCache()
    seen: set[str] = set()
    firsts: list[dict[str, Any]] = []
    for agent_id, who, depth, body in model.calls:
        share = cache.add(body)
        if agent_id not in seen and depth > 0:
            firsts.append({"agent": who, "depth": depth, "bytes": share.total_bytes,
                           "cached": round(share.share, 3), "matched": round(share.matched_share, 3)})
        seen.add(agent_id)
    total = sum(s.total_bytes for s in cache.shares)
    cached = sum(s.cached_bytes for s in cache.shares)
    return {"bench": "prompt_cache", "outcome": str(result.outcome), "requests": len(cache.shares),
            "children": firsts, "all_requests_cached_share": round(cached / total, 3) if total else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=ROOT, help="directory the demo surveys")
    ap.add_argument("--memory-bytes", type=int, default=0, help="pad the base prompt by this many bytes")
    args = ap.parse_args()
    out = asyncio.run(measure(args.dir, args.memory_bytes))
    for c in out["children"]:
        print(f"{c['agent']:<32} depth {c['depth']}  {c['bytes']:>7} B  cached {c['cached']:>6.1%}  "
              f"matched {c['matched']:>6.1%}", file=sys.stderr)
    print(f"all {out['requests']} requests: {out['all_requests_cached_share']:.1%} of the bytes cached",
          file=sys.stderr)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
