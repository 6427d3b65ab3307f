"""Breaking ``skill``, ``notepad_write``, ``todo_write`` and ``repo_map`` with what a model or a cloned project can
give: YAML bombs and deep nesting in a ``SKILL.md``, huge files and folders, a skill folder linked to the project's
root, control characters in folder names, notes and todo lists of megabytes, repositories of distinct identifiers."""

from __future__ import annotations

import logging
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.exceptions import ToolError
from subagents.messages import Message, ToolResultBlock, ToolUseBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools import repo_map as repo_map_mod
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.notepad import notepad_write
from subagents.tools.repo_map import repo_map
from subagents.tools.skills import SkillTool, find_skills
from subagents.tools.todo import todo_write, todos_from_transcript


def skill(base: Path, folder: str, front: str, body: str = "body") -> Path:
    d = base / ".claude" / "skills" / folder
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    return d


DEEP = 1100


def remove_deep(d: Path) -> None:
    """Remove the ``a/a/a/.../f.txt`` chain under ``d``, deepest first, without recursion."""
    (d.joinpath(*["a"] * DEEP) / "f.txt").unlink()
    for n in range(DEEP, 0, -1):
        d.joinpath(*["a"] * n).rmdir()


def peak_mib(fn: Callable[[], Any]) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, peak / 2**20


# --- skill ---------------------------------------------------------------------------------------


def test_yaml_aliases_in_a_description_are_refused_not_expanded(workdir: Path) -> None:
    """``description: [*g, *g...]`` is a few hundred bytes of YAML; ``str()`` of it is billions of items (a hang)."""
    levels = ["a: &a [" + ", ".join(['"x"'] * 9) + "]"]
    for prev, cur in zip("abcde", "bcdef", strict=True):
        levels.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    skill(workdir, "lol", "name: lol\n" + "\n".join(levels) + "\ndescription: [" + ", ".join(["*f"] * 9) + "]")
    problems: list[str] = []
    found = find_skills(workdir, problems=problems)
    assert "lol" not in found
    assert any("its description: is a YAML list, not text" in p for p in problems)


async def test_a_deeply_nested_front_matter_skips_the_skill_and_the_runtime_runs(workdir: Path) -> None:
    skill(workdir, "deep", "name: deep\ndescription: " + "[" * 600 + "]" * 600)
    problems: list[str] = []
    assert find_skills(workdir, problems=problems) == {}
    assert any("more than 256 '[' and '{' (YAML flow collections)" in p for p in problems)
    async with Runtime(model=FunctionModel(lambda r: ModelResponse(text="ok")), workdir=workdir,
                       store="memory://") as rt:  # PyYAML's RecursionError ended the Runtime's construction
        r = await rt.run("x")
    assert r.ok


def test_a_huge_skill_md_is_read_in_part(workdir: Path) -> None:
    d = skill(workdir, "big", "name: big\ndescription: a big one")
    with (d / "SKILL.md").open("a") as f:
        f.write("x" * (40 * 2**20))
    found, peak = peak_mib(lambda: find_skills(workdir))
    assert "big" in found
    assert peak < 8


async def test_a_project_skill_linked_to_the_root_cannot_read_hidden_files(ws_root: Path, ctx: ToolContext) -> None:
    workdir = ws_root
    (workdir / ".subagents").mkdir()
    (workdir / ".subagents" / "config.toml").write_text('[providers.anthropic]\napi_key = "sk-secret"\n')
    (workdir / "SKILL.md").write_text("---\nname: root\ndescription: the whole project\n---\nbody\n")
    (workdir / ".claude" / "skills").mkdir(parents=True)
    os.symlink("../..", workdir / ".claude" / "skills" / "root")
    with pytest.raises(ToolError, match="is hidden from agents") as info:
        await SkillTool().call({"name": "root", "file": ".subagents/config.toml"}, ctx)
    assert "sk-secret" not in str(info.value)
    assert "body" in await SkillTool().call({"name": "root"}, ctx)  # the skill itself still loads


def test_a_skipped_skills_warning_writes_control_characters_out(workdir: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    d = workdir / ".claude" / "skills" / "evil\x1b]0;PWNED\x07\x1b[2J"
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text("no front matter")
    with caplog.at_level(logging.WARNING, logger="subagents.skills"):
        SkillTool(workdir)
    [message] = caplog.messages
    assert "\x1b" not in message
    assert "evil\\x1b]0;PWNED\\x07\\x1b[2J/SKILL.md" in message


def test_a_deeply_nested_skill_folder_still_loads(workdir: Path) -> None:
    d = skill(workdir, "deep", "name: deep\ndescription: nested")
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEEP):  # os.walk recursed once per level: RecursionError past ~1000 (so do Path.mkdir, rmtree)
        os.mkdir("a", dir_fd=fd)
        fd, up = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(up)
    os.close(os.open("f.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    try:
        out = SkillTool()._load(workdir, "deep", None)
    finally:  # pytest's own clean-up of old temporary folders (shutil.rmtree) would fail on it
        remove_deep(d)
    assert "Other files in its folder" in out
    assert out.count("a/") == DEEP


def test_many_skills_keep_the_tools_description_short(workdir: Path) -> None:
    for i in range(120):
        skill(workdir, f"s{i:03}", f"name: s{i:03}\ndescription: {'word ' * 180}")
    desc = SkillTool(workdir).description
    assert len(desc) < 17_000  # ~110,000 characters before, in every request of every agent
    assert "more skills are installed but not listed" in desc


async def test_a_nul_byte_in_a_skills_file_is_a_tool_error(ws_root: Path, ctx: ToolContext) -> None:
    skill(ws_root, "s", "name: s\ndescription: d")
    with pytest.raises(ToolError, match="contains a NUL byte"):
        await SkillTool().call({"name": "s", "file": "a\x00b"}, ctx)


# --- notepad_write -------------------------------------------------------------------------------


def test_a_huge_note_is_refused_before_it_is_folded(ctx: ToolContext) -> None:
    ctx.notepad = []
    text = "ab " * 2_000_000  # 6 MB: folding made two million strings on the event loop (~100 MB)

    def write() -> str:
        try:
            return str(notepad_write.fn(ctx, text=text))
        except ToolError as e:
            return str(e)

    msg, peak = peak_mib(write)
    assert msg.startswith("the note is 6,000,000 characters long, over the limit of 1,000")
    assert peak < 5
    assert ctx.notepad == []


# --- todo_write ----------------------------------------------------------------------------------


async def test_a_todo_list_of_too_many_items_is_refused(ctx: ToolContext) -> None:
    todos = [{"content": f"step {i}", "status": "pending"} for i in range(201)]
    with pytest.raises(ToolError, match="more than 200 items"):
        await todo_write.call({"todos": todos}, ctx)
    assert ctx.todos == []


async def test_a_todo_list_of_too_many_characters_is_refused(ctx: ToolContext) -> None:
    todos = [{"content": "x" * 1000, "status": "pending"} for _ in range(30)]
    with pytest.raises(ToolError, match="over 20,000 characters long"):
        await todo_write.call({"todos": todos}, ctx)


async def test_a_childs_briefing_does_not_carry_a_huge_todo_list(workdir: Path) -> None:
    sizes: dict[str, int] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        n = sum(1 for m in req.messages if m.role == "assistant")
        if req.agent.depth == 1:
            sizes["child"] = len(req.system)
            return ModelResponse(text="ok")
        if n == 0:
            return ModelResponse(tool_calls=[ToolCall("todo_write", {"todos": [
                {"content": f"step {i} " + "x" * 100, "status": "pending"} for i in range(20_000)]})])
        if n == 1:
            return ModelResponse(tool_calls=[ToolCall("spawn_agent", {"prompt": "p", "description": "d"})])
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://") as rt:
        r = await rt.run("x")
    assert r.ok
    assert sizes["child"] < 50_000  # 2.4 MB before: the parent's whole list, in each child's system prompt


def test_a_stored_todo_list_with_an_unknown_status_is_not_restored() -> None:
    """``render_todos`` (todo_read, a child's briefing) raised KeyError on a list restored with status "done"."""
    def call(i: str, status: str) -> list[Message]:
        args = {"todos": [{"content": status, "status": status}]}
        return [Message("assistant", [ToolUseBlock(i, "todo_write", args)]),
                Message("user", [ToolResultBlock(i, "ok")])]

    msgs = [*call("t1", "pending"), *call("t2", "done")]
    assert todos_from_transcript(msgs) == [{"id": "1", "content": "pending", "status": "pending"}]


# --- repo_map ------------------------------------------------------------------------------------


async def map_it(ctx: ToolContext, **args: object) -> tuple[str, bool]:
    r = await ToolRegistry([repo_map]).execute(ToolUseBlock("c1", "repo_map", dict(args)), ctx)
    return str(r.content), r.is_error


async def test_files_of_distinct_identifiers_keep_the_cache_small(ctx: ToolContext, ws_root: Path) -> None:
    for i in range(12):
        (ws_root / f"f{i}.txt").write_text(" ".join(f"w{i}_{j:06d}" for j in range(25_000))[:255_000])
    tracemalloc.start()
    try:
        out, err = await map_it(ctx)
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert not err
    assert "f0.txt" in out
    assert kept < 4 * 2**20  # a Counter of 25,000 names per file: ~3 MB each, kept by the cache between calls


async def test_a_file_of_thousands_of_symbols_keeps_a_bounded_outline(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "consts.js").write_text("".join(f"const name{i} = {i};\n" for i in range(5000)))
    out, err = await map_it(ctx, max_tokens=20_000)
    assert not err
    assert "  name299\n  [... 4,700 more symbols]" in out


async def test_a_tree_of_empty_folders_stops_the_walk_and_says_so(ctx: ToolContext, ws_root: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Only files counted toward the walk's limit: a tree of a million folders was walked to its end."""
    (ws_root / "a.py").write_text("def f(): pass\n")
    for i in range(100):
        (ws_root / f"d{i:03}").mkdir()
    monkeypatch.setattr(repo_map_mod, "MAX_WALK", 50, raising=False)
    out, err = await map_it(ctx)
    assert not err
    assert out.endswith("[... 0 more files not shown; the walk stopped after visiting 50 entries; raise max_tokens "
                        "or map a subdirectory (path=...) ...]")


async def test_the_walk_stops_when_the_call_is_cancelled(ctx: ToolContext, ws_root: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(2000):
        (ws_root / f"d{i:04}").mkdir()
    (ws_root / "a.py").write_text("def f(): pass\n")
    monkeypatch.setattr(repo_map_mod, "cancelled", lambda: True)
    out, err = await map_it(ctx)
    assert err
    assert out == "repo_map was cancelled before it finished."

