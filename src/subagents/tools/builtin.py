"""The built-in tools every agent type starts from (before its fence narrows them)."""

from __future__ import annotations

from .base import Tool
from .files import edit_file, glob, grep, list_dir, read_file, write_file
from .shell import bash
from .todo import todo_write

__all__ = ["BUILTIN_TOOLS", "builtin_tools"]

BUILTIN_TOOLS: tuple[Tool, ...] = (
    read_file,
    list_dir,
    glob,
    grep,
    write_file,
    edit_file,
    bash,
    todo_write,
)
"""Reading first, then editing, executing and planning: the order the model sees them in."""


def builtin_tools() -> list[Tool]:
    """A fresh list of the built-in tools (the tools themselves are stateless and shared)."""
    return list(BUILTIN_TOOLS)
