"""Check-then-use races: a path swapped in a tight loop while the file tools work on it, 0 escapes allowed.

The classic attack on "resolve the path, check it is inside, then open it": between the check and the
open, a directory on the way (or the file itself) becomes a symlink to somewhere outside.  Here two
processes swap the path as fast as they can while a tool is called :data:`TRIES` times on it:

- *component*: ``ws/d`` (a real directory) and ``ws/d_alt`` (a symlink to a directory outside) trade
  places atomically (``renameat2(RENAME_EXCHANGE)``); the tool works on ``d/<file>``;
- *leaf*: ``ws/leaf`` is a regular file, then a symlink to a file outside, then a file again...;
- *fifo*: ``ws/p`` is a regular file, then a FIFO, then a file again: a tool that checks "regular file"
  and then opens blocks forever in ``open()`` when it loses the race.

The tools are called directly (``await tool.call(args, ctx)``) with the ``Workspace`` and sandbox a
``Runtime`` over the workspace builds, because 2,000 runs through the runtime would be slow.  Each test
also requires some calls to succeed, so a tool that refuses everything cannot pass by accident.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.exceptions import ToolError
from subagents.models import AgentInfo, FunctionModel
from subagents.tools.base import Tool, ToolContext
from subagents.tools.files import edit_file, grep, list_dir, read_file, write_file

from .conftest import Outside
from .kit import Unjammer, diff, renameat2_available, swapping

TRIES = 2000
MIN_SUCCESSES = 20
"""Calls that must succeed (the path was inside at that moment) for a test to count."""
CALL_TIMEOUT_S = 3.0
WORKERS = 2
"""Calls in flight at once (the writes wait on fsync; two keep the machine busy)."""


@pytest.fixture
async def ctx(ws: Path) -> AsyncIterator[ToolContext]:
    """A tool context over the workspace, with the Workspace and sandbox a real Runtime builds."""
    async with Runtime(FunctionModel(lambda req: "unused"), workdir=ws, permission_mode="yolo") as rt:
        yield ToolContext(agent=AgentInfo("racer", "racer", "general-purpose"), workspace=rt.workspace,
                          sandbox=rt.manager.sandbox)


@dataclass
class Tally:
    ok: int = 0
    refused: int = 0
    escapes: list[str] = field(default_factory=list)
    hung: asyncio.Future[Any] | None = None
    seconds: float = 0.0

    def __str__(self) -> str:
        return (f"{self.ok} succeeded, {self.refused} refused, {len(self.escapes)} escaped in {self.seconds:.1f} s"
                + (f"; first escape: {self.escapes[0][:300]!r}" if self.escapes else ""))


async def hammer(tool: Tool, args: dict[str, Any], ctx: ToolContext, leaked: Callable[[str], bool]) -> Tally:
    """Call ``tool`` :data:`TRIES` times, :data:`WORKERS` calls in flight; stop at a call that does not return."""
    t = Tally()
    t0 = time.monotonic()

    async def worker(n: int) -> None:
        for _ in range(n):
            if t.hung is not None:
                return
            task = asyncio.ensure_future(tool.call(dict(args), ctx))
            done, _ = await asyncio.wait({task}, timeout=CALL_TIMEOUT_S)
            if not done:
                t.hung = task
                return
            try:
                out = task.result()
            except (ToolError, OSError):
                t.refused += 1
                continue
            t.ok += 1
            if leaked(out):
                t.escapes.append(out)

    await asyncio.gather(*(worker(TRIES // WORKERS) for _ in range(WORKERS)))
    t.seconds = time.monotonic() - t0
    return t


@pytest.fixture
def component(ws: Path, outside: Outside) -> Path:
    """``ws/d`` (inside) and ``ws/d_alt`` (a symlink to the outside dir) with the same file names."""
    assert renameat2_available(), "the race tests need renameat2 (glibc 2.28+)"
    d = ws / "d"
    d.mkdir()
    (d / "secret.txt").write_text("nothing to see inside\n")
    (d / "target.txt").write_text("inside\n")
    (d / "e.txt").write_text("token\n")
    (outside.root / "e.txt").write_text("token\n")
    os.symlink(outside.root, ws / "d_alt")
    return d


CASES = {
    "read_file": (read_file, {"path": "d/secret.txt"}),
    "list_dir": (list_dir, {"path": "d"}),
    "grep": (grep, {"pattern": "OUTSIDEMARK", "path": "d"}),
    "write_file": (write_file, {"path": "d/target.txt", "content": "ESCAPED\n"}),
    "edit_file": (edit_file, {"path": "d/e.txt", "old_string": "token", "new_string": "token+"}),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_directory_swapped_for_a_symlink(name: str, ws: Path, component: Path, outside: Outside,
                                               ctx: ToolContext) -> None:
    tool, args = CASES[name]
    before = outside.snapshot()
    with swapping("exchange", ws / "d", ws / "d_alt"):
        t = await hammer(tool, args, ctx, lambda out: outside.secret in out or outside.entry in out)
    assert t.hung is None, f"{name} hung: {t}"
    assert not t.escapes, f"{name} read outside the workspace: {t}"
    assert outside.snapshot() == before, f"{name} changed files outside: {t}\n{diff(before, outside.snapshot())}"
    assert t.ok >= MIN_SUCCESSES, f"{name} hardly ever worked on the directory inside, so nothing was tested: {t}"


LEAF_CASES = {
    "read_file": (read_file, {"path": "leaf"}, "secret.txt"),
    "write_file": (write_file, {"path": "leaf", "content": "ESCAPED\n"}, "target.txt"),
    "edit_file": (edit_file, {"path": "leaf", "old_string": "token", "new_string": "token+"}, "e.txt"),
}


@pytest.mark.parametrize("name", list(LEAF_CASES))
async def test_file_swapped_for_a_symlink(name: str, ws: Path, outside: Outside, ctx: ToolContext) -> None:
    tool, args, target = LEAF_CASES[name]
    (outside.root / "e.txt").write_text("token\n")
    (ws / "leaf").write_text("token inside\n")
    before = outside.snapshot()
    with swapping("symlink", ws / "leaf", outside.root / target):
        t = await hammer(tool, args, ctx, lambda out: outside.secret in out)
    assert t.hung is None, f"{name} hung: {t}"
    assert not t.escapes, f"{name} read outside the workspace: {t}"
    assert outside.snapshot() == before, f"{name} changed files outside: {t}\n{diff(before, outside.snapshot())}"
    assert t.ok >= MIN_SUCCESSES, f"{name} hardly ever worked on the file, so nothing was tested: {t}"


FIFO_CASES = {
    "read_file": (read_file, {"path": "p"}),
    "edit_file": (edit_file, {"path": "p", "old_string": "token", "new_string": "token+"}),
    "grep-file": (grep, {"pattern": "token", "path": "p"}),
    "grep-dir": (grep, {"pattern": "token", "path": "fifo_dir"}),
}


@pytest.mark.parametrize("name", list(FIFO_CASES))
async def test_file_swapped_for_a_fifo_never_hangs(name: str, ws: Path, tmp_path: Path, ctx: ToolContext) -> None:
    tool, args = FIFO_CASES[name]
    keep = tmp_path / "keep.fifo"  # every FIFO put in place is a hard link of this one, so it can be unjammed
    os.mkfifo(keep)
    p = ws / "fifo_dir" / "p" if name == "grep-dir" else ws / "p"
    p.parent.mkdir(exist_ok=True)
    p.write_text("token inside\n")
    with swapping("fifo", p, keep):
        t = await hammer(tool, args, ctx, lambda out: False)
    if t.hung is not None:
        with Unjammer(fifos=[keep], after=0), contextlib.suppress(Exception):
            await asyncio.wait_for(t.hung, 5)
        pytest.fail(f"{name} blocked for {CALL_TIMEOUT_S} s on a file swapped for a FIFO, after {t}")
    assert t.ok >= MIN_SUCCESSES, f"{name} hardly ever worked on the regular file, so nothing was tested: {t}"
