"""``McpTools``: a runtime's MCP servers, and the MCP tools each agent gets.

The runtime holds one ``McpTools`` and, as each agent starts, asks :meth:`McpTools.grant` for that
agent's registry extended with its MCP tools.  Which servers an agent may use:

- a root agent: every configured server (``[mcp.servers]``, ``.mcp.json``), unless its definition's
  ``tools:`` lists MCP entries, then only the servers they name (``mcp__github``,
  ``mcp__github__*`` or ``mcp__github__create_issue``);
- a sub-agent: the configured servers whose tools its parent has (never wider than the parent), cut
  the same way by its own ``tools:``;
- either: the servers its definition names in ``mcp_servers:`` (a configured name, or an inline
  configuration), as in Claude Code: the definition's own grant.

``disallowed_tools`` removes tools (``mcp__github__delete_repo``, or a whole server ``mcp__github``).
A server starts when the first agent that may use it starts, is shared by all of them, and stops with
:meth:`McpTools.aclose`.  A server that cannot start is left out of the agents' tools, with a warning
logged (``subagents.mcp``, once) that says why.  A tool the model could not be offered is left out with a
warning too (not valid MCP, an invalid input schema, no name, a description and schema longer than
:attr:`McpTools.MAX_TOOL_CHARS`); a name too long for the model APIs, or taken by another tool of the server,
is shortened (:func:`~subagents.mcp.tools.tool_names`).  An agent gets at most :attr:`McpTools.MAX_TOOLS`
tools of one server (each goes into every model request): the rest are left out with a warning, and its
``tools:`` chooses which it gets.  A server that says its tools changed (``notifications/tools/list_changed``)
is listed again when the next agent starts; the agents already running keep the tools they got.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..exceptions import ConfigError, UserError
from ..sandbox.policy import SandboxPolicy
from ..sandbox.workspace import Workspace
from ..tools.base import Tool, ToolRegistry
from ..tools.schema import check_schema
from .client import McpConnection, McpStartError
from .config import McpServerConfig, definition_servers, project_servers, same_server
from .launch import Launcher
from .tools import McpTool, tool_names

__all__ = ["McpTools"]

log = logging.getLogger("subagents.mcp")


def _patterns(entries: Iterable[str]) -> list[str]:
    """MCP entries of a tools list as globs: ``mcp__x`` -> ``mcp__x__*``."""
    out = []
    for e in entries:
        if e.startswith("mcp__"):
            out.append(e if "__" in e[5:] else f"{e}__*")
    return out


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class McpTools:
    """The MCP servers of one runtime (see the module docstring)."""

    MAX_TOOLS = 200
    """The most tools an agent gets from one server (the rest are left out with a warning; ``tools:`` picks)."""
    MAX_TOOL_CHARS = 16 * 1024
    """The longest description plus input schema (JSON) of a tool offered to the model, in characters."""

    def __init__(self, servers: Mapping[str, McpServerConfig], *, workspace: Workspace,
                 policy: SandboxPolicy | None = None) -> None:
        self.servers = dict(servers)
        self.launcher = Launcher(workspace, policy or workspace.policy)
        self._connections: dict[str, McpConnection] = {}
        self._tools: dict[str, list[Tool]] = {}
        self._warned: set[str] = set()  # the servers whose failure to start was logged
        self._capped: set[tuple[str, str]] = set()  # (server, agent definition) whose cut was logged

    @classmethod
    def for_project(cls, workdir: Path, workspace: Workspace, policy: SandboxPolicy | None = None, *,
                    config_files: Sequence[Path] = (),
                    settings_servers: Mapping[str, McpServerConfig] | None = None) -> McpTools:
        """The servers of ``.mcp.json`` and of ``[mcp.servers]`` (``settings_servers``, else read from
        ``config_files``); :class:`~subagents.exceptions.ConfigError` names the file and server at fault."""
        return cls(project_servers(workdir, config_files, settings_servers=settings_servers),
                   workspace=workspace, policy=policy)

    @property
    def active(self) -> bool:
        """Whether any server is configured (else :meth:`grant` costs nothing)."""
        return bool(self.servers)

    def connection(self, cfg: McpServerConfig) -> McpConnection:
        """The shared connection to ``cfg`` (made, not started, on first request)."""
        conn = self._connections.get(cfg.name)
        if conn is not None:
            if not same_server(conn.cfg, cfg):
                raise ConfigError(f"two different MCP servers are named {cfg.name!r} ({conn.cfg.source} and "
                                  f"{cfg.source}); rename one of them")
            return conn
        stdio = None if cfg.url is not None else (lambda: self.launcher.parameters(cfg))
        conn = self._connections[cfg.name] = McpConnection(cfg, stdio)
        return conn

    async def tools_of(self, cfg: McpServerConfig) -> list[Tool]:
        """The tools of a server, starting it if needed; :class:`McpStartError` when it cannot start."""
        conn = self.connection(cfg)
        cached = self._tools.get(cfg.name)
        if cached is None:  # listed once; a server that died later keeps its tools (their calls say why)
            cached = self._tools[cfg.name] = self._offered(conn, await conn.start())
            self._warned.discard(cfg.name)  # (it started: a later failure is news again)
        elif conn.tools_changed:  # the server said so: listed again for the agents starting from now
            cached = self._tools[cfg.name] = self._offered(conn, await conn.relist())
        return cached

    def _offered(self, conn: McpConnection, listed: Sequence[Any]) -> list[Tool]:
        """The tools of ``listed`` the model can be offered (each other one logged)."""
        out: list[Tool] = []
        server = conn.cfg.name
        for spec, name in zip(listed, tool_names(server, (s.name for s in listed)), strict=True):
            if name is None:
                log.warning("a tool of the MCP server %r is left out: it has no name", server)
                continue
            t = McpTool(conn, spec, name)
            try:
                check_schema(t.parameters, tool=t.name)
            except (UserError, ValueError) as e:
                log.warning("MCP tool %s left out: its input schema is invalid (%s)", t.name, e)
                continue
            size = len(t.description) + len(json.dumps(t.parameters, ensure_ascii=False, default=str))
            if size > self.MAX_TOOL_CHARS:
                log.warning("MCP tool %s left out: its description and input schema are %d characters, more than "
                            "the %d a tool may take in each model request", t.name, size, self.MAX_TOOL_CHARS)
                continue
            out.append(t)
        return out

    def _cap(self, server: str, tools: list[Tool], source: str) -> list[Tool]:
        """At most :attr:`MAX_TOOLS` of one server's ``tools`` for an agent (the cut logged once per agent type)."""
        if len(tools) <= self.MAX_TOOLS:
            return tools
        left = tools[self.MAX_TOOLS:]
        if (server, source) not in self._capped:
            self._capped.add((server, source))
            names = ", ".join(t.name for t in left[:5]) + (", ..." if len(left) > 5 else "")
            log.warning("%d tools of the MCP server %r are left out of %s (%s): an agent gets at most %d tools of "
                        "one server; list the ones it needs in its definition's tools: (mcp__%s__NAME, or a "
                        "pattern such as mcp__%s__issue_*)", len(left), server, source or "the agent", names,
                        self.MAX_TOOLS, server, server)
        return tools[:self.MAX_TOOLS]

    def _wanted(self, tools: Sequence[str] | None, parent: ToolRegistry | None,
                own: list[McpServerConfig]) -> list[McpServerConfig]:
        listed = _patterns(tools or ())
        out = [cfg for cfg in own]
        for name, cfg in self.servers.items():
            prefix = f"mcp__{name}__"
            if any(c.name == name for c in out):
                continue
            if parent is not None and not any(n.startswith(prefix) for n in parent.grantable):
                continue
            if tools is not None and not any(p.startswith(prefix) or fnmatch.fnmatchcase(prefix + "x", p)
                                             for p in listed):
                continue
            out.append(cfg)
        return out

    def _own_servers(self, extra: Mapping[str, Any], source: str) -> list[McpServerConfig]:
        out: list[McpServerConfig] = []
        for item in definition_servers(extra, source=source):
            if isinstance(item, McpServerConfig):
                out.append(item)
            elif item in self.servers:
                out.append(self.servers[item])
            else:
                known = ", ".join(sorted(self.servers)) or "none"
                raise ConfigError(f"{source}: mcp_servers names the MCP server {item!r}, which is not configured "
                                  f"(configured: {known}); add it to .mcp.json or [mcp.servers.{item}]")
        return out

    async def grant(self, registry: ToolRegistry, *, tools: Sequence[str] | None = None,
                    disallowed: Sequence[str] = (), extra: Mapping[str, Any] | None = None,
                    source: str = "", parent: ToolRegistry | None = None) -> ToolRegistry:
        """``registry`` extended with the MCP tools of a starting agent (see the module docstring).

        ``tools`` / ``disallowed`` / ``extra``: its definition's ``tools``, ``disallowed_tools`` and unknown
        front-matter keys (``mcp_servers``); ``parent``: its parent's registry (``None`` for a root).
        """
        own = self._own_servers(extra or {}, source or "agent definition")
        if not own and not self.servers:
            return registry
        listed, deny = _patterns(tools or ()), [*_patterns(disallowed), *disallowed]
        picked: list[Tool] = []
        for cfg in self._wanted(tools, parent, own):
            try:
                offered = await self.tools_of(cfg)
            except McpStartError as e:
                if cfg.name not in self._warned:
                    self._warned.add(cfg.name)
                    log.warning("%s; its tools are left out of the agents", e)
                continue
            mine = any(c is cfg for c in own)
            cut = tools is not None and any(p.startswith(f"mcp__{cfg.name}__") for p in listed)
            kept: list[Tool] = []
            for t in offered:
                if cut and not _matches(t.name, listed):
                    continue
                if not mine and parent is not None and t.name not in parent.grantable:
                    continue
                if _matches(t.name, deny):
                    continue
                kept.append(t)
            picked += self._cap(cfg.name, kept, source)
        return registry.extended(picked) if picked else registry

    async def aclose(self) -> None:
        """Stop every server that was started, all at once (idempotent; a later :meth:`grant` starts them again)."""
        conns = list(self._connections.values())
        self._connections.clear()
        self._tools.clear()
        self._warned.clear()
        self._capped.clear()
        try:
            done = await asyncio.gather(*(c.aclose() for c in conns), return_exceptions=True)
            for conn, err in zip(conns, done, strict=True):
                if isinstance(err, Exception):
                    log.warning("MCP server %r did not stop cleanly: %s", conn.cfg.name, err)
        finally:
            self.launcher.cleanup()
