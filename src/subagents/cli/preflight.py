"""What ``subagents run`` checks before anything starts, and what it adds up after.

* :func:`read_prompt`: the prompt from the argument, from stdin (``-``) or from ``--prompt-file``;
* :func:`check_model`: a ``provider:model`` string is well formed, its SDK is installed and a key is
  configured — a missing key is a configuration error (exit 2) found at once, not a failed run;
* :func:`check_agent`: the root's agent type exists (a usage error otherwise, before any store is made);
* :func:`tree_results`: the results of every agent of a run's tree (the stats line counts them all).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..exceptions import ConfigError, UserError
from .common import isatty

if TYPE_CHECKING:
    from ..runtime.result import RunResult
    from ..runtime.runtime import Runtime

__all__ = ["check_agent", "check_model", "quiet_loader", "read_prompt", "tree_results"]

_HOW = ("give it as an argument (subagents run \"...\"), '-' to read it from stdin "
        "(subagents run - < prompt.md), or --prompt-file PATH")


def read_prompt(prompt: str | None, prompt_file: str | None) -> str:
    """The prompt text; a usage error when it is missing, given twice, unreadable, not UTF-8 or empty."""
    if prompt is not None and prompt_file is not None:
        raise click.UsageError(f"give the prompt either as PROMPT or with --prompt-file, not both "
                               f"(PROMPT was {_short(prompt)!r}, --prompt-file {prompt_file!r})")
    if prompt is None and prompt_file is None:
        raise click.UsageError(f"missing the prompt: {_HOW}")
    if prompt_file == "":
        raise UserError("the --prompt-file name is empty; give the path of a file holding the prompt, or '-' to "
                        "read it from stdin")
    if prompt_file is not None and prompt_file != "-":
        return _from_file(prompt_file)
    if prompt is not None and prompt != "-":
        if not prompt.strip():
            raise UserError(f"the prompt is empty; {_HOW}")
        if not _utf8(prompt):  # a byte of another encoding in argv (Python keeps it as a lone surrogate)
            raise UserError("the prompt is not UTF-8 text; write it in UTF-8")
        return prompt
    return _from_stdin()


def _from_file(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"the prompt file {path} is not UTF-8 text; save it as UTF-8") from None
    except OSError as e:
        raise UserError(f"cannot read the prompt file {path} ({e.strerror or e}); check the path "
                        "(it is relative to the current directory, not to --cwd)") from None
    if not text.strip():
        raise UserError(f"the prompt file {path} is empty; write the prompt in it")
    return text.strip()


def _from_stdin() -> str:
    stdin = sys.stdin
    if stdin is None:
        raise UserError("'-' reads the prompt from stdin, but stdin is closed; pipe the prompt in "
                        "(subagents run - < prompt.md) or use --prompt-file PATH")
    if isatty(stdin):
        raise UserError("'-' reads the prompt from stdin, but stdin is a terminal; pipe the prompt in "
                        "(subagents run - < prompt.md, or: cat prompt.md | subagents run -) or use --prompt-file "
                        "PATH")
    text: str | None
    try:
        text = stdin.read()
    except UnicodeDecodeError:  # a strict stdin; the usual one (surrogateescape) keeps the bytes as surrogates
        text = None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read the prompt from stdin ({e}); use --prompt-file PATH") from None
    if text is None or not _utf8(text):
        raise UserError("the prompt read from stdin is not UTF-8 text; convert it (iconv -t UTF-8) or save it as "
                        "UTF-8 and use --prompt-file PATH")
    if not text.strip():
        raise UserError(f"the prompt read from stdin is empty; {_HOW}")
    return text.strip()


def _utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (the store, the model and the output all need it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_model(spec: str, providers: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise :class:`ConfigError` when ``spec`` is malformed, its SDK is missing or it has no key."""
    from ..models.resolve import parse_model_string

    parsed = parse_model_string(spec)
    opts = providers.get(parsed.provider, {})
    if importlib.util.find_spec(parsed.provider) is None:
        raise ConfigError(f"the {parsed.provider} SDK is not installed, and {spec!r} needs it; install it with "
                          f"pip install 'subagents[{parsed.provider}]'")
    if parsed.provider == "anthropic":
        from ..models.anthropic import AnthropicConnection

        a = AnthropicConnection.from_settings(opts)
        has_key = a.client is not None or a.api_key is not None or bool(os.environ.get("ANTHROPIC_AUTH_TOKEN"))
        name, env = "Anthropic", "ANTHROPIC_API_KEY"
    else:
        from ..models.openai import OpenAIConnection

        o = OpenAIConnection.from_settings(opts, parsed.base_url)
        has_key = o.client is not None or o.api_key is not None
        name, env = "OpenAI", "OPENAI_API_KEY"
    if not has_key:
        extra = (" (a local OpenAI-compatible server needs none: openai:<model>@http://localhost:11434/v1)"
                 if parsed.provider == "openai" else "")
        raise ConfigError(f"no {name} API key is configured for {spec!r}; export {env}=... or set "
                          f"[providers.{parsed.provider}] api_key in .subagents/config.toml{extra}. "
                          "To try subagents without a key: subagents demo")


@contextmanager
def quiet_loader() -> Iterator[None]:
    """The definition loader logs each skipped file; a command that prints them itself (or loads twice) mutes it."""
    logger = logging.getLogger("subagents.definitions")
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def check_agent(agent: str, cwd: Path) -> None:
    """Raise :class:`~subagents.exceptions.DefinitionError` (a usage error) for an unknown agent type."""
    from ..definitions import load_definitions

    with quiet_loader():  # the run's own loading warns about skipped files, once
        load_definitions(cwd.resolve()).get(agent)


def tree_results(rt: Runtime, root: RunResult) -> list[RunResult]:
    """The results of ``root``'s descendants as the store has them (progress so far for running ones)."""
    from ..exceptions import StoreError
    from ..runtime.recovery import record_result

    try:
        recs = rt.runs(include_archived=True)
    except StoreError:  # the stats line is a courtesy: the run's own result is what matters
        return []
    return [record_result(r) for r in recs if r.root_id == root.id and r.run_id != root.id]


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
