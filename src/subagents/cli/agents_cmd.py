"""``subagents agents list|show``: the resolved agent definitions, their source and what they shadow."""

from __future__ import annotations

import json
from pathlib import Path

import click

__all__ = ["agents"]

_CWD = click.option("--cwd", type=click.Path(exists=True, file_okay=False, path_type=Path), default=".",
                    help="Project directory whose .subagents/agents/ (and .claude/agents/) are read.")


@click.group()
def agents() -> None:
    """Inspect agent definitions (built-in, project, user, extensions)."""


@agents.command("list")
@_CWD
@click.option("--json", "as_json", is_flag=True, help="Print the definitions as JSON.")
def list_(cwd: Path, as_json: bool) -> int:
    """List every agent type with its source and the definitions it shadows."""
    from ..definitions import load_definitions

    defs = load_definitions(cwd.resolve())
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
        click.echo(f"{name:<{width}}  {d.description}")
        click.echo(f"{'':<{width}}  source: {d.source}; model: {d.model}; tools: {tools}")
        for s in defs.shadowed.get(name, []):
            click.echo(f"{'':<{width}}  shadows: {s.source}")
    return 0


@agents.command("show")
@click.argument("name")
@_CWD
def show(name: str, cwd: Path) -> int:
    """Print one resolved definition: its keys and its system prompt."""
    from ..definitions import load_definitions

    defs = load_definitions(cwd.resolve())
    d = defs.get(name)  # DefinitionError (a UserError) -> exit 2 with the known types
    for key, value in d.to_dict().items():
        if key != "system_prompt" and value not in (None, [], ""):
            click.echo(f"{key}: {value}")
    for s in defs.shadowed.get(name, []):
        click.echo(f"shadows: {s.source}")
    click.echo("")
    click.echo(d.system_prompt)
    return 0
