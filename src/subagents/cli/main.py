"""``subagents``: the entry point, the lazily loaded command groups and the exit-code contract.

Exit codes (the README's table): 0 ok; 1 the run failed or a limit stopped it; 2 usage or configuration
error (a bad option, an unknown agent or run, a missing API key, a bad config file, a corrupt store);
130 Ctrl-C; 143 SIGTERM; 129 SIGHUP.  Every expected error is one clear line (``error: ...``, or a JSON
object with ``--json``), never a traceback.  :func:`main` is the testable entry
(``main(["run", "hi"], model=FunctionModel(...))``); :func:`entry` is the console script.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import click

from .common import cwd_option, fail, wants_json

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_SIGHUP", "EXIT_SIGTERM", "EXIT_USAGE",
           "cli", "entry", "main"]

_SHOW = warnings.showwarning
_TOLD: set[str] = set()
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_SIGTERM, EXIT_SIGHUP = 143, 129  # 128 + the signal's number, as shells report it

#: command name -> "module:attribute"; a command module is imported only when it is used.
COMMANDS: dict[str, str] = {
    "run": "subagents.cli.run:run",
    "chat": "subagents.cli.chat:chat",
    "demo": "subagents.cli.demo:demo",
    "config": "subagents.cli.config_cmd:config",
    "agents": "subagents.cli.agents_cmd:agents",
    "runs": "subagents.cli.runs_approve:runs",  # the runs group, with `runs approvals|approve` registered on it
    "team": "subagents.cli.team_cmd:team",
    "serve": "subagents.cli.serve_cmd:serve",
    "worker": "subagents.cli.worker_cmd:worker",
    "trust": "subagents.cli.trust_cmd:trust",
}

#: command name -> the first paragraph of its help: what ``subagents --help`` lists without importing the
#: commands (they load the runtime; tests/cli/test_cli.py checks that these match the commands' own help)
SUMMARIES: dict[str, str] = {
    "run": "Run PROMPT with one agent and print its final answer.",
    "chat": "Talk with an agent in the terminal; PROMPT (optional) is your first message.",
    "demo": "Survey a directory with a scripted model (no LLM, no key needed) and the real tools.",
    "config": "Inspect the configuration.",
    "agents": "Inspect agent definitions (built-in, project, user, extensions).",
    "runs": "List, inspect and steer recorded runs.",
    "team": "Look at teams: a lead, named teammates, a task board and a mailbox.",
    "serve": "Serve the runtime as MCP tools for Claude Code, Codex or any MCP client.",
    "worker": "Run a Temporal worker for agent runs (the durable, distributed engine).",
    "trust": "Trust this project's settings (hooks, MCP servers, sandbox and permission settings).",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use; its help lists them from :data:`SUMMARIES`.

    ``subagents --help`` imports click and this module only (~0.1 s on a slow machine, where importing the
    runtime takes ~0.3 s)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        cmd = getattr(importlib.import_module(module), attr)
        if not isinstance(cmd, click.Command):
            raise TypeError(f"{target} is not a click command")
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As :meth:`click.Group.format_commands`, with the summaries of commands not imported yet."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            cmd = self.commands.get(name)
            if cmd is None and name in SUMMARIES:
                rows.append((name, click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit)))
                continue
            cmd = cmd or self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("subagents")
    except PackageNotFoundError:
        return "unknown"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=None, package_name="subagents", prog_name="subagents",
                      message="%(prog)s %(version)s")
@cwd_option("Project directory for every command (each command also takes --cwd; default: the current "
            "directory).")
def cli() -> None:
    """subagents: a runtime for LLM agents built around the sub-agent.

    Try it offline first: `subagents demo` runs a scripted model (no LLM) with the real tools
    over the current directory.
    """


def main(argv: Sequence[str] | None = None, *, model: Any = None) -> int:
    """Run the CLI and return its exit code.

    ``model`` (a :class:`~subagents.models.Model`) replaces the configured model for ``run``;
    tests use it to drive the CLI with a ``FunctionModel``.
    """
    from ..exceptions import StoreError, SubagentsError, UntrustedProjectWarning, UserError

    args = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(args)
    _TOLD.clear()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            warnings.simplefilter("default", UntrustedProjectWarning)  # told once per text, never an error
            rv = cli.main(args=args, prog_name="subagents", standalone_mode=False, obj={"model": model})
    except click.exceptions.UsageError as e:
        if as_json:
            return fail(e.format_message(), EXIT_USAGE, as_json)
        e.show()
        return EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):
        return fail("interrupted.", EXIT_INTERRUPTED, as_json) if as_json else _interrupted()
    except click.ClickException as e:
        if as_json:
            return fail(e.format_message(), e.exit_code, as_json)
        e.show()
        return e.exit_code
    except (UserError, StoreError) as e:  # a bad call, file or store: the person fixes it (the message says how)
        return fail(str(e), EXIT_USAGE, as_json)
    except SubagentsError as e:
        return fail(str(e), EXIT_FAILED, as_json)
    except BrokenPipeError:  # e.g. `subagents runs list | head`: the reader is gone, nothing more to tell
        _silence_stdout()
        return EXIT_FAILED
    return rv if isinstance(rv, int) else EXIT_OK


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """Our warnings (an untrusted project's ignored settings) as one line on stderr, not Python's two."""
    from ..exceptions import UntrustedProjectWarning
    from .render import terminal_safe

    if issubclass(category, UntrustedProjectWarning):
        text = terminal_safe(f"warning: {message}")
        if text not in _TOLD:  # once per command (the preflight and the runtime both read the definitions)
            _TOLD.add(text)
            click.echo(text, err=True)
    else:
        _SHOW(message, category, filename, lineno, file, line)


def _interrupted() -> int:
    click.echo("Interrupted.", err=True)
    return EXIT_INTERRUPTED


def _silence_stdout() -> None:
    from .render import silence

    silence(sys.stdout)  # no second error when Python flushes


def entry() -> None:
    """The ``subagents`` console script."""
    code = main()
    conn = sys.modules.get("subagents.engines.temporal.connection")
    if conn is not None and getattr(conn, "connected", False):
        _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    """Exit after a Temporal client was used: temporalio's Rust threads can abort the interpreter's finalization
    ("PyGILState_Release: thread state ... must be current", temporalio/sdk-python#300), so run the exit
    handlers, flush, and leave without finalizing."""
    import atexit
    import contextlib
    import os

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
