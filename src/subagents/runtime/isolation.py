"""Worktree isolation in the agent lifecycle: make the checkout when the agent starts, tidy it when it ends.

The manager plans the worktree at spawn (a fast check that git and a repository exist, so a refusal
is a clear spawn error), :func:`enter` creates it when the agent's task starts and points the agent's
file tools and shell sandbox at it, and :func:`leave` removes it when nothing changed or says where
the changes are (a line appended to the result).  See :mod:`subagents.sandbox.worktree`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..engines.local import to_the_end
from ..sandbox.workspace import Workspace
from ..sandbox.worktree import Worktree, WorktreeError, create_worktree, finish_worktree
from .node import AgentNode
from .result import RunResult

__all__ = ["enter", "interrupted_line", "leave", "worktree_from_record", "worktree_record"]


async def enter(node: AgentNode, base: Workspace) -> str | None:
    """Create the node's worktree if it has none yet and confine its tools to it; an error sentence on failure."""
    wt = node.worktree
    assert wt is not None
    if not wt.base or not wt.path.exists():
        try:  # closed while git makes it: git finishes, so the run's end tidies it
            await to_the_end(create_worktree(wt))
        except (WorktreeError, OSError) as e:
            return f"could not create its worktree: {e}"
    if not wt.root.is_dir():  # the workspace is a directory HEAD does not have (not committed yet, or ignored)
        line = await leave(node)
        return (f"could not work in a worktree: the workspace {base.root} is not in the repository's last commit "
                f"(not committed yet, or git-ignored), so a checkout of HEAD has no such directory; commit it "
                f"first, or spawn the agent without isolation. {line}")
    from ..sandbox.shell import ShellSandbox  # loaded when a worktree is used

    ws = Workspace(wt.root, base.policy)
    ws.add_hidden(base.hidden)  # the run store and the credentials stay hidden from inside the worktree too
    ctx = node.core.ctx
    ctx.workspace = ws
    ctx.sandbox = ShellSandbox(ws, base.policy)
    return None


async def leave(node: AgentNode) -> str:
    """Remove the worktree if it holds no changes; the line for the result either way (never raises)."""
    wt = node.worktree
    assert wt is not None
    try:
        line = await asyncio.shield(finish_worktree(wt))
    except (WorktreeError, OSError) as e:
        return f"[worktree {wt.describe()}: could not be inspected ({e}); it was kept]"
    if not wt.path.exists():
        wt.base = ""  # removed (or gone): a resumed agent gets a fresh checkout
    return line


async def settle(node: AgentNode, result: RunResult, update: Callable[[AgentNode, dict[str, Any]], None]) -> None:
    """At the end of a run: :func:`leave` its worktree (if it still has one), the line added to ``result``'s
    text, the worktree's new state recorded through ``update``."""
    if node.worktree is not None and node.worktree.base:
        line = await leave(node)
        result.text = f"{result.text}\n\n{line}" if result.text else line
        update(node, {"worktree": worktree_record(node.worktree)})


def worktree_record(wt: Worktree | None) -> dict[str, Any]:
    """The worktree as the run record keeps it (so a restored agent goes back to its own checkout)."""
    if wt is None:
        return {}
    return {k: str(v) for k, v in dataclasses.asdict(wt).items()}


def worktree_from_record(d: dict[str, Any]) -> Worktree | None:
    if not d:
        return None
    return Worktree(Path(d["repo"]), Path(d["path"]), d["branch"], Path(d["root"]), d.get("base", ""))


def interrupted_line(d: dict[str, Any]) -> str:
    """For the result of a run recorded as interrupted (its process died): where its worktree was left, or ``""``."""
    wt = worktree_from_record(d)
    if wt is None or not wt.base or not wt.path.exists():
        return ""
    return (f"[worktree left as it was: {wt.describe()}; the run was interrupted before it could be inspected. "
            f"Review it there; `git worktree remove {wt.path}` and `git branch -D {wt.branch}` remove it.]")
