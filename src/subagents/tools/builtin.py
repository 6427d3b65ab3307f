"""The built-in tools every agent type starts from (before its fence narrows them)."""

from __future__ import annotations

import os
from collections.abc import Collection

from .base import Tool
from .files import edit_file, glob, grep, list_dir, read_file, write_file
from .notepad import notepad_write
from .repo_map import repo_map
from .shell import bash
from .skills import SkillTool
from .todo import todo_read, todo_write
from .validation import vouch
from .web import web_fetch, web_fetch_tool

__all__ = ["BUILTIN_TOOLS", "builtin_tools"]

BUILTIN_TOOLS: tuple[Tool, ...] = (
    read_file,
    list_dir,
    glob,
    grep,
    repo_map,
    write_file,
    edit_file,
    bash,
    web_fetch,
    todo_write,
    todo_read,
    notepad_write,
    SkillTool(),
)
"""Reading first, then editing, executing and planning, then skills: the order the model sees them in."""
vouch(*(t.parameters for t in BUILTIN_TOOLS))  # (compiled at their first call, not as each Runtime opens)


def builtin_tools(workdir: str | os.PathLike[str] | None = None, *,
                  allow_private_hosts: Collection[str] = ()) -> list[Tool]:
    """A fresh list of the built-in tools (the tools themselves are stateless and shared).

    With ``workdir`` the ``skill`` tool's description lists the skills found from that project;
    ``allow_private_hosts`` (``[web] allow_private_hosts``) names hosts ``web_fetch`` may reach although
    they resolve to loopback or private addresses.
    """
    tools = list(BUILTIN_TOOLS)
    if workdir is not None:
        tools = [SkillTool(workdir) if t.name == "skill" else t for t in tools]
    if allow_private_hosts:
        tools = [web_fetch_tool(allow_private_hosts=allow_private_hosts) if t.name == "web_fetch" else t
                 for t in tools]
    return tools
