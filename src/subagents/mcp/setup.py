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
from .config import McpServerConfig, definition_servers, project_servers, same_server

if TYPE_CHECKING:
    from .hub import McpTools

__all__ = ["open_mcp"]


def open_mcp(workdir: Path, workspace: Workspace, policy: SandboxPolicy | None = None, *,
             settings_servers: Mapping[str, McpServerConfig] | None = None, config_files: Iterable[Path] = (),
             mcp_json: bool = True, definitions: Iterable[tuple[Mapping[str, Any], str]] = ()) -> McpTools | None:
    """The runtime's :class:`~subagents.mcp.hub.McpTools`, or ``None`` when no server is configured.

    Servers come from ``.mcp.json`` (unless ``mcp_json`` is false: an untrusted project) and
    ``settings_servers`` (the settings' ``[mcp.servers]``; without them ``config_files`` are read);
    ``definitions``: ``(extra, source)`` of each agent definition, whose ``mcp_servers:`` are checked here (a
    bad entry is a :class:`~subagents.exceptions.DefinitionError`).
    Nothing is started: servers start with the first agent that may use them.  Two different servers of one
    name (a definition's inline server and a configured one, or two definitions') are a
    :class:`~subagents.exceptions.ConfigError` naming both files: their tools would have the same names.
    """
    servers = project_servers(workdir, list(config_files), settings_servers=settings_servers, mcp_json=mcp_json)
    inline = [item for extra, source in definitions for item in definition_servers(extra, source=source)]
    if not servers and not inline:
        return None
    _check_names(servers, [c for c in inline if isinstance(c, McpServerConfig)])
    try:
        from .hub import McpTools
    except ImportError as e:
        where = ", ".join(sorted({c.source for c in servers.values()} | {
            c.source if isinstance(c, McpServerConfig) else "an agent definition" for c in inline}))
        raise ConfigError(f"MCP servers are configured ({where}) but the mcp SDK cannot be imported ({e}); "
                          "install it with: pip install 'subagents[mcp]'") from None
    return McpTools(servers, workspace=workspace, policy=policy)


def _check_names(servers: Mapping[str, McpServerConfig], inline: list[McpServerConfig]) -> None:
    seen = dict(servers)
    for cfg in inline:
        other = seen.setdefault(cfg.name, cfg)
        if not same_server(other, cfg):
            raise ConfigError(f"two different MCP servers are named {cfg.name!r} ({other.source} and {cfg.source}); "
                              "rename one of them, or name the configured server in mcp_servers: instead of "
                              "configuring it again")
