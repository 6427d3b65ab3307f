"""Worktree isolation: a child that works in its own ``git worktree`` of the workspace's repository.

``isolation: worktree`` (in a definition, ``spawn_agent(..., isolation="worktree")`` or
``rt.spawn(..., isolation="worktree")``) gives the child a checkout of ``HEAD`` on a new branch
``subagents/<nickname>``, under ``.subagents/worktrees/`` of the workspace; its file tools and its
shell sandbox are confined to it.  When it ends:

- no changes (nothing committed on the branch, nothing modified or untracked in the checkout): the
  worktree and the branch are removed;
- changes: both are kept, and the result names the path, the branch and a diffstat so the parent can
  review or merge them.  Nothing here ever deletes a worktree that holds changes, and the parent's
  own checkout (with its uncommitted changes) is never touched.

>>> plan_worktree is not None
True
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import SpawnError
from ..ids import short_id

__all__ = ["Worktree", "WorktreeError", "create_worktree", "find_repo", "finish_worktree", "plan_worktree"]

WORKTREES_DIR = Path(".subagents") / "worktrees"
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


class WorktreeError(SpawnError):
    """A worktree could not be made or inspected (git missing, not a repository, git failed)."""


@dataclass(slots=True)
class Worktree:
    """One child's checkout: the repository, where the checkout is, its branch and the commit it started from."""

    repo: Path
    path: Path
    branch: str
    root: Path  # the child's workspace root: ``path`` plus the workspace's place inside the repository
    base: str = ""

    def describe(self) -> str:
        return f"{self.path} (branch {self.branch})"


def find_repo(start: Path) -> Path | None:
    """The top of the git working tree containing ``start`` (a directory or file named ``.git``), or ``None``."""
    p = start.resolve()
    for d in (p, *p.parents):
        if (d / ".git").exists():
            return d
    return None


def plan_worktree(root: Path, nickname: str, agent_id: str) -> Worktree:
    """Check that a worktree can be made for a child of the workspace ``root`` (fast: no git call yet)."""
    import shutil  # not loaded on `import subagents`

    if shutil.which("git") is None:
        raise WorktreeError("isolation 'worktree' needs git, and git is not installed (or not on PATH); install "
                            "git, or spawn the agent without isolation")
    repo = find_repo(root)
    if repo is None:
        raise WorktreeError(f"isolation 'worktree' needs a git repository, and {root} is not inside one; run "
                            "`git init` and commit, or spawn the agent without isolation")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", nickname).strip("-.") or "agent"
    path = root / WORKTREES_DIR / f"{safe}-{short_id(agent_id)}"
    return Worktree(repo, path, f"subagents/{safe}", path / root.relative_to(repo))


async def _git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = await asyncio.create_subprocess_exec(
        "git", *args, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **_GIT_ENV})
    out, err = await proc.communicate()
    if check and proc.returncode != 0:
        raise WorktreeError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}): "
                            f"{err.decode(errors='replace').strip()[:500]}")
    return out.decode(errors="replace")


async def create_worktree(wt: Worktree) -> Worktree:
    """``git worktree add -b <branch> <path> HEAD`` (the branch gets a suffix if the name is taken)."""
    try:
        wt.base = (await _git(wt.repo, "rev-parse", "--verify", "HEAD")).strip()
    except WorktreeError:
        raise WorktreeError(f"isolation 'worktree' needs a commit to start from, and the repository {wt.repo} has "
                            "none yet; commit once, or spawn the agent without isolation") from None
    if await _git(wt.repo, "branch", "--list", wt.branch):
        wt.branch = f"{wt.branch}-{wt.path.name.rsplit('-', 1)[-1]}"
    wt.path.parent.mkdir(parents=True, exist_ok=True)
    _ignore_state_dir(wt.path.parent.parent)
    await _git(wt.repo, "worktree", "add", "-q", "-b", wt.branch, str(wt.path), wt.base)
    return wt


def _ignore_state_dir(state: Path) -> None:
    """Keep ``.subagents/`` (store, worktrees) out of ``git status`` unless the project already says otherwise."""
    gi = state / ".gitignore"
    if not gi.exists():
        gi.write_text("# written by subagents: runtime state, not project files\n*\n!config.toml\n"
                      "!agents/\n!hooks/\n", encoding="utf-8")


async def finish_worktree(wt: Worktree) -> str:
    """Remove the worktree if it holds no changes; say what happened in one line for the result."""
    if not wt.path.exists():
        return f"[worktree {wt.path} is gone; branch {wt.branch}]"
    status = await _git(wt.path, "status", "--porcelain", "--untracked-files=all")
    head = (await _git(wt.path, "rev-parse", "HEAD")).strip()
    if not status.strip() and head == wt.base:
        await _git(wt.repo, "worktree", "remove", "--force", str(wt.path))
        await _git(wt.repo, "branch", "-D", wt.branch, check=False)
        return "[worktree: no changes; the worktree and its branch were removed]"
    stat = (await _git(wt.path, "diff", "--stat", wt.base)).strip().splitlines()
    untracked = [ln[3:] for ln in status.splitlines() if ln.startswith("??")]
    commits = (await _git(wt.path, "rev-list", "--count", f"{wt.base}..HEAD")).strip()
    parts = [stat[-1].strip() if stat else "no changes to tracked files"]
    if untracked:
        parts.append(f"{len(untracked)} untracked file(s): {', '.join(untracked[:10])}")
    if commits not in ("", "0"):
        parts.append(f"{commits} commit(s) on the branch")
    return (f"[worktree kept with changes: {wt.path} on branch {wt.branch}; {'; '.join(parts)}. Review it there, "
            f"or merge it with `git merge {wt.branch}` (commit its changes first).]")
