"""A directory tree made very deep (a hostile project, or an agent's ``mkdir`` loop): the walks of ``glob``,
``grep`` and ``repo_map`` held every level's path, each longer than the last, so memory grew as the square of the
depth (20,000 nested ``a/``: ~400 MB; 100,000: ~10 GB).  They now stop at ``tree.MAX_DEPTH`` levels or
``tree.MAX_PATH`` characters and say which directories they did not enter."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.sandbox import tree
from subagents.tools.base import ToolContext
from subagents.tools.files import glob, grep

from .test_files import call


def nest(top: Path, depth: int, name: str = "a") -> str:
    """``depth`` nested directories ``name`` under ``top``, with ``f.txt`` holding ``needle`` in each (made by
    descriptor: the path soon passes PATH_MAX); the path of the deepest one, relative to ``top``."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
            f = os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(f, b"needle\n")
            os.close(f)
    finally:
        os.close(fd)
    return "/".join([name] * depth)


def remove(tree_top: Path, spare: Path) -> None:
    """Remove the tree at ``tree_top``, moving each directory up to ``spare`` first (``shutil.rmtree`` and pytest's
    own clean-up go a level deeper per directory: past the recursion or descriptor limit, or PATH_MAX, they fail)."""
    queue, n = [tree_top], 0
    while queue:
        d = queue.pop()
        for e in os.listdir(d):
            if (d / e).is_dir() and not (d / e).is_symlink():
                n += 1
                os.rename(d / e, spare / f".flat{n}")
                queue.append(spare / f".flat{n}")
            else:
                os.unlink(d / e)
        os.rmdir(d)


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path) -> Iterator[None]:
    yield
    for top in (tmp_path / "a", tmp_path / "d", tmp_path / ("n" * 200), tmp_path / "ws" / "a", tmp_path / "ws" / "b"):
        if top.is_dir():
            remove(top, tmp_path)


def walked(top: Path) -> list[tuple[str, str]]:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return list(tree.walk(fd, hidden=lambda p: False, follow=lambda p: tree.MISSING))
    finally:
        os.close(fd)


def test_a_walk_enters_no_more_than_max_depth_levels(tmp_path: Path) -> None:
    nest(tmp_path, tree.MAX_DEPTH + 50, "d")
    seen = walked(tmp_path)
    deep = [p for p, k in seen if k == tree.DEEP]
    assert deep == ["d/" * tree.MAX_DEPTH]  # reported once, where the walk stopped
    assert max(p.count("/") for p, k in seen if k == tree.FILE) == tree.MAX_DEPTH
    files = [p for p, k in seen if k == tree.FILE]
    assert len(files) == tree.MAX_DEPTH  # every level down to the cut, the last one's files included


def test_a_walk_enters_no_path_longer_than_max_path(tmp_path: Path) -> None:
    name = "n" * 200
    nest(tmp_path, 120, name)  # 120 levels, 24,000 characters
    seen = walked(tmp_path)
    longest = max(len(p) for p, k in seen if k == tree.DIR)
    assert longest <= tree.MAX_PATH + 2 * (len(name) + 1)  # entered below the bound, its subdirectories listed
    assert [k for _, k in seen].count(tree.DEEP) == 1


def peak_mib(fn: Any, *args: Any) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        out = fn(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, peak / 2**20


def test_a_very_deep_tree_costs_glob_little_memory(ctx: ToolContext, ws_root: Path) -> None:
    nest(ws_root, 6000)
    out, mib = peak_mib(lambda: glob.fn(ctx, pattern="**/f.txt"))
    assert mib < 25, mib  # (the whole walk: ~110 MiB)
    below = f"{'a/' * 40}...{'a/' * 40} (2,048 characters)"
    assert out.endswith(f"[the directories below {below} were not listed: deeper than "
                        f"{tree.MAX_DEPTH:,} levels or {tree.MAX_PATH:,} characters; pass a path inside them to go "
                        "on]"), out[-300:]


async def test_grep_says_which_directories_it_did_not_search(ctx: ToolContext, ws_root: Path) -> None:
    nest(ws_root, tree.MAX_DEPTH + 3)
    (ws_root / "b").mkdir()
    nest(ws_root / "b", tree.MAX_DEPTH + 1)
    out = await call(grep, ctx, pattern="needle")
    below = f"{'a/' * 40}...{'a/' * 40} (2,048 characters)"
    assert out.endswith(f"[the directories below {below} and 1 more were not searched: deeper "
                        f"than {tree.MAX_DEPTH:,} levels or {tree.MAX_PATH:,} characters; pass a path inside them "
                        "to go on]"), out[-300:]
    assert out.count(": needle") == 500  # (grep's limit: the note comes after its own)
    quiet = await call(grep, ctx, pattern="nowhere", path="b")
    assert quiet.startswith("No matches for 'nowhere' in b; 1024 files searched.\n[the directories below b/"), quiet
