"""The file and workspace tools under hostile files and arguments: bounded memory and time, line ends and
bytes kept, and every failure a tool error for the model (never a crash of the run)."""

from __future__ import annotations

import asyncio
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from subagents.exceptions import ToolError
from subagents.messages import ToolUseBlock
from subagents.models.base import AgentInfo
from subagents.sandbox.policy import SandboxPolicy
from subagents.tools import files, textio
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.files import edit_file, read_file, write_file
from subagents.tools.paths import Workspace
from subagents.tools.repo_map import repo_map
from subagents.tools.skills import SkillTool
from subagents.tools.todo import todo_write

from .test_files import call, error

HEAD = b"hello\n" * 2000  # 12 kB of text: past the 8 kB that are sniffed for NUL bytes


def peak_mib(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``fn``'s result and the peak of Python memory it allocated, in MiB."""
    tracemalloc.start()
    try:
        out = fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, peak / 2**20


def read_sync(ctx: ToolContext, **arguments: Any) -> str:
    out: str = read_file.fn(ctx, **arguments)
    return out


# --- read_file: a huge line, a huge file ---------------------------------------------------------


def test_read_file_never_holds_a_huge_line_whole(ctx: ToolContext, ws_root: Path) -> None:
    with open(ws_root / "sparse.log", "wb") as f:  # text, then 48 MB of NULs without a line end
        f.write(HEAD)
        f.truncate(len(HEAD) + 48 * 2**20)
    out, peak = peak_mib(read_file.fn, ctx, path="sparse.log", limit=2)
    assert peak < 8
    assert out.startswith("     1\thello\n     2\thello\n\n[lines 1-2 of 2,001 shown")


def test_read_file_cuts_a_huge_line_it_shows(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "min.js").write_bytes(HEAD + b"x" * (24 * 2**20) + b"\nend\n")
    out, peak = peak_mib(read_file.fn, ctx, path="min.js", offset=2001)
    assert peak < 8
    assert out == (f"  2001\t{'x' * 2000} [... line cut at 2,000 characters]\n  2002\tend")


def test_read_file_stops_counting_lines_of_a_huge_file(ctx: ToolContext, ws_root: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "COUNT_CHARS", 1000, raising=False)
    (ws_root / "big.log").write_bytes(HEAD)
    out = read_sync(ctx, path="big.log", limit=1)
    assert out == ("     1\thello\n\n[lines 1-1 shown; more lines follow (big.log is 12,000 bytes, too large to "
                   "count its lines). Call read_file with offset=2 to read on.]")


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64])
@pytest.mark.parametrize(("offset", "limit"), [(1, 2000), (2, 2), (4, 1), (6, 3)])
def test_read_file_lines_do_not_depend_on_blocks(ctx: ToolContext, ws_root: Path, monkeypatch: pytest.MonkeyPatch,
                                                 block: int, offset: int, limit: int) -> None:
    monkeypatch.setattr(textio, "BLOCK_CHARS", block, raising=False)
    (ws_root / "m.txt").write_bytes("a\r\nbé\rc\n\nxxxxxxxxx\r\nlast".encode())
    lines = ["a", "bé", "c", "", "xxxxxxxxx", "last"]
    shown = lines[offset - 1 : offset - 1 + limit]
    want = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(shown, offset))
    if offset - 1 + len(shown) < 6:
        last = offset + len(shown) - 1
        want += (f"\n\n[lines {offset}-{last} of 6 shown; {6 - last} more lines. "
                 f"Call read_file with offset={last + 1} to read on.]")
    assert read_sync(ctx, path="m.txt", offset=offset, limit=limit) == want


# --- edit_file: size, line ends, what the result shows -------------------------------------------


async def test_edit_file_refuses_a_file_too_large_to_hold(ctx: ToolContext, ws_root: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "EDIT_MAX_BYTES", 10_000, raising=False)
    (ws_root / "big.txt").write_bytes(HEAD)
    msg = await error(edit_file, ctx, path="big.txt", old_string="hello\nhello", new_string="bye", replace_all=True)
    assert msg.startswith("big.txt is 12,000 bytes, more than edit_file takes (10,000 bytes), so it was not changed")
    assert (ws_root / "big.txt").read_bytes() == HEAD


async def test_edit_file_keeps_crlf_when_new_string_has_lf(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    await call(edit_file, ctx, path="w.txt", old_string="a", new_string="x\ny")
    assert (ws_root / "w.txt").read_bytes() == b"x\r\ny\r\nb\r\nc\r\n"


async def test_edit_file_crlf_new_string_is_not_doubled(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    await call(edit_file, ctx, path="w.txt", old_string="a\nb", new_string="x\r\ny")
    assert (ws_root / "w.txt").read_bytes() == b"x\r\ny\r\nc\r\n"


async def test_edit_file_keeps_lf_when_new_string_has_crlf(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "u.txt").write_bytes(b"a\nb\n")
    await call(edit_file, ctx, path="u.txt", old_string="a", new_string="x\r\ny")
    assert (ws_root / "u.txt").read_bytes() == b"x\ny\nb\n"


async def test_edit_file_leaves_a_mixed_file_as_the_model_wrote(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "mix.txt").write_bytes(b"a\r\nb\nc\n")
    await call(edit_file, ctx, path="mix.txt", old_string="b", new_string="x\r\ny")
    assert (ws_root / "mix.txt").read_bytes() == b"a\r\nx\r\ny\nc\n"


async def test_edit_file_change_only_in_line_ends_is_refused(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "u.txt").write_bytes(b"a\nb\n")
    msg = await error(edit_file, ctx, path="u.txt", old_string="a\nb", new_string="a\r\nb")
    assert msg == "old_string and new_string differ only in their line ends, so there is nothing to change."


async def test_edit_file_numbers_lines_as_read_file_does(ctx: ToolContext, ws_root: Path) -> None:
    # a form feed is no line end for read_file (str.splitlines took it for one); a lone CR is
    (ws_root / "ff.py").write_bytes(b"l1\n\x0cl2\rl3\nl4\nl5\nl6\nl7\nl8\ntarget\nl10\n")
    out = await call(edit_file, ctx, path="ff.py", old_string="target", new_string="TARGET")
    assert out == ("Edited ff.py: replaced 1 occurrence. Lines 6-10 now read:\n     6\tl6\n     7\tl7\n"
                   "     8\tl8\n     9\tTARGET\n    10\tl10")
    assert "     9\tTARGET\n" in await call(read_file, ctx, path="ff.py")


async def test_edit_file_result_shows_bytes_that_are_not_utf8_as_read_file_does(ctx: ToolContext,
                                                                              ws_root: Path) -> None:
    (ws_root / "b.txt").write_bytes(b"caf\xe9\nx\n")
    out = await call(edit_file, ctx, path="b.txt", old_string="x", new_string="y")
    assert out == "Edited b.txt: replaced 1 occurrence. Lines 1-2 now read:\n     1\tcaf\ufffd\n     2\ty"
    assert (ws_root / "b.txt").read_bytes() == b"caf\xe9\ny\n"


async def test_edit_file_result_cuts_a_huge_line(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "min.js").write_text("a=1;" + "b" * 100_000 + "\n")
    out = await call(edit_file, ctx, path="min.js", old_string="a=1;", new_string="a=2;")
    assert out.endswith("b" * 1996 + " [... line cut at 2,000 characters]")


async def test_edit_file_says_why_a_replacement_character_never_matches(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "b.txt").write_bytes(b"caf\xe9 au lait\n")
    shown = await call(read_file, ctx, path="b.txt")
    msg = await error(edit_file, ctx, path="b.txt", old_string=shown.split("\t", 1)[1], new_string="tea")
    assert "bytes that are not UTF-8" in msg


# --- write_file: a path that names a directory ---------------------------------------------------


async def test_write_file_refuses_a_trailing_slash_on_a_new_path(ctx: ToolContext, ws_root: Path) -> None:
    msg = await error(write_file, ctx, path="newdir/", content="x")
    assert msg.startswith("'newdir/' ends with '/', so it names a directory, not a file")
    assert not (ws_root / "newdir").exists()


async def test_write_file_refuses_a_trailing_slash_on_a_file(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "t.txt").write_text("keep\n")
    await error(write_file, ctx, path="t.txt/", content="x")
    assert (ws_root / "t.txt").read_text() == "keep\n"


# --- repo_map: files that broke the parser or the symbol patterns --------------------------------


def _registry_call(ctx: ToolContext, name: str, **arguments: Any) -> tuple[bool, str]:
    reg = ToolRegistry([repo_map, todo_write])
    res = asyncio.run(reg.execute(ToolUseBlock("c1", name, arguments), ctx))
    return res.is_error, str(res.content)


def test_repo_map_survives_a_python_file_the_parser_cannot_nest(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "ok.py").write_text("def hello():\n    pass\n")
    (ws_root / "deep.py").write_text("x = " + "-" * 200_000 + "1\n")  # ast.parse: MemoryError (its stack)
    assert _registry_call(ctx, "repo_map") == (False, "ok.py:\n  def hello()\ndeep.py")


@pytest.mark.parametrize(("name", "text"), [("words.c", "a\n" * 10_000), ("blank.rb", "\n" * 20_000),
                                            ("mods.java", "public\n" * 12_000)])
def test_repo_map_symbol_patterns_run_in_linear_time(ctx: ToolContext, ws_root: Path, name: str, text: str) -> None:
    (ws_root / name).write_text(text)
    t0 = time.monotonic()
    out = _registry_call(ctx, "repo_map")
    assert time.monotonic() - t0 < 2  # Python's re backtracked over the rest of the file from every line start
    assert out == (False, name)


# --- skill: a file of the skill's folder ---------------------------------------------------------


@pytest.fixture
def skill_dir(ws_root: Path) -> Path:
    d = ws_root / ".subagents" / "skills" / "demo"
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text("---\nname: demo\ndescription: a demo\n---\nbody\n")
    return d


def test_skill_file_is_read_in_part(ctx: ToolContext, skill_dir: Path) -> None:
    (skill_dir / "big.txt").write_bytes(b"x" * (32 * 2**20))
    tool = SkillTool()
    out, peak = peak_mib(tool._load, ctx.workspace.root, "demo", "big.txt")
    assert peak < 8
    assert "[... output truncated" in out


def test_skill_binary_file_is_refused(ctx: ToolContext, skill_dir: Path) -> None:
    (skill_dir / "logo.png").write_bytes(b"\x89PNG\x00\x01\x02")
    with pytest.raises(ToolError, match="is a binary file"):
        SkillTool()._load(ctx.workspace.root, "demo", "logo.png")


def test_skill_fifo_is_refused_without_hanging(ctx: ToolContext, skill_dir: Path) -> None:
    os.mkfifo(skill_dir / "pipe")
    with pytest.raises(ToolError, match="has no file 'pipe'"):
        SkillTool()._load(ctx.workspace.root, "demo", "pipe")


# --- todo_write ----------------------------------------------------------------------------------


def test_todo_duplicate_id_from_a_position_says_so(ctx: ToolContext) -> None:
    todos = [{"content": "a", "status": "pending", "id": "2"}, {"content": "b", "status": "pending"}]
    is_error, msg = _registry_call(ctx, "todo_write", todos=todos)
    assert is_error
    assert "item 2 has no id, so its position is its id" in msg


# --- encodings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
async def test_utf16_is_named_and_left_alone(ctx: ToolContext, ws_root: Path, encoding: str) -> None:
    data = ("\ufeff" if encoding == "utf-16-be" else "") + "日本語のテキスト\n"
    (ws_root / "u16.txt").write_bytes(data.encode(encoding))
    before = (ws_root / "u16.txt").read_bytes()
    assert "is UTF-16 text" in await error(read_file, ctx, path="u16.txt")
    assert "is UTF-16 text" in await error(edit_file, ctx, path="u16.txt", old_string="日本", new_string="x")
    assert (ws_root / "u16.txt").read_bytes() == before


def test_repo_map_leaves_out_a_file_it_may_not_read(ws_root: Path) -> None:
    (ws_root / "secret.txt").write_text("TOKEN = 1\n")
    os.link(ws_root / "secret.txt", ws_root / "copy.py")  # another name for a hidden file
    (ws_root / "ok.py").write_text("def hello():\n    pass\n")
    ws = Workspace(ws_root, SandboxPolicy(deny_read=("secret.txt",)), home=ws_root / "home")
    ctx = ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=ws)
    assert _registry_call(ctx, "repo_map") == (False, "ok.py:\n  def hello()")


async def test_glob_lists_a_name_that_is_not_utf8(ws_root: Path, ctx: ToolContext) -> None:
    (ws_root / os.fsdecode(b"\xffbad.txt")).write_text("x")  # was: tool 'glob' failed: UnicodeEncodeError
    (ws_root / "good.txt").write_text("x")
    out = await call(files.glob, ctx, pattern="*.txt")
    assert "good.txt" in out
    assert "bad.txt" in out
