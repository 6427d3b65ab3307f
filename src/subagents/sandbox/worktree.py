"""Worktree isolation: a child that works in its own ``git worktree`` of the workspace's repository.

``isolation: worktree`` (in a definition, ``spawn_agent(..., isolation="worktree")`` or
``rt.spawn(..., isolation="worktree")``) gives the child a checkout of ``HEAD`` on a new branch
``subagents/<nickname>``, under ``.subagents/worktrees/`` of the workspace; its file tools and its
shell sandbox are confined to it.  When it ends:

- no changes (nothing committed on the branch, nothing modified, untracked or git-ignored in the
  checkout): the worktree and the branch are removed;
- changes: both are kept, and the result names the path, the branch and a diffstat so the parent can
  review or merge them.  Nothing here ever deletes a worktree that holds changes, and the parent's
  own checkout (with its uncommitted changes) is never touched.

>>> plan_worktree is not None
True
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import weakref
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import SpawnError
from ..ids import short_id

__all__ = ["Worktree", "WorktreeError", "create_worktree", "find_repo", "finish_worktree", "plan_worktree"]

WORKTREES_DIR = Path(".subagents") / "worktrees"
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
# `git rev-parse --local-env-vars`: set in the environment (a git hook, an exported GIT_DIR) they would point every
# command at another repository, index or object store than the workspace's
_LOCAL_VARS = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE", "GIT_COMMON_DIR"})


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
    path = root / WORKTREES_DIR / f"{_safe_name(nickname)}-{short_id(agent_id)}"
    return Worktree(repo, path, f"subagents/{_safe_name(nickname)}", path / root.relative_to(repo))


def _safe_name(nickname: str) -> str:
    """``nickname`` as one valid branch-name component and file name (``git check-ref-format`` rules: no ``..``,
    no leading ``.`` or ``-``, no ``.lock`` at the end; at most 64 characters)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+|\.\.+", "-", nickname)[:64].strip("-.")
    if safe.endswith(".lock"):
        safe = safe[:-5] + "-lock"
    return safe or "agent"


_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, asyncio.Lock]] = weakref.WeakKeyDictionary()


async def _common_dir(repo: Path) -> Path:
    """The repository's shared git directory: the same for the repository and all its worktrees (a grandchild's
    worktree is made from its parent's worktree, and must wait for its siblings' commands too)."""
    return _normal(Path(repo, (await _git(repo, "rev-parse", "--git-common-dir")).strip()))


def _normal(p: Path) -> Path:
    return Path(os.path.normpath(p))


def _lock(repo: Path) -> asyncio.Lock:
    """One lock per repository: concurrent ``git worktree add``/``remove`` in one repository fail at random
    (``fatal: failed to read .git/worktrees/<other>/commondir``), so this process runs them one at a time."""
    locks = _LOCKS.setdefault(asyncio.get_running_loop(), {})  # an asyncio lock belongs to one event loop
    lock = locks.get(repo)
    if lock is None:
        lock = locks[repo] = asyncio.Lock()
    return lock


async def _run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run git; its exit code and its stdout, or its stderr (or what went wrong starting it)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git", *args, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**{k: v for k, v in os.environ.items() if k not in _LOCAL_VARS}, **_GIT_ENV, **(env or {})})
    except OSError as e:  # git gone from PATH since the spawn, or cwd removed
        return 127, f"could not run git: {e}"
    out, err = await proc.communicate()
    if proc.returncode == 0:
        return 0, out.decode(errors="replace")
    return proc.returncode or 1, err.decode(errors="replace").strip()[:500]


async def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    code, text = await _run(cwd, *args, env=env)
    if code != 0:
        raise WorktreeError(f"git {' '.join(args)} failed in {cwd} (exit {code}): {text}")
    return text


async def create_worktree(wt: Worktree) -> Worktree:
    """``git worktree add <path> <branch>`` on a new branch at ``HEAD`` (the branch gets a suffix if the name is
    taken).  ``wt.base`` is set only once the worktree exists; on failure nothing is left behind."""
    code, base = await _run(wt.repo, "rev-parse", "--verify", "HEAD^{commit}")
    if code != 0:
        await _git(wt.repo, "rev-parse", "--git-dir")  # git cannot use the repository at all: its own words
        raise WorktreeError(f"isolation 'worktree' needs a commit to start from, and the repository {wt.repo} has "
                            "none yet; commit once, or spawn the agent without isolation")
    base = base.strip()
    wt.path.parent.mkdir(parents=True, exist_ok=True)
    _ignore_state_dir(wt.path.parent.parent)
    async with _lock(await _common_dir(wt.repo)):
        # `git branch` creates the ref atomically or fails: another process taking the name is no race
        suffixed = f"{wt.branch}-{wt.path.name.rsplit('-', 1)[-1]}"
        err = "the branch exists"
        for name in dict.fromkeys((wt.branch, suffixed)):
            if not await _git(wt.repo, "branch", "--list", name):
                code, err = await _run(wt.repo, "branch", "--no-track", name, base)
                if code == 0:
                    break
        else:
            raise WorktreeError(f"could not create a branch {suffixed} for the worktree in {wt.repo}: {err}")
        for delay in (0.0, 0.2, 0.5, 1.0):  # another process adding or removing a worktree: try again
            await asyncio.sleep(delay)
            code, err = await _run(wt.repo, "worktree", "add", "-q", str(wt.path), name)
            if code == 0:
                wt.branch, wt.base = name, base
                return wt
        await _run(wt.repo, "branch", "-D", name)
    raise WorktreeError(f"git worktree add {wt.path} {name} failed in {wt.repo}: {err}")


def _ignore_state_dir(state: Path) -> None:
    """Keep ``.subagents/`` (store, worktrees) out of ``git status`` unless the project already says otherwise;
    the worktrees stay out of it (and out of ``git add -A``) even then."""
    gi = state / ".gitignore"
    if not gi.exists():
        gi.write_text(f"{_MARK}\n*\n!config.toml\n!agents/\n!hooks/\n", encoding="utf-8")
    elif not gi.read_text(encoding="utf-8", errors="replace").startswith(_MARK):  # the project's own
        inner = state / "worktrees" / ".gitignore"
        if not inner.exists():
            inner.write_text(f"{_MARK}\n*\n", encoding="utf-8")


_MARK = "# written by subagents: runtime state, not project files"


def _find_admin(admins: Path, path: Path) -> Path | None:
    """The worktree's own git directory (``.git/worktrees/<name>`` of the repository), found from the repository's
    side: the ``.git`` file in the checkout is the child's to write, so it is never what git is pointed at."""
    def real(p: str) -> str:  # the checkout's directory resolved, never a symlink the child put at `.git`
        return os.path.realpath(os.path.dirname(p))

    want = real(str(path / ".git"))
    try:
        for d in admins.iterdir():
            with contextlib.suppress(OSError):
                if real((d / "gitdir").read_text(encoding="utf-8").strip()) == want:
                    return d
    except OSError:
        pass
    return None


async def _drop_branch(wt: Worktree) -> str:
    """Delete the worktree's branch if it holds no commit of its own; the words for the result."""
    code, head = await _run(wt.repo, "rev-parse", "--verify", "-q", f"refs/heads/{wt.branch}")
    if code != 0:
        return "its branch is gone"
    if head.strip() != wt.base:
        return f"its branch {wt.branch} was kept (it has commits)"
    code, err = await _run(wt.repo, "branch", "-D", wt.branch)
    return "its branch was removed" if code == 0 else f"its branch {wt.branch} was kept ({err})"


async def finish_worktree(wt: Worktree) -> str:
    """Remove the worktree if it holds no changes; say what happened in one line for the result."""
    common = await _common_dir(wt.repo)
    async with _lock(common):
        admin = _find_admin(common / "worktrees", wt.path)
        if not wt.path.exists() or admin is None:
            if admin is not None or not wt.path.exists():
                await _run(wt.repo, "worktree", "remove", "--force", str(wt.path))  # its stale entry
            what = "is gone" if not wt.path.exists() else "is no longer a worktree of the repository (kept as is)"
            return f"[worktree {wt.path} {what}; {await _drop_branch(wt)}]"
        env = {"GIT_DIR": str(admin), "GIT_WORK_TREE": str(wt.path)}
        status = await _git(wt.path, "status", "--porcelain", "--untracked-files=all", "--ignored", env=env)
        head = (await _git(wt.path, "rev-parse", "HEAD", env=env)).strip()
        state = (wt.root.relative_to(wt.path) / ".subagents").as_posix().removeprefix("./")
        ours = {f"{state}/.gitignore", f"{state}/worktrees/.gitignore"}  # what a grandchild's worktree left
        status = "\n".join(ln for ln in status.splitlines() if ln and ln[3:] not in ours)
        if not status and head == wt.base:
            await _git(wt.repo, "worktree", "remove", "--force", str(wt.path))
            branch = await _drop_branch(wt)
            if branch == "its branch was removed":
                return "[worktree: no changes; the worktree and its branch were removed]"
            return f"[worktree: no changes; the worktree was removed, {branch}]"
        stat = (await _git(wt.path, "diff", "--stat", wt.base, env=env)).strip().splitlines()
        commits = (await _git(wt.path, "rev-list", "--count", f"{wt.base}..HEAD", env=env)).strip()
    untracked = [ln[3:] for ln in status.splitlines() if ln.startswith("??")]
    ignored = [ln[3:] for ln in status.splitlines() if ln.startswith("!!")]
    parts = [stat[-1].strip() if stat else "no changes to tracked files"]
    if untracked:
        parts.append(f"{len(untracked)} untracked file(s): {', '.join(untracked[:10])}")
    if ignored:
        parts.append(f"{len(ignored)} git-ignored file(s): {', '.join(ignored[:10])}")
    if commits not in ("", "0"):
        parts.append(f"{commits} commit(s) on the branch")
    return (f"[worktree kept with changes: {wt.path} on branch {wt.branch}; {'; '.join(parts)}. Review it there, "
            f"or merge it with `git merge {wt.branch}` (commit its changes first).]")
