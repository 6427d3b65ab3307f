"""``glob`` skips symlink loops and says so, and no glob pattern can hang it (issue #12, item 4).

Loops (``x -> y``, ``y -> x``) are skipped and named since the race-free walk (ed1953b); a
directory link back up (``a/loop -> ..``) is listed once and never entered.  What failed before this
change: the note named at most 10 loops and did not say how many more there were, and a pattern
such as ``*a*a*a*a*a*a*a*a*a*b`` (Python's backtracking ``re``) or ``{a,b}`` repeated 20 times
(brace expansion: a million patterns) ran for minutes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from subagents.models import AgentInfo
from subagents.tools.base import ToolContext
from subagents.tools.files import glob, grep
from subagents.tools.paths import Workspace


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(agent=AgentInfo("a", "a", "general-purpose"), workspace=Workspace(root))


@pytest.mark.timeout(20)
async def test_symlink_loops_are_skipped_and_named(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    (root / "a").mkdir()
    (root / "a" / "f.txt").write_text("x\n")
    (root / "top.txt").write_text("x\n")
    (root / "a" / "loop").symlink_to("..")
    (root / "x").symlink_to("y")
    (root / "y").symlink_to("x")
    assert await glob.call({"pattern": "**/*"}, ctx) == (
        "a/\na/f.txt\na/loop/\ntop.txt\n[skipped 2 symlink loop(s), links that never reach a file: x, y]")


@pytest.mark.timeout(20)
async def test_the_note_is_capped_and_counts_the_rest(ctx: ToolContext) -> None:
    root = ctx.workspace.root
    (root / "real.txt").write_text("x\n")
    for i in range(15):
        (root / f"l{i:02}").symlink_to(f"l{i:02}")
    names = ", ".join(f"l{i:02}" for i in range(10))
    assert await glob.call({"pattern": "*"}, ctx) == (
        f"real.txt\n[skipped 15 symlink loop(s), links that never reach a file: {names} and 5 more]")


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern", ["*a*a*a*a*a*a*a*a*a*a*a*b", "**/**/**/**/**/**/**/**/z", "{a,b}" * 20])
async def test_no_glob_pattern_hangs(ctx: ToolContext, pattern: str) -> None:
    root = ctx.workspace.root
    deep = root.joinpath(*["a"] * 30)
    deep.mkdir(parents=True)
    (deep / ("a" * 200)).write_text("a\n")
    t0 = time.perf_counter()
    assert (await glob.call({"pattern": pattern}, ctx)).startswith("No paths match")
    assert (await grep.call({"pattern": "a", "glob": pattern}, ctx)).startswith("No matches")
    assert time.perf_counter() - t0 < 2.0
