"""``open_mcp``: the one call a runtime makes to get its MCP servers (``None`` when it has none).

Importing this module does not import the ``mcp`` SDK: a project without MCP servers runs without the
``mcp`` extra installed; one with servers gets a sentence saying how to install it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigError
from ..sandbox.policy import SandboxPolicy
from ..sandbox.workspace import Workspace
from .config import McpServerConfig, definition_servers, project_servers

if TYPE_CHECKING:
    from .hub import McpTools

__all__ = ["open_mcp"]


def open_mcp(workdir: Path, workspace: Workspace, policy: SandboxPolicy | None = None, *,
             settings_servers: Mapping[str, McpServerConfig] | None = None, config_files: Iterable[Path] = (),
             definitions: Iterable[tuple[Mapping[str, Any], str]] = ()) -> McpTools | None:
    """The runtime's :class:`~subagents.mcp.hub.McpTools`, or ``None`` when no server is configured.

    Servers come from ``.mcp.json`` and ``settings_servers`` (the settings' ``[mcp.servers]``; without
    them ``config_files`` are read); ``definitions``: ``(extra, source)`` of each agent definition, whose
    ``mcp_servers:`` are checked here (a bad entry is a :class:`~subagents.exceptions.DefinitionError`).
    Nothing is started: servers start with the first agent that may use them.
    """
    servers = project_servers(workdir, list(config_files), settings_servers=settings_servers)
    inline = [item for extra, source in definitions for item in definition_servers(extra, source=source)]
    if not servers and not inline:
        return None
    try:
        from .hub import McpTools
    except ImportError as e:
        where = ", ".join(sorted({c.source for c in servers.values()} | {
            c.source if isinstance(c, McpServerConfig) else "an agent definition" for c in inline}))
        raise ConfigError(f"MCP servers are configured ({where}) but the mcp SDK cannot be imported ({e}); "
                          "install it with: pip install 'subagents[mcp]'") from None
    return McpTools(servers, workspace=workspace, policy=policy)
