"""``repo_map``: a ranked outline of the workspace (Python by ast, others by pattern), budgeted and cached."""

from __future__ import annotations

import os
from pathlib import Path

from subagents import Runtime
from subagents.messages import ToolUseBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools import repo_map as repo_map_mod
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.repo_map import repo_map


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


async def call(ctx: ToolContext, **args: object) -> tuple[str, bool]:
    r = await ToolRegistry([repo_map]).execute(ToolUseBlock("c1", "repo_map", dict(args)), ctx)
    return str(r.content), r.is_error


def project(root: Path) -> None:
    write(root, "pkg/core.py", "LIMIT = 3\n\nclass Engine:\n    def __init__(self):\n        pass\n"
                               "    def start(self, x):\n        pass\n    def _hidden(self):\n        pass\n\n"
                               "def build_engine(cfg, *, fast=False):\n    return Engine()\n")
    for i in range(3):
        write(root, f"pkg/user{i}.py", f"from .core import Engine, build_engine\n\ndef use{i}():\n"
                                       "    return build_engine(1).start(Engine)\n")
    write(root, "web/app.ts", "export function renderPage(x: number) {}\nexport class Widget {}\n")
    write(root, "srv/main.go", "package main\n\ntype Server struct{}\n\nfunc (s *Server) Serve() {}\n")
    write(root, "notes.txt", "nothing to outline\n")
    write(root, "broken.py", "def oops(:\n")
    write(root, ".secret/key.py", "def hidden(): pass\n")
    write(root, "node_modules/lib/index.js", "export function vendored() {}\n")


async def test_outline_ranks_the_most_used_file_first(ctx: ToolContext, ws_root: Path) -> None:
    project(ws_root)
    out, err = await call(ctx)
    assert not err
    lines = out.splitlines()
    assert lines[:4] == ["pkg/core.py:", "  LIMIT", "  class Engine: __init__, start", "  def build_engine(cfg)"]
    assert "web/app.ts:\n  renderPage\n  Widget" in out
    assert "srv/main.go:\n  Server\n  Serve" in out
    assert "notes.txt" in lines
    assert "broken.py" in lines  # a file ast cannot parse is listed by name
    assert "vendored" not in out
    assert "hidden" not in out  # dot-directories are not read


async def test_the_budget_cuts_the_outline_and_says_how(ctx: ToolContext, ws_root: Path) -> None:
    for i in range(60):
        write(ws_root, f"m/mod{i:02}.py", "".join(f"def function_number_{j}(a, b):\n    pass\n" for j in range(8)))
    out, err = await call(ctx, max_tokens=200)
    assert not err
    assert len(out) <= 200 * 4 + 120
    assert out.splitlines()[-1].startswith("[... ")
    assert "more files not shown; raise max_tokens or map a subdirectory (path=...)" in out
    sub, _ = await call(ctx, path="m", max_tokens=20_000)
    assert sub.count("def function_number_0(a, b)") == 60


async def test_files_are_read_again_only_when_they_change(ctx: ToolContext, ws_root: Path,
                                                          monkeypatch: object) -> None:
    project(ws_root)
    await call(ctx)
    reads: list[str] = []
    real = repo_map_mod._entry

    def counting(rel: str, text: str) -> repo_map_mod._Entry:
        reads.append(rel)
        return real(rel, text)

    repo_map_mod._entry = counting  # type: ignore[assignment]
    try:
        await call(ctx)
        assert reads == []
        p = write(ws_root, "pkg/core.py", "def renamed_function():\n    pass\n")
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
        out, _ = await call(ctx)
        assert reads == ["pkg/core.py"]
        assert "def renamed_function()" in out
    finally:
        repo_map_mod._entry = real  # type: ignore[assignment]


async def test_bad_paths_are_tool_errors(ctx: ToolContext, ws_root: Path) -> None:
    project(ws_root)
    out, err = await call(ctx, path="nope")
    assert err
    assert "does not exist" in out
    out, err = await call(ctx, path="notes.txt")
    assert err
    assert "is a file" in out
    out, err = await call(ctx, path="..")
    assert err


async def test_explore_has_repo_map(workdir: Path) -> None:
    project(workdir)
    seen: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            assert "repo_map" in [t.name for t in req.tools]
            return ModelResponse("", [ToolCall("repo_map", {})])
        seen.append(repr(req.messages[-1]))
        return ModelResponse("done")

    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", tools=[repo_map]) as rt:
        await rt.run("map it", agent="explore")
    assert "class Engine: __init__, start" in seen[0]
