"""The block-wise RE2 search behind ``grep``: line numbers, line ends and blocks, whatever the sizes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from subagents.tools import grepping
from subagents.tools.base import ToolContext
from subagents.tools.files import grep
from subagents.tools.globbing import expand_braces, glob_regex


async def call(ctx: ToolContext, **args: object) -> str:
    return await grep.call(dict(args), ctx)


def expected(text: str, pattern: str, rel: str = "f.txt") -> list[str]:
    """What a line-by-line Python ``re`` search gives (the old grep, for patterns both engines read alike)."""
    rx = re.compile(pattern)
    return [f"{rel}:{n}: {ln}" for n, ln in enumerate(text.splitlines(), 1) if rx.search(ln)]


@pytest.mark.parametrize("block", [8192, 8200, 1 << 20])
async def test_line_numbers_across_blocks(ctx: ToolContext, ws_root: Path, block: int,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grepping, "BLOCK", block)
    text = "".join(f"{'hit' if i % 37 == 0 else 'miss'} line {i} {'x' * (i % 50)}\r\n"[: 10 + i % 70] + "\n"
                   for i in range(3000))
    (ws_root / "f.txt").write_text(text, newline="")
    monkeypatch.setattr(grepping, "GREP_LIMIT", 10_000)
    for pattern in ("hit", r"^hit line \d+7 ", r"x$", r"^$", r"3\b"):
        want = expected(text, pattern)
        assert len(want) > 5
        assert (await call(ctx, pattern=pattern)).splitlines() == want


async def test_line_ends_and_edges(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "f.txt").write_bytes(b"one\rtwo\r\nthree\n\nlast without end")
    assert await call(ctx, pattern="t") == "f.txt:2: two\nf.txt:3: three\nf.txt:5: last without end"
    assert await call(ctx, pattern="^$") == "f.txt:4: "
    assert await call(ctx, pattern="end$") == "f.txt:5: last without end"
    assert (await call(ctx, pattern="")).splitlines() == [
        "f.txt:1: one", "f.txt:2: two", "f.txt:3: three", "f.txt:4: ", "f.txt:5: last without end"]
    (ws_root / "f.txt").write_bytes(b"caf\xc3\xa9 \xff bad byte\n")
    assert await call(ctx, pattern="café") == "f.txt:1: café \ufffd bad byte"
    (ws_root / "f.txt").write_text("")
    assert await call(ctx, pattern="") == "No matches for '' in .; 1 files searched."


async def test_long_lines(ctx: ToolContext, ws_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grepping, "BLOCK", 8192)
    monkeypatch.setattr(grepping, "LONG_LINE", 50_000)
    (ws_root / "f.txt").write_text("a" * 20_000 + "needle\n" + "b" * 120_000 + "\nneedle\n")
    assert await call(ctx, pattern="needle$") == (
        "f.txt:1: " + "a" * 500 + " [...]\nf.txt:3: needle")


def test_globs_with_many_alternatives() -> None:
    assert bool(glob_regex("{a,b}" * 40).fullmatch("ab" * 20))
    assert expand_braces("{a,b}.{x,y}") == ["a.x", "a.y", "b.x", "b.y"]
    with pytest.raises(ValueError, match="more than 1000"):
        expand_braces("{a,b}" * 11)
