"""``subagents runs``: look at and steer the runs recorded in a project's store.

IDs may be given whole, as a unique prefix or suffix (4+ characters; listings show the last 8) or as a nickname
(the latest run with it).
``--cwd`` and ``--store`` go before or after the command (``runs --cwd X list`` = ``runs list --cwd X``).
The commands that only read (``list``, ``show``, ``tree``, ``tail``, ``wait``, ``timeline``, ``approvals``,
``approve``) open the store read-only (:mod:`.runs_store`): they read a store the user may not write and never create,
migrate or change one; with none yet, they say so.  ``cancel``, ``resume`` and ``sweep`` write to it, but make no
store where there is none and refuse a file they cannot use with a sentence, leaving it as it is.
Runs owned by another live process are steered through the store: ``cancel`` and ``resume`` leave a
request that the owner's sweeper carries out within a few seconds.  Runs whose process is gone are
changed directly (``cancel``) or taken over by this process (``resume``, which needs a model).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..exceptions import SpawnError, UserError
from ..ids import id_matches, short_id
from ..store.base import RunRecord, Store
from .common import cwd_option, plural, store_option, store_url, workdir
from .runs_store import NoStore, open_for_reading, open_for_writing
from .runs_text import age, audit_line, cache_hits, cache_line, descendants, echo_message, owner_gone, say, tree_lines

__all__ = ["NoStore", "audit_line", "resolve_run", "runs"]

POLL_S = 0.2  # tail/wait read another process's store: they can only poll it

_open = open_for_writing  # the writing commands' open


def resolve_run(store: Store, ref: str) -> RunRecord:
    """A run by id, unique id prefix or suffix (4+ characters) or nickname (the latest); ``UserError`` otherwise."""
    rec = store.get_run(ref)
    if rec is not None:
        return rec
    all_runs = store.list_runs(include_archived=True)
    by_nick = [r for r in all_runs if r.nickname == ref]
    if by_nick:
        return by_nick[-1]
    if len(ref) < 4:
        raise UserError(f"no run has the id or nickname {ref!r}, and part of an id needs at least 4 characters; "
                        "'subagents runs list --all' shows the runs with their ids and nicknames")
    hits = [r for r in all_runs if id_matches(r.run_id, ref)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        shown = ", ".join(f"{r.run_id} ({r.nickname})" for r in hits[:5])
        raise UserError(f"{ref!r} matches {len(hits)} runs ({shown}); give more characters of the id")
    raise UserError(f"no run matches {ref!r}; 'subagents runs list --all' shows the runs with their ids and nicknames")


_CWD_HELP = "Project directory whose store to read (default: the current directory)."
F = TypeVar("F", bound=Callable[..., Any])


def _where(f: F) -> F:
    """``--cwd`` and ``--store``, accepted after the command as well as before it."""
    return cwd_option(_CWD_HELP)(store_option()(f))


@click.group()
@_where
def runs() -> None:
    """List, inspect and steer recorded runs.

    --cwd and --store may be given before or after the command.

    The commands that only read (list, show, tree, timeline, tail, wait, approvals, approve) open the store read-only:
    they read a store you may not write (another user's, a read-only mount), never create, migrate or change it, and
    take no lock a running runtime would wait for.  cancel, resume and sweep write to it (they make no store where
    there is none, and leave a file they cannot use as it is).
    """


@runs.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include archived runs.")
@click.option("--status", type=click.Choice(["pending_init", "running", "completed", "errored", "shutdown"]))
@click.option("--json", "as_json", is_flag=True, help="One JSON array of run records.")
@_where
@click.pass_context
def list_cmd(ctx: click.Context, show_all: bool, status: str | None, as_json: bool) -> int:
    """List runs, oldest first (archived ones only with --all).

    Only reads the store (a read-only one too).
    """
    try:
        with open_for_reading(ctx) as store:
            recs = store.list_runs(include_archived=show_all, status=status)
    except NoStore as e:
        click.echo(f"No runs: {e}.", err=as_json)
        if as_json:
            click.echo("[]")
        return 0
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in recs], indent=1))
        return 0
    if not recs:
        click.echo("No runs.")
        return 0
    now = time.time()
    nw = max([8, *(len(r.nickname) for r in recs)])
    click.echo(f"{'ID':<10} {'NICKNAME':<{nw}} {'TYPE':<16} {'STATUS':<12} {'OUTCOME':<11} {'D':>1} {'AGE':>5}  LABEL")
    for r in recs:
        click.echo(f"{short_id(r.run_id):<10} {r.nickname:<{nw}} {r.agent_type[:16]:<16} {r.status:<12} "
                   f"{(r.outcome or '-'):<11} {r.depth:>1} {age(r.created_at, now):>5}  {r.label[:50]}")
    return 0


@runs.command("show")
@click.argument("run_ref", metavar="ID")
@click.option("--json", "as_json", is_flag=True)
@_where
@click.pass_context
def show(ctx: click.Context, run_ref: str, as_json: bool) -> int:
    """Show a run's record, stats and result.

    Only reads the store (a read-only one too).
    """
    from ..runtime.recovery import record_result

    with open_for_reading(ctx) as store:
        rec = resolve_run(store, run_ref)
        audit = store.audit_of(rec.run_id)
        tree_recs = descendants(store, rec)
    if as_json:
        total, read, _ = cache_hits([rec])
        t_total, t_read, _ = cache_hits([rec, *tree_recs])
        ratios = {"cache_hit_ratio": read / total if total else None,
                  "tree_cache_hit_ratio": t_read / t_total if t_total else None}
        click.echo(json.dumps({**rec.to_dict(), **ratios, "audit": [dataclasses.asdict(a) for a in audit]}, indent=1))
        return 0
    for key in ("run_id", "nickname", "agent_type", "status", "outcome", "parent_id", "root_id", "depth", "label",
                "model", "permission_mode", "cleanup", "background", "archived", "child_session_key",
                "requester_session_key", "owner"):
        say(f"{key + ':':<23}{getattr(rec, key)}")
    say(f"{'task:':<23}{rec.task}")
    if rec.is_final:
        say(f"{'stats:':<23}{record_result(rec).stats_line(record_result(r) for r in tree_recs)}")
    cache = cache_line(rec, tree_recs)
    if cache:
        say(f"{'cache hits:':<23}{cache}")
    if rec.error:
        say(f"{'error:':<23}{rec.error}")
    if audit:
        say("authority (approvals, refusals, hooks):")
        for a in audit:
            say(f"  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(a.at))}  {audit_line(a)}")
    say("")
    say(rec.result_text or "(no result yet)")
    return 0


@runs.command("tree")
@click.argument("root_ref", metavar="ROOT_ID")
@_where
@click.pass_context
def tree(ctx: click.Context, root_ref: str) -> int:
    """Show the agent tree under a run: status, running time, turns, tokens and cost of each agent, and the total.

    Only reads the store (a read-only one too).
    """
    with open_for_reading(ctx) as store:
        rec = resolve_run(store, root_ref)
        recs = store.list_runs(include_archived=True, root_id=rec.root_id or rec.run_id)
    for line in tree_lines(rec, recs, time.time()):
        click.echo(line)
    return 0


@runs.command("timeline")
@click.argument("root_ref", metavar="ROOT_ID")
@click.option("--html", "html_path", required=True, metavar="FILE",
              type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write the page to this file (one self-contained HTML file; open it in any browser).")
@_where
@click.pass_context
def timeline(ctx: click.Context, root_ref: str, html_path: Path) -> int:
    """Write a Gantt chart of the agent tree under a run as one HTML file (no network needed to open it).

    Only reads the store (a read-only one too).
    """
    from .timeline import write_timeline

    with open_for_reading(ctx) as store:
        rec = resolve_run(store, root_ref)
        line = write_timeline(store, rec, html_path)
    click.echo(line)
    return 0


@runs.command("tail")
@click.argument("run_ref", metavar="ID")
@click.option("--no-follow", is_flag=True, help="Print the transcript so far and stop.")
@_where
@click.pass_context
def tail(ctx: click.Context, run_ref: str, no_follow: bool) -> int:
    """Print a run's transcript, then follow it until the run ends.

    Only reads the store (a read-only one too).
    """
    with open_for_reading(ctx) as store:
        rec = resolve_run(store, run_ref)
        seen, status = 0, ""
        while True:
            msgs = store.transcript(rec.run_id)
            for m in msgs[seen:]:
                echo_message(m)
            seen = len(msgs)
            now = store.get_run(rec.run_id)
            if now is None:
                click.echo("(the run was deleted)")
                return 1
            if now.status != status:
                status = now.status
                click.echo(f"-- status: {status}{' / ' + now.outcome if now.outcome else ''}")
            if now.is_final or no_follow:
                return 0
            if owner_gone(store, now):
                return 1
            time.sleep(POLL_S)


@runs.command("wait")
@click.argument("run_ref", metavar="ID")
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after this many seconds (exit 1).")
@_where
@click.pass_context
def wait(ctx: click.Context, run_ref: str, timeout: float | None) -> int:
    """Wait until a run ends; exit 0 if it completed, 1 otherwise (or on timeout).

    Only reads the store (a read-only one too).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    with open_for_reading(ctx) as store:
        rec = resolve_run(store, run_ref)
        while True:
            now = store.get_run(rec.run_id)
            if now is None:
                click.echo(f"run {rec.run_id} was deleted while waiting", err=True)
                return 1
            if now.is_final:
                click.echo(f"{now.nickname} {now.status}/{now.outcome}")
                return 0 if now.status == "completed" else 1
            if deadline is not None and time.monotonic() >= deadline:
                click.echo(f"{now.nickname} is still {now.status} after {timeout}s", err=True)
                return 1
            if owner_gone(store, now):
                return 1
            time.sleep(POLL_S)


@runs.command("cancel")
@click.argument("run_ref", metavar="ID")
@_where
@click.pass_context
def cancel(ctx: click.Context, run_ref: str) -> int:
    """Cancel a run and its descendants (through its owner if it is alive)."""
    from ..runtime.steering import cancel_stored

    with _open(ctx) as store:
        rec = resolve_run(store, run_ref)
        if rec.is_final:
            raise UserError(f"run {rec.nickname} ({rec.run_id}) has already ended ({rec.status}); nothing to cancel")
        if not rec.owner.startswith("temporal:"):  # a run of the Temporal engine is closed through the engine
            done = cancel_stored(store, rec)
            if done.requested:
                click.echo(f"Cancel requested: the process that runs {rec.nickname} ({_pid(rec)}) stops it within "
                           "a few seconds; 'subagents runs wait' shows when it has.")
            else:
                click.echo(f"Cancelled {plural(len(done.cancelled), 'run')}: no live process owned {rec.nickname}, so "
                           "the store was updated directly.")
            return 0
    return _on_engine(ctx, rec)


def _pid(rec: RunRecord) -> str:
    parts = rec.owner.split(":")
    return f"pid {parts[1]} on {parts[0]}" if len(parts) >= 2 else "owner unknown"


@runs.command("resume")
@click.argument("run_ref", metavar="ID")
@click.argument("message")
@click.option("--model", "model_name", metavar="PROVIDER:MODEL", help="Model for a run this process takes over.")
@_where
@click.pass_context
def resume(ctx: click.Context, run_ref: str, message: str, model_name: str | None) -> int:
    """Give a finished run more work (MESSAGE), keeping its whole conversation."""
    from ..runtime.steering import request_resume

    if not message.strip():
        raise UserError("the message is empty; say what the resumed run should do")
    engine = False
    with _open(ctx) as store:
        rec = resolve_run(store, run_ref)
        if not rec.is_final:
            raise UserError(f"run {rec.nickname} ({rec.run_id}) is still {rec.status}; wait for it to end "
                            "('subagents runs wait') before resuming it")
        if rec.owner.startswith("temporal:"):
            engine = True
        elif request_resume(store, rec, message):
            click.echo(f"Resume requested: the process that owns {rec.nickname} ({_pid(rec)}) resumes it within "
                       "a few seconds; follow it with 'subagents runs tail'.")
            return 0
    return _on_engine(ctx, rec, message) if engine else _resume_here(ctx, rec, message, model_name)


def _on_engine(ctx: click.Context, rec: RunRecord, message: str | None = None) -> int:
    """A run of the Temporal engine: closed (``message`` None) or resumed through the engine (its workers own it)."""
    from ..config import load_settings
    from ..runtime.runtime import Runtime

    cwd = workdir(ctx)
    settings = load_settings(cwd)
    if not settings.engine_url:
        raise UserError(f"run {rec.nickname} ({rec.run_id}) runs on the Temporal engine ({rec.owner}); "
                        "set [engine] url or SUBAGENTS_ENGINE to its temporal://host:7233?task_queue=... address")

    async def go() -> int:
        async with Runtime(workdir=cwd, settings=settings, store=store_url(ctx)) as rt:  # no model: the workers'
            if message is None:
                r = await rt.close(rec.run_id)
                click.echo(f"Closed {rec.nickname} and its descendants on the Temporal engine: {r.status}")
                return 0
            h = await rt.resume(rec.run_id, message)
            result = (await rt.wait([h.id]))[h.id]
            click.echo(result.text)
            return 0 if result.ok else 1

    return asyncio.run(go())


def _resume_here(ctx: click.Context, rec: RunRecord, message: str, model_name: str | None) -> int:
    from ..config import load_settings
    from ..runtime.runtime import Runtime

    cwd = workdir(ctx)
    settings = load_settings(cwd, overrides={"model_default": model_name})
    settings.engine_url = None  # a run of this engine (not Temporal's): resumed here, whatever [engine] url says
    root_obj = ctx.find_root().obj or {}
    model: Any = root_obj.get("model") or settings.model_default
    if model is None:
        raise UserError("resuming a run in this process needs a model: pass --model PROVIDER:MODEL "
                        "or set [model] default")

    async def go() -> int:
        async with Runtime(model, workdir=cwd, settings=settings, store=store_url(ctx)) as rt:
            try:
                try:
                    h = await rt.resume(rec.run_id, message)
                except SpawnError as e:
                    if rt.status(rec.run_id).is_final():
                        raise
                    raise UserError(f"run {rec.nickname} ({rec.run_id}) was started again by another process just "
                                    "now; follow it with 'subagents runs tail', resume it once it ends") from e
                done = await rt.wait([h.id])
                result = done[h.id]
                click.echo(result.text)
                return 0 if result.ok else 1
            finally:  # orphans it took over as it opened the store, still running: left resumable, not cancelled
                rt.interrupting("its 'subagents runs resume' command ended")

    return asyncio.run(go())


@runs.command("sweep")
@_where
@click.pass_context
def sweep(ctx: click.Context) -> int:
    """Apply the cleanup policies now (archive kept runs past their time, delete delivered ones)."""
    from ..config import load_settings
    from ..runtime.sweeper import Sweeper

    settings = load_settings(workdir(ctx))
    try:
        with _open(ctx) as store:
            report = Sweeper(store, None, archive_after_minutes=settings.archive_after_minutes).sweep()
    except NoStore as e:
        click.echo(f"Nothing to sweep: {e}.")
        return 0
    click.echo(f"Archived {plural(len(report.archived), 'run')}, deleted {plural(len(report.deleted), 'run')}.")
    return 0
