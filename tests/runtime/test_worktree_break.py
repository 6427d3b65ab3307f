"""Worktree isolation under stress: odd nicknames, many children at once, ignored files, a deleted or
rewired checkout — each ends in a clear outcome, never lost work, a leftover branch or code run outside the sandbox."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from subagents import AgentDefinition, Runtime
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
    (workdir / ".gitignore").write_text("out/\n")
    git(workdir, "add", "app.py", ".gitignore")
    git(workdir, "commit", "-q", "-m", "v1")
    return workdir


def doing(*calls: ToolCall) -> FunctionModel:
    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        return ModelResponse("", [calls[len(done)]]) if len(done) < len(calls) else ModelResponse(" | ".join(done))

    return FunctionModel(fn)


async def test_a_git_ignored_file_the_child_wrote_keeps_the_worktree(repo: Path) -> None:
    model = doing(ToolCall("write_file", {"path": "out/report.md", "content": "precious"}))
    async with Runtime(model, workdir=repo, store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("write", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    wt = repo / ".subagents" / "worktrees" / f"{r.nickname}-{r.id[-8:]}"
    assert "1 git-ignored file(s): out/report.md" in r.text
    assert (wt / "out" / "report.md").read_text() == "precious"


@pytest.mark.parametrize("nick", ["a..b", "x.lock"])
async def test_a_nickname_that_is_no_valid_branch_name_still_gets_a_worktree(repo: Path, nick: str) -> None:
    d = AgentDefinition("odd", system_prompt="w", nickname_candidates=[nick])
    async with Runtime(doing(ToolCall("write_file", {"path": "n.txt", "content": "x"})), workdir=repo,
                       store="memory://", permission_mode="yolo", agents=[d]) as rt:
        h = await rt.spawn("w", agent="odd", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    assert r.error is None
    assert "[worktree kept with changes: " in r.text


async def test_children_whose_nicknames_make_one_branch_name_all_get_a_worktree(repo: Path) -> None:
    d = AgentDefinition("odd", system_prompt="w", nickname_candidates=[f"rex{c}" for c in "!?#%&*"])
    async with Runtime(doing(ToolCall("write_file", {"path": "n.txt", "content": "x"})), workdir=repo,
                       store="memory://", permission_mode="yolo", agents=[d]) as rt:
        hs = [await rt.spawn("w", agent="odd", isolation="worktree", background=True) for _ in range(6)]
        rs = await rt.wait([h.id for h in hs])
    assert [r.error for r in rs.values()] == [None] * 6
    assert len(git(repo, "branch", "--list", "subagents/*").splitlines()) == 6


async def test_many_children_at_once_create_and_remove_their_worktrees(repo: Path) -> None:
    async with Runtime(doing(ToolCall("read_file", {"path": "app.py"})), workdir=repo, store="memory://",
                       permission_mode="yolo") as rt:
        hs = [await rt.spawn("w", isolation="worktree", background=True) for _ in range(16)]
        rs = await rt.wait([h.id for h in hs])
    assert [r.error for r in rs.values()] == [None] * 16
    assert all("the worktree and its branch were removed" in r.text for r in rs.values())
    assert git(repo, "branch", "--list", "subagents/*") == ""


async def test_one_runtime_never_runs_two_git_worktree_commands_at_once(repo: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # concurrent `git worktree add`s in one repository fail at random ("failed to read .git/worktrees/.../commondir")
    real, busy, most = asyncio.create_subprocess_exec, [0], [0]

    async def spy(*args: Any, **kw: Any) -> Any:
        if "worktree" not in args:
            return await real(*args, **kw)
        busy[0] += 1
        most[0] = max(most[0], busy[0])
        proc = await real(*args, **kw)
        talk = proc.communicate

        async def communicate(*a: Any) -> Any:
            try:
                await asyncio.sleep(0.05)
                return await talk(*a)
            finally:
                busy[0] -= 1

        proc.communicate = communicate
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spy)
    async with Runtime(doing(ToolCall("read_file", {"path": "app.py"})), workdir=repo, store="memory://",
                       permission_mode="yolo") as rt:
        hs = [await rt.spawn("w", isolation="worktree", background=True) for _ in range(4)]
        await rt.wait([h.id for h in hs])
    assert most[0] == 1


async def test_a_worktree_the_child_deleted_leaves_no_branch_or_stale_entry(repo: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        if not done:
            return ModelResponse("", [ToolCall("bash", {"command": "pwd"})])
        shutil.rmtree(done[0].splitlines()[0])
        return ModelResponse("deleted")

    async with Runtime(FunctionModel(fn), workdir=repo, store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("rm", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    assert "is gone; its branch was removed]" in r.text
    assert git(repo, "branch", "--list", "subagents/*") == ""
    assert "prunable" not in git(repo, "worktree", "list", "--porcelain")


async def test_a_rewired_git_file_in_the_worktree_runs_no_code_outside_the_sandbox(repo: Path, tmp_path: Path
                                                                                    ) -> None:
    evil = tmp_path / "evil"
    git(tmp_path, "init", "-q", str(evil))
    git(evil, "config", "core.fsmonitor", f"touch {tmp_path}/pwned; false")

    def fn(req: ModelRequest) -> ModelResponse:  # as a shell allowed to write .git (allow_git) could do
        done = [r.content for m in req.messages for r in m.tool_results]
        if not done:
            return ModelResponse("", [ToolCall("bash", {"command": "pwd"})])
        (Path(done[0].splitlines()[0]) / ".git").write_text(f"gitdir: {evil}/.git\n")
        return ModelResponse("done")

    async with Runtime(FunctionModel(fn), workdir=repo, store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("x", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    assert not (tmp_path / "pwned").exists()
    assert "it was kept]" in r.text


async def test_a_failed_worktree_is_an_error_without_a_misleading_worktree_line(repo: Path) -> None:
    git(repo, "branch", "subagents")  # refs/heads/subagents blocks every subagents/<name> branch
    async with Runtime(doing(), workdir=repo, store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("w", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    assert "could not create its worktree: could not create a branch" in (r.error or "")
    assert "[worktree" not in r.text
    assert list((repo / ".subagents" / "worktrees").iterdir()) == []


async def test_a_child_ending_keeps_the_worktree_its_grandchild_kept_inside_its_own(repo: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        if req.agent.depth < 2:
            if not done:
                return ModelResponse("", [ToolCall("spawn_agent", {"prompt": "p", "isolation": "worktree"})])
            return ModelResponse(done[0])
        return ModelResponse("", [ToolCall("write_file", {"path": "g.txt", "content": "g"})]) if not done else \
            ModelResponse("written")

    async with Runtime(FunctionModel(fn), workdir=repo, store="memory://", permission_mode="yolo") as rt:
        await rt.run("go")
        child, grandchild = (next(n for n in rt.manager.nodes.values() if n.depth == d) for d in (1, 2))
    assert child.worktree is not None
    assert grandchild.worktree is not None
    assert (grandchild.worktree.path / "g.txt").read_text() == "g"
    assert "prunable" not in git(repo, "worktree", "list", "--porcelain")


async def test_a_grandchild_without_changes_lets_its_parents_worktree_go(repo: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        done = [r.content for m in req.messages for r in m.tool_results]
        if req.agent.depth < 2 and not done:
            return ModelResponse("", [ToolCall("spawn_agent", {"prompt": "p", "isolation": "worktree"})])
        return ModelResponse("done")

    async with Runtime(FunctionModel(fn), workdir=repo, store="memory://", permission_mode="yolo") as rt:
        await rt.run("go")
    assert git(repo, "branch", "--list", "subagents/*") == ""
    assert list((repo / ".subagents" / "worktrees").iterdir()) == []


async def test_a_workspace_not_in_the_last_commit_is_a_clear_error(repo: Path) -> None:
    new = repo / "newpkg"
    new.mkdir()
    async with Runtime(doing(), workdir=new, store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("w", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    assert "is not in the repository's last commit (not committed yet, or git-ignored)" in (r.error or "")
    assert git(repo, "branch", "--list", "subagents/*") == ""


async def test_closing_a_child_while_git_makes_its_worktree_leaves_nothing(repo: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    real = asyncio.create_subprocess_exec

    async def slow(*args: Any, **kw: Any) -> Any:
        if "add" in args:
            await asyncio.sleep(0.4)
        return await real(*args, **kw)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", slow)
    async with Runtime(doing(), workdir=repo, store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("w", isolation="worktree", background=True)
        await asyncio.sleep(0.2)
        await rt.close(h.id)
    assert git(repo, "branch", "--list", "subagents/*") == ""
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


async def test_worktrees_stay_out_of_git_status_under_the_projects_own_state_gitignore(repo: Path) -> None:
    (repo / ".subagents").mkdir()
    (repo / ".subagents" / ".gitignore").write_text("state.db*\n")
    git(repo, "add", ".subagents/.gitignore")
    git(repo, "commit", "-q", "-m", "state")
    async with Runtime(doing(ToolCall("write_file", {"path": "n.txt", "content": "x"})), workdir=repo,
                       store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("w", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    assert "[worktree kept with changes: " in r.text
    assert git(repo, "status", "--porcelain") == ""


async def test_a_git_dir_in_the_environment_does_not_swap_the_repository(repo: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"  # as in a git hook, or a shell that exported GIT_DIR for another repository
    git(tmp_path, "init", "-q", "-b", "main", str(other))
    (other / "other.txt").write_text("o")
    git(other, "add", ".")
    git(other, "commit", "-q", "-m", "o")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    async with Runtime(doing(ToolCall("list_dir", {})), workdir=repo, store="memory://", permission_mode="yolo"
                       ) as rt:
        h = await rt.spawn("w", isolation="worktree")
        r = (await rt.wait([h.id]))[h.id]
    assert "app.py" in r.text
    assert "other.txt" not in r.text


async def test_a_repository_git_refuses_is_named_with_gits_reason_not_as_one_without_commits(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(repo / "broken.gitconfig"))
    async with Runtime(doing(), workdir=repo, store="memory://", permission_mode="yolo") as rt:
        h = await rt.spawn("w", isolation="worktree")
        (repo / "broken.gitconfig").write_text("[core\n")  # as "detected dubious ownership": git refuses to work
        r = (await rt.wait([h.id]))[h.id]
    assert "bad config line 1" in (r.error or "")
    assert "has none yet" not in (r.error or "")


def test_an_interrupted_run_names_the_worktree_it_left(tmp_path: Path) -> None:
    from subagents.runtime.isolation import interrupted_line

    rec = {"repo": str(tmp_path), "path": str(tmp_path), "branch": "subagents/ada", "root": str(tmp_path),
           "base": "abc"}
    assert interrupted_line(rec).startswith(f"[worktree left as it was: {tmp_path} (branch subagents/ada)")
    assert interrupted_line({}) == ""
