"""``subagents serve``: the runtime as an MCP server (needs the ``mcp`` extra: ``pip install 'subagents[mcp]'``).

:func:`build_server` makes the ``MCPServer`` for an open :class:`~subagents.Runtime`; :func:`serve` runs it
over stdio or streamable HTTP on loopback and closes the runtime when the server stops.  The names are loaded
on first use, so :mod:`subagents.serve.modelref` (models named by import path) works without the MCP SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import ServeOptions, build_server, serve
    from .service import TOOL_NAMES, AgentService

__all__ = ["TOOL_NAMES", "AgentService", "ServeOptions", "build_server", "serve"]

_WHERE = {"TOOL_NAMES": "service", "AgentService": "service", "ServeOptions": "server", "build_server": "server",
          "serve": "server"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
