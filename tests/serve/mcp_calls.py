"""Helpers the serve tests share: call a tool through an MCP client and read its answer; start the server."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Protocol

from mcp.types import CallToolResult

HERE = Path(__file__).resolve().parent


class ToolCaller(Protocol):
    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult: ...


def text(r: CallToolResult) -> str:
    return "\n".join(getattr(b, "text", "") for b in r.content)


async def call(c: ToolCaller, name: str, **args: Any) -> tuple[str, dict[str, Any]]:
    """A tool call that must succeed: its text and its structured content."""
    r = await c.call_tool(name, args)
    assert not r.is_error, text(r)
    assert r.structured_content is not None
    return text(r), r.structured_content


async def error(c: ToolCaller, name: str, **args: Any) -> str:
    """A tool call that must be a tool error: its text."""
    r = await c.call_tool(name, args)
    assert r.is_error, text(r)
    return text(r)


def serve_command(project: Path, *extra: str) -> list[str]:
    """``subagents serve`` as a process, with the scripted model and the project's own store."""
    return [sys.executable, "-m", "subagents.cli.main", "serve", "--model", "serve_scripts:model",
            "--cwd", str(project), "--store", f"sqlite:///{project / 'state.db'}", *extra]


def serve_env() -> dict[str, str]:
    """The environment of the server process: this one, with the scripts importable."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}
