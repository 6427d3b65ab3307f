"""What every command shares: the global ``--cwd`` (and ``runs --store``) options, and how an error is told.

``--cwd`` is one option wherever it is written: ``subagents --cwd X runs list``, ``subagents runs --cwd X
list`` and ``subagents runs list --cwd X`` all mean the same; the innermost one wins.  The value lives in
``click.Context.meta``, which every nested context shares.

An error is one line on stderr (``error: ...``), or with ``--json`` one JSON object on stdout:
``{"kind": "error", "type": "error", "message": ..., "exit_code": N}`` — the ``kind`` key is the one
every JSON event and the final ``{"kind": "result", ...}`` use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["cwd_option", "fail", "plural", "store_option", "store_url", "wants_json", "workdir"]

F = TypeVar("F", bound=Callable[..., Any])

_CWD = "subagents.cwd"
_STORE = "subagents.store"


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None:
            ctx.meta[key] = value
        return value

    return callback


def cwd_option(help: str) -> Callable[[F], F]:
    """``--cwd DIR``, accepted on a group and on its commands alike (read it with :func:`workdir`)."""
    return click.option("--cwd", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
                        expose_value=False, callback=_remember(_CWD), help=help)


def store_option() -> Callable[[F], F]:
    """``--store URL``, accepted on ``runs`` and on its commands alike (read it with :func:`store_url`)."""
    return click.option("--store", metavar="URL", default=None, expose_value=False, callback=_remember(_STORE),
                        help="Store URL (default: [store] url, or sqlite:///.subagents/state.db under the project).")


def workdir(ctx: click.Context | None = None) -> Path:
    """The ``--cwd`` given anywhere on the command line, else the current directory."""
    ctx = ctx or click.get_current_context()
    value = ctx.meta.get(_CWD)
    return value if isinstance(value, Path) else Path(".")


def store_url(ctx: click.Context | None = None) -> str | None:
    ctx = ctx or click.get_current_context()
    value = ctx.meta.get(_STORE)
    return value if isinstance(value, str) else None


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (``--json`` before any ``--``)."""
    args = list(argv)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def fail(message: str, code: int, as_json: bool) -> int:
    """Tell an error (see the module docstring) and return its exit code."""
    if as_json:
        import json

        click.echo(json.dumps({"kind": "error", "type": "error", "message": message, "exit_code": code},
                              ensure_ascii=False))
    else:
        click.echo(f"error: {message}", err=True)
    return code


def plural(n: int, what: str) -> str:
    """``"1 run"``, ``"2 runs"``."""
    return f"{n} {what}{'' if n == 1 else 's'}"
