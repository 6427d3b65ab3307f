"""``subagents config show``: the effective settings and where each value came from; ``config keys``: every key."""

from __future__ import annotations

import json
from typing import Any

import click

from .common import cwd_option, workdir
from .render import terminal_safe

__all__ = ["config"]


@click.group()
def config() -> None:
    """Inspect the configuration."""


@config.command("show")
@cwd_option("Project directory whose .subagents/config.toml is read.")
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
def show(as_json: bool) -> int:
    """Print the effective settings and their source (API keys are masked)."""
    from ..config import load_settings, user_config_dir

    cwd = workdir()
    settings = load_settings(cwd)
    files = {"project": cwd.resolve() / ".subagents" / "config.toml", "user": user_config_dir() / "config.toml"}
    if as_json:
        out: dict[str, Any] = {"settings": settings.to_dict(masked=True),
                               "files": {k: {"path": str(p), "exists": p.is_file()} for k, p in files.items()},
                               "trusted": settings.trusted, "ignored": settings.ignored}
        click.echo(json.dumps(out, indent=2))
        return 0
    rows = [(k, _fmt(v), s) for k, v, s in settings.items(masked=True)]
    width_k = max(len(r[0]) for r in rows)
    width_v = min(max(len(r[1]) for r in rows), 48)
    for k, v, s in rows:
        click.echo(f"{k:<{width_k}}  {v:<{width_v}}  ({s})")
    click.echo("")
    for name, p in files.items():
        click.echo(f"{name} file: {p} ({'found' if p.is_file() else 'not found'})")
    click.echo(f"project trusted: {'yes' if settings.trusted else 'no (subagents trust)'}")
    for what, where in settings.ignored.items():
        click.echo(terminal_safe(f"ignored (not trusted): {what}  ({where})"))
    return 0


@config.command("keys")
@click.option("--markdown", is_flag=True, help="Print the table of docs/configuration.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the keys as JSON.")
def keys(markdown: bool, as_json: bool) -> int:
    """List every setting: its type, default, environment variable and meaning."""
    from ..config_keys import KEYS, markdown_table

    if markdown:
        click.echo(markdown_table())
        return 0
    if as_json:
        click.echo(json.dumps([{"key": k.dotted, "type": k.kind, "default": k.default, "env": list(k.env_vars),
                                "required": k.required, "user_only": k.user_only, "doc": k.doc} for k in KEYS],
                              indent=2))
        return 0
    width = max(len(k.dotted) for k in KEYS)
    for k in KEYS:
        env = "".join(f"  ${v}" for v in k.env_vars)
        click.echo(f"{k.dotted:<{width}}  {k.kind} = {k.shown_default}{env}")
        click.echo(f"{'':<{width}}  {k.doc}")
    return 0


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v) if isinstance(v, (str, list, dict)) else str(v)
