"""``subagents run PROMPT``: one headless run with live progress (or JSON lines) and the answer on stdout."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..config import Settings
    from ..runtime.limits import Limits
    from ..runtime.result import RunResult

from ..config import NO_MODEL_HELP

__all__ = ["NO_MODEL_MESSAGE", "execute", "run"]

NO_MODEL_MESSAGE = "error: " + NO_MODEL_HELP


@click.command()
@click.argument("prompt")
@click.option("--model", "model_name", metavar="PROVIDER:MODEL",
              help="Model to use, e.g. anthropic:claude-sonnet-4-5, openai:gpt-4.1, openai:<model>@<base_url>.")
@click.option("--agent", default="general-purpose", show_default=True, help="Agent type of the root agent.")
@click.option("--cwd", type=click.Path(exists=True, file_okay=False, path_type=Path), default=".",
              help="Workspace directory the agent works in (default: the current directory).")
@click.option("--max-turns", type=click.IntRange(min=1), help="Stop the run after this many model turns.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Stop the run after this many seconds (wall clock).")
@click.option("--json", "as_json", is_flag=True, help="Write one JSON event per line, then the result.")
@click.pass_context
def run(ctx: click.Context, prompt: str, model_name: str | None, agent: str, cwd: Path,
        max_turns: int | None, timeout_s: float | None, as_json: bool) -> int:
    """Run PROMPT with one agent and print its final answer.

    Exit status: 0 ok, 1 the run failed or a limit stopped it, 2 usage or configuration error.
    """
    from ..config import load_settings
    from ..runtime.limits import Limits

    settings = load_settings(cwd, overrides={"model_default": model_name})
    model: Any = (ctx.obj or {}).get("model") or settings.model_default
    if model is None:
        click.echo(NO_MODEL_MESSAGE, err=True)
        return 2
    if isinstance(model, str):
        from ..models.resolve import parse_model_string

        parse_model_string(model)  # a malformed string is a usage error (exit 2) before anything starts
    limits = Limits(max_turns=max_turns, timeout_s=timeout_s)
    return execute(model, prompt, workdir=cwd, settings=settings, agent=agent, limits=limits, as_json=as_json)


def execute(model: Any, prompt: str, *, workdir: Path, settings: Settings, agent: str = "general-purpose",
            limits: Limits | None = None, as_json: bool = False, tools: Sequence[Any] = ()) -> int:
    """Run one prompt with progress output; return the exit code (0 ok, 1 failed or stopped)."""
    from ..exceptions import SubagentsError, UserError

    try:
        result = asyncio.run(_run(model, prompt, workdir=workdir, settings=settings, agent=agent,
                                  limits=limits, as_json=as_json, tools=tools))
    except UserError:
        raise
    except SubagentsError as e:
        click.echo(f"error: {e}", err=True)
        return 1
    return _report(result, as_json)


async def _run(model: Any, prompt: str, *, workdir: Path, settings: Settings, agent: str,
               limits: Limits | None, as_json: bool, tools: Sequence[Any]) -> RunResult:
    from ..runtime.runtime import Runtime
    from .render import JsonLines, LiveView

    async with Runtime(model, workdir=workdir, settings=settings, tools=tuple(tools)) as rt:
        if as_json:
            out = JsonLines(sys.stdout)
            rt.bus.on(out)
            result = await rt.run(prompt, agent=agent, limits=limits)
            out.result(result)
            return result
        if sys.stderr.isatty():
            with LiveView(sys.stderr) as view:
                rt.bus.on(view)
                return await rt.run(prompt, agent=agent, limits=limits)
        return await rt.run(prompt, agent=agent, limits=limits)


def _report(result: RunResult, as_json: bool) -> int:
    ok = str(result.outcome) == "ok"
    if not as_json:
        if result.text:
            click.echo(result.text)
        click.echo(result.stats_line(), err=True)
        if not ok:
            why = result.error or (f"limit {result.limit}" if result.limit else str(result.outcome))
            partial = " (the partial answer is above)" if result.text else ""
            click.echo(f"run stopped: outcome {result.outcome}: {why}{partial}", err=True)
    return 0 if ok else 1
