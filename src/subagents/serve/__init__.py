"""``subagents serve``: the runtime as an MCP server (needs the ``mcp`` extra: ``pip install 'subagents[mcp]'``).

:func:`build_server` makes the ``MCPServer`` for an open :class:`~subagents.Runtime`; :func:`serve` runs it
over stdio or streamable HTTP on loopback and closes the runtime when the server stops.
"""

from __future__ import annotations

from .server import ServeOptions, build_server, serve
from .service import TOOL_NAMES, AgentService

__all__ = ["TOOL_NAMES", "AgentService", "ServeOptions", "build_server", "serve"]
