"""Tools from MCP servers (the official ``mcp`` SDK, installed with ``pip install 'subagents[mcp]'``).

:func:`open_mcp` gives a runtime its :class:`~subagents.mcp.hub.McpTools` (``None`` without servers), which
extends each starting agent's tools with its servers' (``mcp__<server>__<tool>``); :mod:`.config` reads
``[mcp.servers.*]``, ``.mcp.json`` and a definition's ``mcp_servers:``; :mod:`.client` is one server's
shared connection; :mod:`.launch` confines a stdio server's process.  Importing this package does not
import the SDK (only :mod:`.hub`, :mod:`.client`, :mod:`.tools` and :mod:`.launch` do), and it never
imports the runtime.
"""

from .config import (
    McpServerConfig,
    definition_servers,
    load_mcp_json,
    parse_mcp_section,
    parse_server,
    parse_servers,
    project_servers,
)
from .setup import open_mcp

__all__ = ["McpServerConfig", "definition_servers", "load_mcp_json", "open_mcp", "parse_mcp_section",
           "parse_server", "parse_servers", "project_servers"]
