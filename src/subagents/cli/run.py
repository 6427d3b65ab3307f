"""``subagents run PROMPT``: one headless run with live progress (or JSON lines) and the answer on stdout."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..config import Settings
    from ..runtime.limits import Limits
    from ..runtime.result import RunResult

from ..authority.names import MODE_ALIASES, MODES
from ..config import NO_MODEL_HELP
from ..exceptions import SubagentsError
from ..limits import MAX_TIMEOUT_S, MAX_TURNS
from .common import FiniteFloat, cwd_option, engine_option, fail, isatty, scrub, workdir

__all__ = ["NO_MODEL_MESSAGE", "OutputError", "execute", "run"]

NO_MODEL_MESSAGE = "error: " + NO_MODEL_HELP
MODE_CHOICES = [*MODES, *sorted(k for k in MODE_ALIASES if k[0].islower() and k[1:] != k[1:].lower())]


class OutputError(SubagentsError):
    """stdout could not be written (a full disk, an I/O error; a reader that left is not one): the run's output
    is lost, so the command fails (exit 1) and says why on stderr."""


@click.command()
@click.argument("prompt", required=False)
@click.option("--prompt-file", metavar="PATH", help="Read the prompt from this file ('-': from stdin).")
@click.option("--model", "model_name", metavar="PROVIDER:MODEL",
              help="Model to use, e.g. anthropic:claude-sonnet-4-5, openai:gpt-4.1, openai:<model>@<base_url>.")
@click.option("--agent", default="general-purpose", show_default=True, help="Agent type of the root agent.")
@cwd_option("Workspace directory the agent works in (default: the current directory).")
@click.option("--max-turns", type=click.IntRange(min=1, max=MAX_TURNS),
              help=f"Stop the run after this many model turns (at most {MAX_TURNS}).")
@click.option("--timeout", "timeout_s", type=FiniteFloat(min=0, min_open=True, max=MAX_TIMEOUT_S),
              help=f"Stop the run after this many seconds (wall clock; at most {MAX_TIMEOUT_S:.0f}, a year).")
@click.option("--json", "as_json", is_flag=True, help="Write one JSON event per line, then the result.")
@click.option("--permission-mode", type=click.Choice(MODE_CHOICES), default=None,
              help="default: edits and commands ask first; plan: change nothing; autoEdit: edits allowed, "
                   "commands ask; yolo: everything allowed (default: [permissions] mode, else 'default').")
@click.option("--allow", "allow", multiple=True, metavar="RULE",
              help="Allow calls matching RULE without asking, e.g. 'bash(git status*)' (repeatable).")
@click.option("--deny", "deny", multiple=True, metavar="RULE",
              help="Refuse calls matching RULE, e.g. 'read_file(.env)' (repeatable).")
@click.option("--sandbox", "sandbox_mode", type=click.Choice(["auto", "bwrap", "landlock", "off"]), default=None,
              help="How bash is confined (default: [sandbox] mode, else auto). 'off' runs commands unconfined.")
@click.option("--engine", "engine", metavar="URL|local", default=None,
              help="Run the agents on Temporal workers: temporal://host:7233?namespace=...&task_queue=... "
                   "(default: [engine] url or $SUBAGENTS_ENGINE; unset: in this process). 'local': in this "
                   "process, whatever engine is configured.")
@click.pass_context
def run(ctx: click.Context, prompt: str | None, prompt_file: str | None, model_name: str | None, agent: str,
        max_turns: int | None, timeout_s: float | None, as_json: bool, permission_mode: str | None,
        allow: tuple[str, ...], deny: tuple[str, ...], sandbox_mode: str | None, engine: str | None) -> int:
    """Run PROMPT with one agent and print its final answer.

    An answer that is exactly NO_REPLY (the agent chose to say nothing, e.g. to a background
    sub-agent's announcement) prints nothing; the stats still go to stderr.

    PROMPT '-' reads the prompt from stdin (subagents run - < task.md); --prompt-file PATH reads it
    from a file.

    On a terminal, calls that need approval (file edits and shell commands in the default permission
    mode) are asked there; elsewhere (--json, CI, a pipe) they are denied unless the mode or a rule
    allows them.

    With --engine (or [engine] url) the agents run on `subagents worker` processes, with the workers'
    model, tools and permissions; the progress and `subagents runs` come from the shared run store.
    --engine local runs them in this process even when an engine is configured.

    On a terminal, control characters in the answer are shown escaped (\\x1b), not obeyed; piped or
    redirected, the answer is written exactly as the model gave it.

    Exit status: 0 ok, 1 the run failed, a limit stopped it or the output could not be written, 2 usage or
    configuration error (unknown agent, missing API key, bad config file, corrupt store), 130 Ctrl-C,
    143 SIGTERM, 129 SIGHUP.
    """
    from ..config import load_settings
    from ..exceptions import ConfigError
    from ..runtime.limits import Limits
    from .preflight import check_agent, check_model, read_prompt

    text = read_prompt(prompt, prompt_file)
    cwd = workdir(ctx)
    settings = load_settings(cwd, overrides={"model_default": model_name, "permission_mode": permission_mode,
                                             "sandbox_mode": sandbox_mode})
    model: Any = (ctx.obj or {}).get("model") or settings.model_default
    if engine is not None:
        settings.engine_url = engine_option(engine)
    if settings.engine_url:
        check_remote(settings.engine_url, permission_mode, allow, deny, sandbox_mode)
        model = model_name  # the workers resolve it (None: their own default)
    elif model is None:
        raise ConfigError(NO_MODEL_HELP)
    elif isinstance(model, str):
        check_model(model, settings.providers)  # malformed, no SDK, no key: exit 2 before anything starts
    check_agent(agent, cwd)  # before the store is opened (or created) for a run that cannot start
    limits = Limits(max_turns=max_turns, timeout_s=timeout_s)
    return execute(model, text, workdir=cwd, settings=settings, agent=agent, limits=limits, as_json=as_json,
                   allow=allow, deny=deny)


def check_remote(url: str, permission_mode: str | None, allow: Sequence[str], deny: Sequence[str],
                 sandbox_mode: str | None) -> None:
    """With an engine URL the agents run on the workers: refuse the options that only a local run uses."""
    from ..engines.temporal.target import TemporalTarget
    from ..exceptions import UserError

    TemporalTarget.parse(url)  # a bad URL: exit 2 before anything starts
    given = [name for name, v in (("--permission-mode", permission_mode), ("--allow", allow), ("--deny", deny),
                                  ("--sandbox", sandbox_mode)) if v]
    if given:
        raise UserError(f"{', '.join(given)} apply where the agents run: with an engine URL, pass them to "
                        "`subagents worker` (or set them in the workers' .subagents/config.toml)")


def execute(model: Any, prompt: str, *, workdir: Path, settings: Settings, agent: str = "general-purpose",
            limits: Limits | None = None, as_json: bool = False, tools: Sequence[Any] = (),
            allow: Sequence[str] = (), deny: Sequence[str] = (), agents: Sequence[Any] = ()) -> int:
    """Run one prompt with progress output; return the exit code (0 ok, 1 failed or stopped).

    ``agents``: session agent definitions (e.g. the team demo's lead).

    SIGTERM, SIGHUP and Ctrl-C (SIGINT) stop the run: every agent is closed and recorded as
    ``interrupted`` (resumable with ``subagents runs resume``), every process group its commands
    started is killed, and the exit status is 128 + the signal's number (143, 129, 130).
    """
    from ..exceptions import StoreError, SubagentsError, UserError
    from ..sandbox.shell import kill_all_process_groups

    received: list[int] = []
    runtimes: list[Any] = []  # the run's Runtime, once made: a signal marks its agents interrupted
    tree: list[RunResult] = []  # the results of the root's descendants, for the stats line

    async def main() -> RunResult:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            loop.add_signal_handler(sig, _stop, task, sig, received, runtimes)
        return await _run(model, prompt, workdir=workdir, settings=settings, agent=agent, limits=limits,
                          as_json=as_json, tools=tools, allow=allow, deny=deny, runtimes=runtimes, tree=tree,
                          agents=agents)

    try:
        result = asyncio.run(main())
    except (UserError, StoreError):
        raise  # a configuration error: exit 2, said by main()
    except SubagentsError as e:
        return fail(str(e), 1, as_json)
    except asyncio.CancelledError:
        if not received:
            raise
        kill_all_process_groups()
        name = signal.Signals(received[0]).name
        said = (f"Stopped by {name}: the agents were closed and their processes killed; they are recorded as "
                "interrupted (subagents runs resume <id> <message> goes on)")
        if any(getattr(rt, "remote", None) is not None for rt in runtimes):
            said = (f"Stopped by {name}: the run was closed on the Temporal workers (its agents end as "
                    "shutdown/cancelled; subagents runs tree <id> shows them)")
        if as_json:
            return fail(said, 128 + received[0], True)
        click.echo(said, err=True)
        return 128 + received[0]
    finally:
        kill_all_process_groups()  # nothing a command started outlives the run
    return _report(result, as_json, tree)


def _stop(task: asyncio.Task[Any], sig: int, received: list[int], runtimes: list[Any]) -> None:
    if not received:
        received.append(sig)
        for rt in runtimes:  # recorded as interrupted (resumable), not cancelled
            rt.interrupting(signal.Signals(sig).name)
        task.cancel()


async def _run(model: Any, prompt: str, *, workdir: Path, settings: Settings, agent: str,
               limits: Limits | None, as_json: bool, tools: Sequence[Any], allow: Sequence[str],
               deny: Sequence[str], runtimes: list[Any], tree: list[RunResult], agents: Sequence[Any] = ()
               ) -> RunResult:
    from ..exceptions import UnconfinedShellWarning
    from ..runtime.runtime import Runtime
    from .approve import Notices, TerminalApprover
    from .preflight import tree_results
    from .render import JsonLines, LiveView, TeamLines

    live = not as_json and isatty(sys.stderr)
    view = LiveView(sys.stderr) if live else None
    approver = TerminalApprover(view) if live and isatty(sys.stdin) else None
    if approver is None and settings.approval_timeout_s is None:
        settings.approval_timeout_s = 0.0  # nobody to ask: deny at once (the notice says how to allow)
    with warnings.catch_warnings():  # the CLI says it itself, on every run (below)
        warnings.simplefilter("ignore", UnconfinedShellWarning)
        rt = Runtime(model, workdir=workdir, settings=settings, tools=tuple(tools), approver=approver,
                     allow=allow, deny=deny, agents=tuple(agents))
    runtimes.append(rt)
    async with rt:
        if as_json:
            out = JsonLines(sys.stdout)
            if rt.sandbox_warning:
                out.write({"kind": "warning", "message": rt.sandbox_warning})
            rt.bus.on(out)
            result = await rt.run(prompt, agent=agent, limits=limits)
            await rt.events_delivered()  # the stream ends with the result, after every event
            out.result(result)
            if out.error is not None:
                raise OutputError(f"cannot write the output ({_why(out.error)})")
            return result
        note = view.note if view is not None else _stderr_line
        if rt.sandbox_warning:
            note(rt.sandbox_warning)
        rt.bus.on(Notices(note))
        if view is None:  # the live view tells team events itself
            rt.bus.on(TeamLines(note))
        if view is not None:
            with view:
                rt.bus.on(view)
                result = await rt.run(prompt, agent=agent, limits=limits)
                await rt.events_delivered()
        else:
            result = await rt.run(prompt, agent=agent, limits=limits)
            await rt.events_delivered()
        tree.extend(tree_results(rt, result))
        return result


def _stderr_line(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr gone or full: the answer and exit status still tell
        click.echo(scrub(line), err=True)


def _why(e: BaseException) -> str:
    return str(e.strerror) if isinstance(e, OSError) and e.strerror else str(e)


def _report(result: RunResult, as_json: bool, tree: Sequence[RunResult] = ()) -> int:
    """Print the answer on stdout (nothing for a silent ``NO_REPLY`` answer), the stats on stderr."""
    from .render import terminal_safe

    ok = str(result.outcome) == "ok"
    if not as_json:
        if result.text and not result.silent:  # on a terminal its escape sequences are shown, not obeyed
            try:
                if isatty(sys.stdout):
                    click.echo(terminal_safe(result.text))
                else:  # a pipe or a file gets the answer as the model wrote it (click would strip its CSI codes)
                    click.echo(scrub(result.text), color=True)
            except BrokenPipeError:
                raise  # the reader left: main() ends quietly
            except (OSError, ValueError) as e:
                raise OutputError(f"cannot write the output ({_why(e)})") from None
        _stderr_line(result.stats_line(tree))
        if not ok:
            why = result.error or (f"limit {result.limit}" if result.limit else str(result.outcome))
            partial = " (the partial answer is above)" if result.text and not result.silent else ""
            line = f"run stopped: outcome {result.outcome}: {why}{partial}"
            _stderr_line(terminal_safe(line) if isatty(sys.stderr) else line)
    return 0 if ok else 1
