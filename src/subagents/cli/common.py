"""What every command shares: the global ``--cwd`` (and ``runs --store``) options, and how an error is told.

``--cwd`` is one option wherever it is written: ``subagents --cwd X runs list``, ``subagents runs --cwd X
list`` and ``subagents runs list --cwd X`` all mean the same; the innermost one wins.  The value lives in
``click.Context.meta``, which every nested context shares.

An error is one line on stderr (``error: ...``), or with ``--json`` one JSON object on stdout:
``{"kind": "error", "type": "error", "message": ..., "exit_code": N}`` — the ``kind`` key is the one
every JSON event and the final ``{"kind": "result", ...}`` use.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["LOCAL_ENGINE", "FiniteFloat", "cwd_option", "engine_option", "fail", "isatty", "plural", "scrub",
           "store_option", "store_url", "wants_json", "workdir"]

F = TypeVar("F", bound=Callable[..., Any])

_CWD = "subagents.cwd"
_SURROGATE = re.compile("[\ud800-\udfff]")
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
    """The ``--cwd`` given anywhere on the command line, else the current directory (a usage error when the
    current directory was deleted: every path under it would fail)."""
    ctx = ctx or click.get_current_context()
    value = ctx.meta.get(_CWD)
    if isinstance(value, Path):
        return value
    try:
        os.getcwd()
    except OSError as e:
        from ..exceptions import UserError

        raise UserError(f"the current directory no longer exists or cannot be read ({e.strerror or e}): it was "
                        "deleted or moved; cd to an existing directory, or pass --cwd DIR") from None
    return Path(".")


def store_url(ctx: click.Context | None = None) -> str | None:
    ctx = ctx or click.get_current_context()
    value = ctx.meta.get(_STORE)
    return value if isinstance(value, str) else None


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (``--json`` before any ``--``)."""
    args = list(argv)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def fail(message: str, code: int, as_json: bool) -> int:
    """Tell an error (see the module docstring) and return its exit code.

    With ``--json`` and a stdout that cannot be written (closed, a full disk) the line goes to stderr instead."""
    if as_json:
        line = json_line({"kind": "error", "type": "error", "message": message, "exit_code": code})
        try:
            click.echo(line)
            return code
        except (OSError, ValueError):
            pass
    with contextlib.suppress(OSError, ValueError):  # else nowhere left to say it: the exit status tells
        click.echo(terminal_safe(f"error: {message}"), err=True)  # (it may quote a provider's or a file's text)
    return code


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` as a terminal may show it: control characters other than newline and tab (ESC, BEL, CR, the C1
    codes...) are written out (``\\x1b``) rather than sent, so a model's answer cannot set the title, move the
    cursor, clear the screen or write the clipboard; CRLF line ends become LF; lone surrogates become U+FFFD."""
    text = scrub(text)
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace("\r\n", "\n"))


_C1 = re.compile("[\x7f-\x9f\u2028\u2029]")


def json_line(obj: dict[str, Any]) -> str:
    """``obj`` as one line of JSON, letters as they are; DEL, the C1 controls (``\\x9b`` is a CSI to a terminal) and
    the line separators written as ``\\u`` escapes, as JSON already writes the other control characters: the same
    JSON, and none of it acts on a terminal the stream may be."""
    text = scrub(json.dumps(obj, default=str, ensure_ascii=False))
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _C1.search(text) else text


def scrub(text: str) -> str:
    """``text`` without lone surrogates (U+FFFD instead): what cannot be written as UTF-8 (a byte of a non-UTF-8
    argument, or a surrogate a model sent) would otherwise fail the write, or make the JSON output invalid UTF-8."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def isatty(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (``False`` for a closed one: ``sys.stdin`` is ``None`` after ``<&-``)."""
    try:
        return stream is not None and bool(stream.isatty())
    except (ValueError, OSError, AttributeError):
        return False


class FiniteFloat(click.FloatRange):
    """:class:`click.FloatRange` that refuses ``nan`` and ``inf`` (every range check passes for NaN)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = click.FLOAT.convert(value, param, ctx)  # finite first: ``inf`` is no number, not one out of range
        if isinstance(rv, float) and not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(rv, param, ctx)


#: ``--engine local``: run the agents in this process, whatever ``[engine] url`` or ``$SUBAGENTS_ENGINE`` says.
LOCAL_ENGINE = "local"


def engine_option(url: str, *, local: bool = True) -> str | None:
    """The value of ``--engine``: ``None`` for ``local`` (this process, ignoring the configured engine), else the
    URL.  An empty one is a usage error, not a silent local run (or, for ``worker``, the configured URL); ``local``
    says whether the command can run agents in its process (``worker`` cannot: ``--engine local`` is an error)."""
    if not url.strip():
        unset = ("$SUBAGENTS_ENGINE (unset: the agents run in this process), or --engine local to run them in this "
                 "process whatever is configured") if local else "$SUBAGENTS_ENGINE"
        raise click.UsageError("--engine is empty: give a Temporal URL (temporal://host:7233?task_queue=subagents), "
                               f"or omit --engine to use [engine] url or {unset}")
    if url.strip().lower() == LOCAL_ENGINE:
        if not local:
            raise click.UsageError("--engine local: a worker serves a Temporal engine; give its URL "
                                   "(temporal://host:7233?task_queue=subagents), or omit --engine to use [engine] url")
        return None
    return url


def plural(n: int, what: str) -> str:
    """``"1 run"``, ``"2 runs"``."""
    return f"{n} {what}{'' if n == 1 else 's'}"
