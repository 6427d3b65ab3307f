"""``subagents trust``: let a project's own settings widen what agents may do (see :mod:`subagents.trust`)."""

from __future__ import annotations

import json

import click

from .common import cwd_option, workdir

__all__ = ["trust"]


@click.command()
@cwd_option("The project directory to trust (default: the current directory).")
@click.option("--remove", is_flag=True, help="Stop trusting the project.")
@click.option("--list", "list_", is_flag=True, help="List the trusted projects.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def trust(remove: bool, list_: bool, as_json: bool) -> int:
    """Trust this project's settings (hooks, MCP servers, sandbox and permission settings).

    A project that is not trusted still runs, but the settings of its .subagents/config.toml, .mcp.json and
    agent definitions that would widen what agents may do are ignored, each named in a warning: [sandbox]
    mode = "off", network, env_passthrough, [permissions] allow rules and wider modes, hooks, MCP servers,
    provider base URLs and keys, store, engine and telemetry addresses.  Trust only a project whose files
    you have read: its hooks and MCP servers run as you.  Trust covers that directory only, not the
    directories below it.  The list lives in trusted-projects in your config directory.
    """
    from ..config import user_config_dir
    from ..trust import add_trusted, remove_trusted, trusted_projects
    from .render import terminal_safe  # a directory's name may hold escape sequences: shown, never sent

    config_dir = user_config_dir()
    if list_:
        listed = [str(p) for p in trusted_projects(config_dir)]
        click.echo(json.dumps({"trusted": listed}) if as_json else terminal_safe("\n".join(listed)) or
                   "no trusted projects.")
        return 0
    project = workdir().resolve()
    changed = remove_trusted(project, config_dir) if remove else add_trusted(project, config_dir)
    if as_json:
        click.echo(json.dumps({"project": str(project), "trusted": not remove, "changed": changed}))
    elif remove:
        click.echo(terminal_safe(f"{project} is no longer trusted." if changed else f"{project} was not trusted."))
    else:
        click.echo(terminal_safe(f"{project} is trusted now: its settings apply in full." if changed
                                 else f"{project} was already trusted."))
    return 0
