"""``subagents agents list|show``: the resolved agent definitions, their source and what they shadow."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from .common import cwd_option, workdir
from .preflight import quiet_loader

if TYPE_CHECKING:
    from ..definitions.loader import DefinitionSet

__all__ = ["agents"]

_CWD = cwd_option("Project directory whose .subagents/agents/ (and .claude/agents/) are read.")


def _load() -> DefinitionSet:
    from ..definitions import load_definitions

    with quiet_loader():  # the loader logs each skipped file; the commands print them themselves, once
        return load_definitions(workdir().resolve())


def _echo(text: str, *, err: bool = False) -> None:
    """A line of a definition's text (from a project's files): on a terminal, its control characters are shown
    escaped, not obeyed (an agent file with escape codes cannot set the title or clear the screen)."""
    from .common import isatty
    from .render import terminal_safe

    click.echo(terminal_safe(text) if isatty(sys.stderr if err else sys.stdout) else text, err=err)


def _known_tools() -> tuple[set[str], set[str] | None]:
    """The names of the runtime's tools, and the configured MCP servers (``None``: the config is unreadable)."""
    from ..config import load_settings
    from ..exceptions import ConfigError
    from ..mcp.config import project_servers
    from ..tools.agents import AGENT_TOOLS
    from ..tools.builtin import builtin_tools
    from ..tools.team import TEAM_TOOLS

    names = {t.name for t in (*builtin_tools(), *AGENT_TOOLS, *TEAM_TOOLS)}
    try:
        cwd = workdir().resolve()
        settings = load_settings(cwd)
        servers: set[str] | None = set(project_servers(cwd, settings_servers=settings.mcp_servers,
                                                       mcp_json=settings.trusted))
    except (ConfigError, OSError):
        servers = None  # the run reports a broken config itself; here only the MCP names go unchecked
    return names, servers


def _warn(defs: DefinitionSet, names: list[str]) -> None:
    """The loading warnings, then one line per definition that lists tools it cannot have."""
    from ..definitions.toolcheck import tool_warning

    for w in defs.warnings:
        _echo(f"warning: {w}", err=True)
    known, servers = _known_tools()
    for name in names:
        msg = tool_warning(defs.by_name[name], known, mcp_servers=servers)
        if msg:
            _echo(f"warning: {msg}", err=True)


@click.group()
def agents() -> None:
    """Inspect agent definitions (built-in, project, user, extensions)."""


@agents.command("list")
@_CWD
@click.option("--json", "as_json", is_flag=True, help="Print the definitions as JSON.")
def list_(as_json: bool) -> int:
    """List every agent type with its source and the definitions it shadows."""
    defs = _load()
    _warn(defs, defs.names())
    if as_json:
        click.echo(json.dumps([{**d.to_dict(), "shadows": [s.source for s in defs.shadowed.get(d.name, [])]}
                               for d in (defs.by_name[n] for n in defs.names())], indent=2))
        return 0
    width = max(len(n) for n in defs.names())
    for name in defs.names():
        d = defs.by_name[name]
        tools = "all tools" if d.tools is None else ", ".join(d.tools)
        if d.disallowed_tools:
            tools += f" (minus {', '.join(d.disallowed_tools)})"
        if d.delegate_tools:
            tools += f"; holds for its sub-agents: {', '.join(d.delegate_tools)}"
        _echo(f"{name:<{width}}  {d.description}")
        _echo(f"{'':<{width}}  source: {d.source}; model: {d.model}; tools: {tools}")
        for s in defs.shadowed.get(name, []):
            _echo(f"{'':<{width}}  shadows: {s.source}")
    return 0


@agents.command("show")
@click.argument("name")
@_CWD
def show(name: str) -> int:
    """Print one resolved definition: its keys and its system prompt."""
    defs = _load()
    _warn(defs, [name] if name in defs else [])
    d = defs.get(name)  # DefinitionError (a UserError) -> exit 2 with the known types
    for key, value in d.to_dict().items():
        if key != "system_prompt" and value not in (None, [], ""):
            _echo(f"{key}: {value}")
    for s in defs.shadowed.get(name, []):
        _echo(f"shadows: {s.source}")
    click.echo("")
    _echo(d.system_prompt)
    return 0
