"""``subagents agents list|show``: the resolved agent definitions, their source and what they shadow."""

from __future__ import annotations

import json
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


@click.group()
def agents() -> None:
    """Inspect agent definitions (built-in, project, user, extensions)."""


@agents.command("list")
@_CWD
@click.option("--json", "as_json", is_flag=True, help="Print the definitions as JSON.")
def list_(as_json: bool) -> int:
    """List every agent type with its source and the definitions it shadows."""
    defs = _load()
    for w in defs.warnings:
        click.echo(f"warning: {w}", err=True)
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
        click.echo(f"{name:<{width}}  {d.description}")
        click.echo(f"{'':<{width}}  source: {d.source}; model: {d.model}; tools: {tools}")
        for s in defs.shadowed.get(name, []):
            click.echo(f"{'':<{width}}  shadows: {s.source}")
    return 0


@agents.command("show")
@click.argument("name")
@_CWD
def show(name: str) -> int:
    """Print one resolved definition: its keys and its system prompt."""
    defs = _load()
    for w in defs.warnings:
        click.echo(f"warning: {w}", err=True)
    d = defs.get(name)  # DefinitionError (a UserError) -> exit 2 with the known types
    for key, value in d.to_dict().items():
        if key != "system_prompt" and value not in (None, [], ""):
            click.echo(f"{key}: {value}")
    for s in defs.shadowed.get(name, []):
        click.echo(f"shadows: {s.source}")
    click.echo("")
    click.echo(d.system_prompt)
    return 0
