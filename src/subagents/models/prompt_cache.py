"""How much of each Messages API request a prompt cache can serve from earlier requests — a measurement.

Anthropic caches a request's prefix in the order tools, then system, then messages, and writes a cache
entry at each ``cache_control`` breakpoint; a later request reads the longest entry whose bytes equal
its own prefix, looked up at its breakpoints and up to :data:`LOOKBACK` blocks before each.
:class:`PrefixCache` replays that rule over the request bodies an adapter sent (a loopback server's
record, or :func:`~subagents.models.anthropic.to_anthropic`'s output) and reports per request:

* ``total_bytes`` — the request's tool, system and message blocks;
* ``matched_bytes`` — the longest block prefix equal to an earlier request's (what an ideal cache could
  serve);
* ``cached_bytes`` — the part the breakpoints actually make readable (an entry an earlier request wrote).

Bytes are canonical JSON of each block without its ``cache_control`` marker; the provider counts tokens
and caches only prefixes of at least 1,024 of them (2,048 on Haiku), which this measurement ignores.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOOKBACK", "PrefixCache", "PrefixShare", "request_blocks"]

LOOKBACK = 20
"""Blocks before a breakpoint the provider also checks for an earlier entry."""


@dataclass(slots=True, frozen=True)
class PrefixShare:
    """One request's cacheable bytes and how many an earlier request's prefix covers."""

    index: int
    total_bytes: int
    matched_bytes: int
    cached_bytes: int
    breakpoints: int

    @property
    def share(self) -> float:
        """``cached_bytes / total_bytes`` (0.0 for an empty request)."""
        return self.cached_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def matched_share(self) -> float:
        """``matched_bytes / total_bytes``: what an ideal cache (a breakpoint everywhere) could serve."""
        return self.matched_bytes / self.total_bytes if self.total_bytes else 0.0


def _canon(kind: str, block: dict[str, Any]) -> bytes:
    plain = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps([kind, plain], sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def request_blocks(body: dict[str, Any]) -> list[tuple[bytes, bool]]:
    """The request's blocks in cache order (tools, system, messages), each as (canonical bytes, has a breakpoint)."""
    out: list[tuple[bytes, bool]] = []
    for tool in body.get("tools") or ():
        out.append((_canon("tool", tool), "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append((_canon("system", {"type": "text", "text": system}), False))
    elif isinstance(system, list):
        out.extend((_canon("system", b), "cache_control" in b) for b in system)
    for m in body.get("messages") or ():
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        out.extend((_canon(str(m.get("role")), b), "cache_control" in b) for b in blocks)
    return out


@dataclass(slots=True)
class PrefixCache:
    """Replays requests in order: each reads the entries earlier ones wrote at their breakpoints."""

    entries: set[bytes] = field(default_factory=set)
    seen: set[bytes] = field(default_factory=set)
    shares: list[PrefixShare] = field(default_factory=list)

    def add(self, body: dict[str, Any]) -> PrefixShare:
        """Measure ``body`` against the requests before it, then record the entries it writes."""
        blocks = request_blocks(body)
        digests: list[bytes] = []
        sizes: list[int] = []
        h = hashlib.sha256()
        total = 0
        for data, _ in blocks:
            h.update(len(data).to_bytes(8, "big") + data)
            digests.append(h.digest())
            total += len(data)
            sizes.append(total)
        marks = [i for i, (_, mark) in enumerate(blocks) if mark]
        best = -1
        for b in marks:
            for j in range(b, max(-1, b - LOOKBACK - 1), -1):
                if digests[j] in self.entries:
                    best = max(best, j)
                    break
        matched = -1
        for j in range(len(digests) - 1, -1, -1):
            if digests[j] in self.seen:
                matched = j
                break
        self.entries.update(digests[b] for b in marks)
        self.seen.update(digests)
        share = PrefixShare(len(self.shares), total, sizes[matched] if matched >= 0 else 0,
                            sizes[best] if best >= 0 else 0, len(marks))
        self.shares.append(share)
        return share

    def add_all(self, bodies: Iterable[dict[str, Any]]) -> list[PrefixShare]:
        """:meth:`add` each body in order."""
        return [self.add(b) for b in bodies]
