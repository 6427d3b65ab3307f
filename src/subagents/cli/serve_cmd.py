"""``subagents serve``: expose the runtime as an MCP server (stdio, or ``--http PORT`` on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path
from typing import Any

import click

from ..authority.names import MODE_ALIASES, MODES
from ..config import NO_MODEL_HELP
from .common import cwd_option, workdir

__all__ = ["serve"]

MODE_CHOICES = [*MODES, *sorted(k for k in MODE_ALIASES if k[0].islower() and k[1:] != k[1:].lower())]


@click.command()
@click.option("--model", "model_name", metavar="PROVIDER:MODEL",
              help="Model of the agents, e.g. anthropic:claude-sonnet-4-5, openai:<model>@<base_url>, or a Python "
                   "object as module.path:attribute (default: [model] default).")
@cwd_option("Workspace directory the agents work in (default: the current directory).")
@click.option("--store", "store", metavar="URL",
              help="Run store URL (default: [store] url, or sqlite:///.subagents/state.db under the project).")
@click.option("--agents", "agent_paths", multiple=True, metavar="PATH",
              type=click.Path(exists=True, path_type=Path),
              help="An agent definition file (Markdown with YAML front matter) or a directory of them, offered "
                   "as agent types besides the project's (repeatable).")
@click.option("--http", "http_port", type=click.IntRange(min=0, max=65535), metavar="PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp; 0 picks a free port) instead of stdio; with "
                   "SUBAGENTS_SERVE_TOKEN set, requests must carry 'Authorization: Bearer <its value>'.")
@click.option("--permission-mode", type=click.Choice(MODE_CHOICES), default=None,
              help="default: edits and commands are refused (nobody can approve them here) unless a rule allows "
                   "them; plan: change nothing; autoEdit: edits allowed; yolo: everything allowed.")
@click.option("--allow", "allow", multiple=True, metavar="RULE",
              help="Allow calls matching RULE without asking, e.g. 'bash(git status*)' (repeatable).")
@click.option("--deny", "deny", multiple=True, metavar="RULE", help="Refuse calls matching RULE (repeatable).")
@click.option("--sandbox", "sandbox_mode", type=click.Choice(["auto", "bwrap", "landlock", "off"]), default=None,
              help="How bash is confined (default: [sandbox] mode, else auto).")
@click.option("--max-threads", type=click.IntRange(min=1), help="Sub-agents running at once.")
@click.option("--max-depth", type=click.IntRange(min=0), help="How deep sub-agents may nest.")
@click.option("--max-agents", type=click.IntRange(min=1), default=64, show_default=True,
              help="Agents the clients may have running at once (their sub-agents count against --max-threads).")
@click.pass_context
def serve(ctx: click.Context, model_name: str | None, store: str | None, agent_paths: tuple[Path, ...],
          http_port: int | None, permission_mode: str | None, allow: tuple[str, ...], deny: tuple[str, ...],
          sandbox_mode: str | None, max_threads: int | None, max_depth: int | None, max_agents: int) -> int:
    """Serve the runtime as MCP tools for Claude Code, Codex or any MCP client.

    Tools: spawn_agent, send_input, wait, close_agent, resume_agent, list_agents, status, result.
    Background agents keep running between calls; every run is recorded in the project's store
    (subagents runs list). The MCP protocol goes over stdin/stdout unless --http PORT is given.

    Calls that need approval are refused (nobody can be asked); allow them with --permission-mode
    or --allow rules.

    Example: claude mcp add subagents -- subagents serve --cwd /path/to/project
    """
    from ..config import load_settings
    from ..exceptions import ConfigError, UserError

    try:
        from ..serve import ServeOptions
        from ..serve import serve as serve_async
        from ..serve.modelref import is_import_path, load_model_ref
        from ..serve.server import TOKEN_ENV
    except ImportError as e:
        raise UserError(f"subagents serve needs the MCP SDK ({e}); install it with pip install 'subagents[mcp]'"
                        ) from None
    from ..runtime.runtime import Runtime
    from .preflight import check_model

    cwd = workdir(ctx)
    given: Any = (ctx.obj or {}).get("model") or model_name  # main(model=...) in tests, else --model
    named = given if isinstance(given, str) and not is_import_path(given) else None
    settings = load_settings(cwd, overrides={"model_default": named, "permission_mode": permission_mode,
                                             "sandbox_mode": sandbox_mode, "max_threads": max_threads,
                                             "max_depth": max_depth})
    model: Any = given
    if given is None or named is not None:  # provider:model, from --model or the settings: never imported (a
        model = settings.model_default  # project's config naming a module of its own would run its code)
        if model is None:
            raise ConfigError(NO_MODEL_HELP)
        check_model(model, settings.providers)  # malformed, no SDK, no key: exit 2 before serving
    elif isinstance(given, str):  # --model module.path:attribute
        model = load_model_ref(given)
    if settings.approval_timeout_s is None:
        settings.approval_timeout_s = 0.0  # nobody to ask: refuse at once (the refusal says how to allow)
    agents = _definitions(agent_paths)
    with warnings.catch_warnings():  # said below, on stderr (stdout may carry the protocol)
        warnings.simplefilter("ignore")
        rt = Runtime(model, workdir=cwd, settings=settings, store=store, allow=allow, deny=deny, agents=agents)
    if rt.sandbox_warning:
        click.echo(f"warning: {rt.sandbox_warning}", err=True)
    token = os.environ.get(TOKEN_ENV) or None  # (not an option: a command line is visible to every local user)
    asyncio.run(serve_async(rt, ServeOptions(http_port=http_port, token=token, max_agents=max_agents)))
    return 0


def _definitions(paths: tuple[Path, ...]) -> tuple[Any, ...]:
    from ..definitions.loader import parse_definition_file
    from ..exceptions import DefinitionError

    out = []
    for p in paths:
        files = sorted(p.glob("*.md")) if p.is_dir() else [p]
        if p.is_dir() and not files:
            raise DefinitionError(f"{p}: no agent definition files (*.md) in this directory")
        out += [parse_definition_file(f, level="session") for f in files]
    return tuple(out)
