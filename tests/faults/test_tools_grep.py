"""``grep`` never freezes the event loop (issue #12, item 1).

A catastrophic regex (``(a+)+$`` on a long line) ran in Python's backtracking ``re``, which holds the
GIL for the whole match: the event loop froze with it.  ``grep`` now uses RE2 (linear time, and it
releases the GIL), searches off the loop, stops at a time limit with what it found, and stops when
its caller is cancelled.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ToolError
from subagents.models import AgentInfo
from subagents.tools import grepping
from subagents.tools.base import ToolContext
from subagents.tools.files import grep
from subagents.tools.paths import Workspace


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(agent=AgentInfo("a", "a", "general-purpose"), workspace=Workspace(root))


@asynccontextmanager
async def max_lag() -> AsyncIterator[list[float]]:
    """The longest the event loop went without running a 1 ms ticker, while the block ran (``[seconds]``)."""
    worst = [0.0]

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst[0] = max(worst[0], now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    try:
        yield worst
    finally:
        ticker.cancel()


@pytest.mark.timeout(20)
async def test_catastrophic_regex_answers_fast_and_the_loop_keeps_ticking(ctx: ToolContext) -> None:
    (ctx.workspace.root / "long.txt").write_text("x\n" + "a" * 100_000 + "b\n" + "aaa\n")
    t0 = time.perf_counter()
    async with max_lag() as lag:
        out = await asyncio.wait_for(grep.call({"pattern": "(a+)+$"}, ctx), 10)
    assert time.perf_counter() - t0 < 2.0
    assert out == "long.txt:3: aaa"
    assert lag[0] < 0.5


@pytest.mark.timeout(30)
async def test_a_long_grep_does_not_block_the_loop(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    line = "the quick brown fox jumps over the lazy dog " * 4 + "\n"
    for i in range(40):
        (root / f"f{i}.txt").write_text(line * 5000 + ("needle\n" if i % 10 == 0 else ""))  # 9 MB in all
    async with max_lag() as lag:
        out = await grep.call({"pattern": r"ne+dle|z{3}q|(o+x)+y$"}, ctx)
    assert out.splitlines() == [f"f{i}.txt:5001: needle" for i in (0, 10, 20, 30)]
    assert lag[0] < 0.5


async def test_grep_stops_at_its_time_limit_with_what_it_found(ctx: ToolContext,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root = ctx.workspace.root
    for i in range(6):
        (root / f"f{i}.txt").write_text("hit\n")
    clock = itertools.count(0.0, 7.0)  # every look at the clock: 7 s later
    monkeypatch.setattr(grepping, "GREP_TIME_S", 30.0)
    monkeypatch.setattr(grepping, "_clock", lambda: next(clock))
    out = await grep.call({"pattern": "hit"}, ctx)
    hits = [ln for ln in out.splitlines() if ln.endswith(": hit")]
    assert 1 <= len(hits) < 6
    assert out.endswith(
        f"[stopped after 30 s (the time limit of grep) with {len(hits)} of 6 files searched; narrow the path or "
        "the glob to search the rest]")


@pytest.mark.timeout(20)
async def test_cancelling_grep_stops_the_scan(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    root = ctx.workspace.root
    for i in range(400):
        (root / f"f{i:03}.txt").write_text("x\n")
    seen: list[str] = []
    real: Callable[..., Any] = grepping.search_fd

    def slow(fd: int, rel: str, *args: Any) -> Any:
        seen.append(rel)
        time.sleep(0.005)  # 400 files: 2 s in all
        return real(fd, rel, *args)

    monkeypatch.setattr(grepping, "search_fd", slow)
    task = asyncio.create_task(grep.call({"pattern": "y"}, ctx))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.1)
    stopped_at = len(seen)
    await asyncio.sleep(0.3)
    assert len(seen) == stopped_at < 400  # the scan stopped soon after the cancel, not at the end


async def test_patterns_re2_cannot_run_get_a_clear_error(ctx: ToolContext) -> None:
    cases = {
        r"(a)\1": "backreferences",
        r"foo(?=bar)": "lookahead",
        r"(?<!x)y": "lookbehind",
        r"a++": "possessive quantifiers",
        r"(?>ab)": "atomic groups",
    }
    for pattern, feature in cases.items():
        with pytest.raises(ToolError) as e:
            await grep.call({"pattern": pattern}, ctx)
        msg = str(e.value)
        assert msg.startswith(f"pattern {pattern!r} uses {feature}, which grep's regex engine (RE2) does not support")
        assert "call grep again" in msg
    with pytest.raises(ToolError, match=r"^pattern 'foo\(' is not a valid regular expression: missing \): foo\("):
        await grep.call({"pattern": "foo("}, ctx)


async def test_python_habits_keep_working(ctx: ToolContext) -> None:
    (ctx.workspace.root / "a.txt").write_bytes(b"alpha end\r\nbeta end\n\\Z literal\n")
    assert await grep.call({"pattern": r"end$"}, ctx) == "a.txt:1: alpha end\na.txt:2: beta end"  # CRLF too
    assert await grep.call({"pattern": r"end\Z"}, ctx) == "a.txt:1: alpha end\na.txt:2: beta end"
    assert await grep.call({"pattern": r"\Abeta"}, ctx) == "a.txt:2: beta end"
    assert await grep.call({"pattern": r"\\Z"}, ctx) == "a.txt:3: \\Z literal"
    assert await grep.call({"pattern": r"end\s+beta"}, ctx) == "No matches for 'end\\\\s+beta' in .; 1 files searched."
