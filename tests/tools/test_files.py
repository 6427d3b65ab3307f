"""The file tools on a real workspace in ``tmp_path``: behaviour, messages and path confinement."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ToolError
from subagents.tools import files, grepping
from subagents.tools.base import FunctionTool, ToolCategory, ToolContext
from subagents.tools.files import edit_file, glob, grep, list_dir, read_file, write_file

pytestmark = pytest.mark.usefixtures("fs_mode")


async def call(t: FunctionTool, ctx: ToolContext, **arguments: Any) -> str:
    return await t.call(arguments, ctx)


async def error(t: FunctionTool, ctx: ToolContext, **arguments: Any) -> str:
    with pytest.raises(ToolError) as info:
        await t.call(arguments, ctx)
    return str(info.value)


def test_categories() -> None:
    assert [t.category for t in (read_file, list_dir, glob, grep)] == [ToolCategory.READ] * 4
    assert [t.category for t in (write_file, edit_file)] == [ToolCategory.EDIT] * 2
    assert read_file.parameters["required"] == ["path"]
    assert edit_file.parameters["properties"]["replace_all"] == {
        "type": "boolean",
        "description": "replace every occurrence instead of requiring exactly one.",
        "default": False,
    }


# --- read_file ----------------------------------------------------------------------------------


async def test_read_file_numbers_lines(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "a.txt").write_text("alpha\nbeta\r\ngamma")
    assert await call(read_file, ctx, path="a.txt") == "     1\talpha\n     2\tbeta\n     3\tgamma"


async def test_read_file_offset_limit_and_more_remaining(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await call(read_file, ctx, path="n.txt", offset=3, limit=2)
    assert out == (
        "     3\tline 3\n     4\tline 4\n\n"
        "[lines 3-4 of 10 shown; 6 more lines. Call read_file with offset=5 to read on.]"
    )
    assert (await call(read_file, ctx, path="n.txt", offset=9)).splitlines() == ["     9\tline 9", "    10\tline 10"]


async def test_read_file_default_limit_is_2000_lines(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "big.txt").write_text("x\n" * 2500)
    out = await call(read_file, ctx, path="big.txt")
    assert out.count("\tx") == 2000
    assert out.endswith("[lines 1-2,000 of 2,500 shown; 500 more lines. Call read_file with offset=2001 to read on.]")


async def test_read_file_stops_early_on_huge_output(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "wide.txt").write_text(("y" * 1000 + "\n") * 200)
    out = await call(read_file, ctx, path="wide.txt")
    assert len(out) < 50_000
    assert "(stopped early to keep the output small)" in out
    assert "Call read_file with offset=" in out


async def test_read_file_cuts_very_long_lines(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "long.txt").write_text("z" * 5000)
    out = await call(read_file, ctx, path="long.txt")
    assert out == "     1\t" + "z" * 2000 + " [... line cut at 2,000 characters]"


async def test_read_file_errors(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "d").mkdir()
    (ws_root / "bin.dat").write_bytes(b"\x89PNG\x00\x01\x02")
    (ws_root / "three.txt").write_text("1\n2\n3\n")
    (ws_root / "empty.txt").write_text("")
    assert await error(read_file, ctx, path="d") == (
        "'d' is a directory, not a file; use list_dir to see what it contains."
    )
    assert await error(read_file, ctx, path="bin.dat") == (
        "'bin.dat' looks like a binary file (it contains NUL bytes), so it was not read; the file tools handle "
        "text only (use bash, e.g. `file` or `xxd | head`, to inspect it)."
    )
    assert await error(read_file, ctx, path="nope.txt") == (
        "File 'nope.txt' does not exist; check the path (list_dir or glob can find it)."
    )
    assert await error(read_file, ctx, path="three.txt", offset=7) == (
        "offset 7 is past the end of three.txt, which has 3 lines; use an offset from 1 to 3."
    )
    assert await error(read_file, ctx, path="three.txt", offset=0) == (
        "offset must be 1 or more (the first line is line 1), got 0."
    )
    assert await error(read_file, ctx, path="three.txt", limit=0) == "limit must be 1 or more, got 0."
    assert await call(read_file, ctx, path="empty.txt") == "empty.txt is empty (0 lines)."


# --- confinement --------------------------------------------------------------------------------


def outside_msg(raw: str, real: Path, root: Path) -> str:
    return f"path {raw!r} resolves to {real}, outside the workspace {root}; use a path inside the workspace"


async def test_dotdot_is_refused(ctx: ToolContext, ws_root: Path) -> None:
    secret = ws_root.parent / "secret.txt"
    secret.write_text("top secret\n")
    assert await error(read_file, ctx, path="../secret.txt") == outside_msg("../secret.txt", secret, ws_root)
    assert await error(write_file, ctx, path="sub/../../x.txt", content="x") == outside_msg(
        "sub/../../x.txt", ws_root.parent / "x.txt", ws_root
    )
    assert not (ws_root.parent / "x.txt").exists()


async def test_absolute_paths(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "in.txt").write_text("inside\n")
    assert await call(read_file, ctx, path=str(ws_root / "in.txt")) == "     1\tinside"
    assert await error(read_file, ctx, path="/etc/passwd") == outside_msg("/etc/passwd", Path("/etc/passwd"), ws_root)
    assert await error(list_dir, ctx, path="/") == outside_msg("/", Path("/"), ws_root)
    assert await error(grep, ctx, pattern="root", path="/etc") == outside_msg("/etc", Path("/etc"), ws_root)


async def test_symlink_out_is_refused(ctx: ToolContext, ws_root: Path) -> None:
    outside = ws_root.parent / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text("outside data\n")
    (ws_root / "link").symlink_to(outside)
    (ws_root / "file_link").symlink_to(outside / "data.txt")
    assert await error(read_file, ctx, path="link/data.txt") == outside_msg(
        "link/data.txt", outside / "data.txt", ws_root
    )
    assert await error(read_file, ctx, path="file_link") == outside_msg("file_link", outside / "data.txt", ws_root)
    assert await error(edit_file, ctx, path="file_link", old_string="outside", new_string="x") == outside_msg(
        "file_link", outside / "data.txt", ws_root
    )
    assert await error(list_dir, ctx, path="link") == outside_msg("link", outside, ws_root)
    assert (outside / "data.txt").read_text() == "outside data\n"
    # Searches do not follow links out either.
    assert await call(grep, ctx, pattern="outside") == "No matches for 'outside' in .; 0 files searched."
    assert await error(glob, ctx, pattern="link/*.txt") == outside_msg(str(ws_root / "link"), outside, ws_root)
    assert await call(glob, ctx, pattern="**/*.txt") == "No paths match '**/*.txt' in .."


async def test_dangling_symlink_to_outside_is_refused(ctx: ToolContext, ws_root: Path) -> None:
    target = ws_root.parent / "not-yet.txt"
    (ws_root / "trap").symlink_to(target)
    assert await error(write_file, ctx, path="trap", content="pwned") == outside_msg("trap", target, ws_root)
    assert not target.exists()
    (ws_root / "trapdir").symlink_to(ws_root.parent / "newdir")
    assert await error(write_file, ctx, path="trapdir/f.txt", content="x") == outside_msg(
        "trapdir/f.txt", ws_root.parent / "newdir" / "f.txt", ws_root
    )
    assert not (ws_root.parent / "newdir").exists()


async def test_symlink_inside_is_followed(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "real.txt").write_text("real\n")
    (ws_root / "alias.txt").symlink_to(ws_root / "real.txt")
    assert await call(read_file, ctx, path="alias.txt") == "     1\treal"


# --- write_file ---------------------------------------------------------------------------------


async def test_write_file_creates_parents_and_reports(ctx: ToolContext, ws_root: Path) -> None:
    assert await call(write_file, ctx, path="a/b/c.txt", content="one\ntwo\n") == (
        "Created a/b/c.txt: wrote 8 bytes (2 lines)."
    )
    assert (ws_root / "a/b/c.txt").read_text() == "one\ntwo\n"
    assert await call(write_file, ctx, path="a/b/c.txt", content="héllo") == (
        "Overwrote a/b/c.txt: wrote 6 bytes (1 lines)."
    )
    assert (ws_root / "a/b/c.txt").read_bytes() == "héllo".encode()


async def test_write_file_keeps_crlf_and_refuses_directories(ctx: ToolContext, ws_root: Path) -> None:
    await call(write_file, ctx, path="w.txt", content="a\r\nb\r\n")
    assert (ws_root / "w.txt").read_bytes() == b"a\r\nb\r\n"
    (ws_root / "dir").mkdir()
    assert await error(write_file, ctx, path="dir", content="x") == (
        "'dir' is a directory; pass the path of a file to write."
    )


async def test_write_file_under_a_file_is_a_tool_error(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "plain").write_text("x")
    msg = await error(write_file, ctx, path="plain/child.txt", content="x")
    assert msg.startswith("Could not write 'plain/child.txt': ")
    assert msg.endswith(". Check that the path is a writable file.")


# --- edit_file ----------------------------------------------------------------------------------


async def test_edit_file_replaces_one_occurrence(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "e.py").write_text("a = 1\nb = 2\nc = 3\n")
    out = await call(edit_file, ctx, path="e.py", old_string="b = 2", new_string="b = 20")
    assert (ws_root / "e.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    assert out == (
        "Edited e.py: replaced 1 occurrence. Lines 1-3 now read:\n     1\ta = 1\n     2\tb = 20\n     3\tc = 3"
    )


async def test_edit_file_absent(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "e.py").write_text("x = 1\n")
    assert await error(edit_file, ctx, path="e.py", old_string="y = 1", new_string="y = 2") == (
        "old_string was not found in e.py; read the file and copy the exact text to replace, "
        "including whitespace and indentation."
    )
    assert (ws_root / "e.py").read_text() == "x = 1\n"


async def test_edit_file_ambiguous_then_replace_all(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "e.py").write_text("x = 1\nx = 1\nx = 1\n")
    assert await error(edit_file, ctx, path="e.py", old_string="x = 1", new_string="x = 2") == (
        "old_string occurs 3 times in e.py; add surrounding lines to old_string so it matches exactly one place, "
        "or set replace_all=true to replace every occurrence."
    )
    assert (ws_root / "e.py").read_text() == "x = 1\nx = 1\nx = 1\n"
    out = await call(edit_file, ctx, path="e.py", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert out.startswith("Edited e.py: replaced 3 occurrences.")
    assert (ws_root / "e.py").read_text() == "x = 2\nx = 2\nx = 2\n"


async def test_edit_file_other_errors(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "e.py").write_text("x\n")
    assert await error(edit_file, ctx, path="e.py", old_string="", new_string="y") == (
        "old_string is empty; pass the exact text to replace (use write_file to create a file)."
    )
    assert await error(edit_file, ctx, path="e.py", old_string="x", new_string="x") == (
        "old_string and new_string are the same, so there is nothing to change."
    )
    assert await error(edit_file, ctx, path="missing.py", old_string="x", new_string="y") == (
        "File 'missing.py' does not exist; check the path (list_dir or glob can find it)."
    )


async def test_edit_file_crlf_file_with_lf_old_string(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(edit_file, ctx, path="w.txt", old_string="one\ntwo", new_string="1\n2")
    assert (ws_root / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# --- list_dir -----------------------------------------------------------------------------------


async def test_list_dir_sorted_with_dirs_marked(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "b.txt").write_text("")
    (ws_root / "a").mkdir()
    (ws_root / "a" / "inner.txt").write_text("")
    (ws_root / ".hidden").write_text("")
    assert await call(list_dir, ctx) == ".hidden\na/\nb.txt"
    assert await call(list_dir, ctx, path="a") == "inner.txt"
    (ws_root / "empty").mkdir()
    assert await call(list_dir, ctx, path="empty") == "empty is empty."
    assert await error(list_dir, ctx, path="b.txt") == "'b.txt' is a file, not a directory; use read_file to read it."
    assert await error(list_dir, ctx, path="zzz") == (
        "Directory 'zzz' does not exist; check the path (list the parent directory)."
    )


async def test_list_dir_is_capped(ctx: ToolContext, ws_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "LIST_LIMIT", 3)
    for i in range(5):
        (ws_root / f"f{i}").write_text("")
    assert await call(list_dir, ctx) == (
        "f0\nf1\nf2\n[... 2 more entries not shown; use glob with a pattern to narrow the listing ...]"
    )


# --- glob ---------------------------------------------------------------------------------------


@pytest.fixture
def tree(ws_root: Path) -> Path:
    for rel in ("top.py", "README.md", "src/pkg/mod.py", "src/pkg/deep/x.py", "src/pkg/data.json", ".git/config.py"):
        p = ws_root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {rel}\nneedle in {rel}\n")
    return ws_root


async def test_glob_recursive_and_relative_to_root(ctx: ToolContext, tree: Path) -> None:
    assert await call(glob, ctx, pattern="**/*.py") == "src/pkg/deep/x.py\nsrc/pkg/mod.py\ntop.py"
    assert await call(glob, ctx, pattern="*.py") == "top.py"
    assert await call(glob, ctx, pattern="*.py", path="src/pkg") == "src/pkg/mod.py"
    assert await call(glob, ctx, pattern="src/**/*.{py,json}") == (
        "src/pkg/data.json\nsrc/pkg/deep/x.py\nsrc/pkg/mod.py"
    )
    assert await call(glob, ctx, pattern="src/*") == "src/pkg/"
    assert await call(glob, ctx, pattern="**/d?ep") == "src/pkg/deep/"
    assert await call(glob, ctx, pattern="**/*.rs") == "No paths match '**/*.rs' in .."


async def test_glob_errors_and_cap(ctx: ToolContext, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert await error(glob, ctx, pattern="/etc/*") == (
        "pattern '/etc/*' is absolute; pass the directory as path and a relative pattern."
    )
    assert await error(glob, ctx, pattern="../*") == (
        "pattern '../*' contains '..'; pass the directory to search as path instead."
    )
    assert await error(glob, ctx, pattern=" ") == "pattern is empty; pass a glob such as '**/*.py'."
    assert await error(glob, ctx, pattern="*", path="top.py") == (
        "path 'top.py' is not a directory; pass the directory to search from."
    )
    monkeypatch.setattr(files, "GLOB_LIMIT", 2)
    assert await call(glob, ctx, pattern="**/*.py") == (
        "src/pkg/deep/x.py\nsrc/pkg/mod.py\n[... 1 more matches not shown; narrow the pattern or the path ...]"
    )


# --- grep ---------------------------------------------------------------------------------------


async def test_grep_finds_lines_and_skips_git(ctx: ToolContext, tree: Path) -> None:
    out = await call(grep, ctx, pattern=r"needle in \w+\.py")
    assert out == "top.py:2: needle in top.py"
    out = await call(grep, ctx, pattern="needle")
    assert out.splitlines() == [
        "README.md:2: needle in README.md",
        "src/pkg/data.json:2: needle in src/pkg/data.json",
        "src/pkg/deep/x.py:2: needle in src/pkg/deep/x.py",
        "src/pkg/mod.py:2: needle in src/pkg/mod.py",
        "top.py:2: needle in top.py",
    ]


async def test_grep_with_file_filter(ctx: ToolContext, tree: Path) -> None:
    assert (await call(grep, ctx, pattern="needle", glob="*.py")).splitlines() == [
        "src/pkg/deep/x.py:2: needle in src/pkg/deep/x.py",
        "src/pkg/mod.py:2: needle in src/pkg/mod.py",
        "top.py:2: needle in top.py",
    ]
    assert await call(grep, ctx, pattern="needle", path="src", glob="pkg/*.json") == (
        "src/pkg/data.json:2: needle in src/pkg/data.json"
    )
    assert await call(grep, ctx, pattern="needle", path="src/pkg/mod.py") == (
        "src/pkg/mod.py:2: needle in src/pkg/mod.py"
    )
    assert await call(grep, ctx, pattern="needle", glob="*.rs") == (
        "No matches for 'needle' in . (files matching '*.rs'); 0 files searched."
    )


async def test_grep_skips_binary_files(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "blob.bin").write_bytes(b"needle\x00\x01")
    (ws_root / "text.txt").write_text("needle\n")
    assert await call(grep, ctx, pattern="needle") == "text.txt:1: needle"


async def test_grep_bad_regex(ctx: ToolContext, ws_root: Path) -> None:
    assert await error(grep, ctx, pattern="foo(") == (
        "pattern 'foo(' is not a valid regular expression: missing ): foo(. Fix the pattern and call grep again "
        "(grep uses RE2 syntax, which is Python's re syntax without backreferences and lookaround)."
    )


async def test_grep_missing_path_and_cap(ctx: ToolContext, ws_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert await error(grep, ctx, pattern="x", path="nowhere") == (
        "path 'nowhere' does not exist; pass an existing file or directory to search."
    )
    monkeypatch.setattr(grepping, "GREP_LIMIT", 3)
    (ws_root / "many.txt").write_text("hit\n" * 10)
    assert await call(grep, ctx, pattern="hit") == (
        "many.txt:1: hit\nmany.txt:2: hit\nmany.txt:3: hit\n"
        "[... stopped after 3 matching lines; narrow the pattern, path or glob to see the rest ...]"
    )


def test_tools_run_in_a_worker_thread() -> None:
    # Blocking file I/O must not block the event loop: sync FunctionTools run in daemon worker threads.
    for t in (read_file, write_file, edit_file, list_dir, glob, grep):
        assert not t.inline
        assert not t._async


def test_symlink_fixture_sanity(ws_root: Path) -> None:
    assert os.path.realpath(ws_root) == str(ws_root)
