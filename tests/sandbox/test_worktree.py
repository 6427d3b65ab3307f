"""Worktree isolation: a child works in its own git worktree; no changes -> removed, changes -> kept and named."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from subagents import AgentDefinition, Runtime, SpawnError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k, v in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                 "GIT_COMMITTER_EMAIL": "t@x"}.items():
        monkeypatch.setenv(k, v)
    git(workdir, "init", "-q", "-b", "main")
    (workdir / "app.py").write_text("print('v1')\n")
    git(workdir, "add", "app.py")
    git(workdir, "commit", "-q", "-m", "v1")
    return workdir


def delegating(child_calls: list[ToolCall], isolation: str | None = "worktree") -> tuple[FunctionModel, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        if req.agent.depth == 1:
            seen["system"] = req.system
            if len(done) < len(child_calls):
                return ModelResponse("", [child_calls[len(done)]])
            seen["child_results"] = done
            return ModelResponse("child finished")
        if not done:
            args: dict[str, Any] = {"agent_type": "general-purpose", "prompt": "work"}
            if isolation:
                args["isolation"] = isolation
            return ModelResponse("", [ToolCall("spawn_agent", args)])
        seen["spawn_result"] = done[0]
        return ModelResponse("root finished")

    return FunctionModel(fn), seen


async def test_changes_are_kept_on_a_branch_and_the_parent_checkout_is_untouched(repo: Path) -> None:
    (repo / "app.py").write_text("print('parent work in progress')\n")  # the parent's uncommitted change
    model, seen = delegating([ToolCall("edit_file", {"path": "app.py", "old_string": "v1", "new_string": "v2"}),
                              ToolCall("write_file", {"path": "notes.md", "content": "n"}),
                              ToolCall("write_file", {"path": "../../../../escape.txt", "content": "x"}),
                              ToolCall("bash", {"command": "pwd"})])
    async with Runtime(model, workdir=repo, store="memory://", permission_mode="yolo") as rt:
        await rt.run("go")
        child = next(n for n in rt.manager.nodes.values() if n.depth == 1)
    wt = repo / ".subagents" / "worktrees" / f"{child.nickname}-{child.id[-8:]}"
    branch = f"subagents/{child.nickname}"
    assert (repo / "app.py").read_text() == "print('parent work in progress')\n"
    assert not (repo / "notes.md").exists()
    assert (wt / "app.py").read_text() == "print('v2')\n"
    assert (wt / "notes.md").read_text() == "n"
    assert f"Working directory (workspace root): {wt}" in seen["system"]
    edit, write, escape, pwd = seen["child_results"]
    assert edit.startswith("Edited app.py")
    assert write.startswith("Created notes.md")
    assert "outside the workspace" in escape
    assert not (repo.parent.parent / "escape.txt").exists()
    assert pwd.splitlines()[0] == str(wt)
    assert (f"[worktree kept with changes: {wt} on branch {branch}; 1 file changed, 1 insertion(+), 1 deletion(-); "
            "1 untracked file(s): notes.md. Review it there, or merge it with `git merge "
            f"{branch}` (commit its changes first).]") in seen["spawn_result"]
    assert branch in git(repo, "branch", "--list", branch)
    assert git(repo, "status", "--porcelain") == " M app.py\n"  # .subagents/ is ignored, the rest untouched


async def test_no_changes_remove_the_worktree_and_its_branch(repo: Path) -> None:
    model, seen = delegating([ToolCall("read_file", {"path": "app.py"})])
    async with Runtime(model, workdir=repo, store="memory://", permission_mode="yolo") as rt:
        await rt.run("go")
    assert "[worktree: no changes; the worktree and its branch were removed]" in seen["spawn_result"]
    assert "v1" in seen["child_results"][0]
    assert list((repo / ".subagents" / "worktrees").iterdir()) == []
    assert git(repo, "branch", "--list", "subagents/*") == ""
    assert "prunable" not in git(repo, "worktree", "list", "--porcelain")


async def test_a_definition_and_the_python_api_ask_for_isolation(repo: Path) -> None:
    d = AgentDefinition("isolated-writer", system_prompt="w", isolation="worktree")

    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        if not done:
            return ModelResponse("", [ToolCall("write_file", {"path": "out.txt", "content": req.agent.nickname})])
        return ModelResponse("done")

    async with Runtime(FunctionModel(fn), workdir=repo, store="memory://", permission_mode="yolo",
                       agents=[d]) as rt:
        h = await rt.spawn("write", agent="isolated-writer")
        r1 = (await rt.wait([h.id]))[h.id]
        h2 = await rt.spawn("write", isolation="worktree")
        r2 = (await rt.wait([h2.id]))[h2.id]
    assert not (repo / "out.txt").exists()
    for r in (r1, r2):
        assert "[worktree kept with changes: " in r.text
        assert (repo / ".subagents" / "worktrees" / f"{r.nickname}-{r.id[-8:]}" / "out.txt").read_text() == r.nickname


async def test_a_clear_error_when_there_is_no_repository(workdir: Path) -> None:
    model, seen = delegating([ToolCall("list_dir", {})])
    async with Runtime(model, workdir=workdir, store="memory://", permission_mode="yolo") as rt:
        await rt.run("go")
        with pytest.raises(SpawnError) as e:
            await rt.spawn("x", isolation="worktree")
        with pytest.raises(SpawnError, match="isolation must be 'worktree'"):
            await rt.spawn("x", isolation="container")
    message = (f"isolation 'worktree' needs a git repository, and {workdir} is not inside one; run `git init` and "
               "commit, or spawn the agent without isolation")
    assert seen["spawn_result"] == message
    assert str(e.value) == message
