"""``subagents team``: look at the teams recorded in a project's store (issue 14), and delete the finished ones.

``team list`` shows every team (lead, members by status, tasks done); ``team show NAME`` shows one team's
members, its task board (columns pending / in progress / completed) and its recent messages.  ``team delete
NAME`` deletes a team whose teammates are all shut down (its board and mailbox; the runs stay), as the lead's
``team_delete`` does: a team stays in the store until then.  ``list`` and ``show`` only read:
they open the store read-only, as the reading ``runs`` commands do (:mod:`.runs_store`; the teams through the
run reader, :mod:`subagents.teams.sqlite_reader`), so they read a store the user may not write, take no lock a
runtime would wait for, never start a runtime and never create, migrate or change a store (with none yet, they
say so, as ``subagents runs`` does).  ``--json`` prints one JSON document; ``--cwd`` and ``--store`` go before or
after the command.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from typing import Any, TypeVar
from unicodedata import combining, east_asian_width

import click

from ..authority.approvals import visible
from ..exceptions import UserError
from ..ids import short_id
from ..store.base import Store
from ..teams.model import MailRecord, MemberRecord, MemberStatus, TaskRecord, TaskStatus, TeamRecord
from ..teams.store import TeamStore
from .common import cwd_option, store_option
from .runs_store import NoStore, open_for_reading, open_for_writing
from .runs_text import age, say

__all__ = ["board_lines", "mail_lines", "member_lines", "team"]

MAIL_SHOWN = 20
F = TypeVar("F", bound=Callable[..., Any])


def _where(f: F) -> F:
    """``--cwd`` and ``--store``, accepted after the command as well as before it."""
    return cwd_option("Project directory whose store to use (default: the current directory).")(store_option()(f))


@click.group()
@_where
def team() -> None:
    """Look at teams: a lead, named teammates, a task board and a mailbox.

    Teams are made by a model's team_create tool (e.g. the coordinator agent type) or from Python
    (rt.create_team); `subagents demo --team` runs one offline.  --cwd and --store may be given
    before or after the command.

    list and show only read: they open the store read-only, so they read a store you may not write
    (another user's, a read-only mount), never create, migrate or change it, and take no lock a
    running runtime would wait for.  delete removes a finished team (teams stay in the store until
    their lead's team_delete, Team.delete() or this).
    """


def _teams(store: Store) -> TeamStore:
    from ..teams import open_team_store

    return open_team_store(store)


def _lead(store: Store, t: TeamRecord) -> dict[str, Any]:
    """The lead as ``{"run_id", "nickname"}`` (nickname ``"(python)"`` for a team made from Python)."""
    if not t.lead_id:
        return {"run_id": None, "nickname": "(python)"}
    rec = store.get_run(t.lead_id)
    return {"run_id": t.lead_id, "nickname": rec.nickname if rec is not None else short_id(t.lead_id)}


def _summary(store: Store, ts: TeamStore, t: TeamRecord) -> dict[str, Any]:
    members = ts.members(t.name)
    tasks = ts.tasks(t.name)
    by_status = {s.value: n for s in MemberStatus if (n := sum(1 for m in members if m.status is s))}
    return {"name": t.name, "description": t.description, "lead": _lead(store, t), "created_at": t.created_at,
            "members": len(members), "members_by_status": by_status,
            "tasks_total": len(tasks), "tasks_completed": sum(1 for x in tasks if x.status is TaskStatus.COMPLETED)}


@team.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON array: a summary of each team.")
@_where
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> int:
    """List the teams, oldest first: lead, members by status, tasks done.

    Only reads the store (a read-only one too).
    """
    try:
        with open_for_reading(ctx) as store:
            ts = _teams(store)
            rows = [_summary(store, ts, t) for t in ts.list_teams()]
    except NoStore as e:
        click.echo(f"No teams: {e}.", err=as_json)
        if as_json:
            click.echo("[]")
        return 0
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return 0
    if not rows:
        click.echo("No teams.")
        return 0
    now = time.time()
    nw = max([4, *(len(r["name"]) for r in rows)])
    lw = max([4, *(len(r["lead"]["nickname"]) for r in rows)])
    click.echo(f"{'NAME':<{nw}}  {'LEAD':<{lw}}  {'TASKS':>7}  {'AGE':>5}  MEMBERS")
    for r in rows:
        counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in r["members_by_status"].items())
        members = f"{r['members']}" + (f" ({counts})" if counts else "")
        tasks = f"{r['tasks_completed']}/{r['tasks_total']}"
        click.echo(f"{r['name']:<{nw}}  {r['lead']['nickname']:<{lw}}  {tasks:>7}  {age(r['created_at'], now):>5}  "
                   f"{members}")
    return 0


def _record(x: Any) -> dict[str, Any]:
    d = dataclasses.asdict(x)
    d.pop("team", None)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


@team.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the team, members, tasks and messages.")
@click.option("--messages", "n_mail", type=click.IntRange(min=0), default=MAIL_SHOWN, show_default=True,
              help="How many of the latest messages to show.")
@_where
@click.pass_context
def show(ctx: click.Context, name: str, as_json: bool, n_mail: int) -> int:
    """Show a team: its members with their status, the task board and the recent messages.

    Only reads the store (a read-only one too).
    """
    with open_for_reading(ctx) as store:
        ts = _teams(store)
        t = ts.get_team(name)
        if t is None:
            raise _unknown(ts, name)
        lead = _lead(store, t)
        members, tasks, mail = ts.members(t.name), ts.tasks(t.name), ts.mail(t.name, n_mail) if n_mail else []
        runs = {m.agent_id: store.get_run(m.agent_id) for m in members if m.agent_id}
    if as_json:
        click.echo(json.dumps({"name": t.name, "description": t.description, "created_at": t.created_at,
                               "lead": lead, "members": [_record(m) for m in members],
                               "tasks": [_record(x) for x in tasks], "messages": [_record(m) for m in mail]},
                              indent=1, ensure_ascii=False))
        return 0
    width = min(max(shutil.get_terminal_size((100, 24)).columns, 60), 140)
    done = sum(1 for x in tasks if x.status is TaskStatus.COMPLETED)
    say(f"team {t.name}" + (f" — {t.description}" if t.description else ""))
    lead_id = f" ({short_id(lead['run_id'])})" if lead["run_id"] else ""
    say(f"lead: {lead['nickname']}{lead_id} · created {age(t.created_at, time.time())} ago · "
               f"{len(members)} teammates · {done}/{len(tasks)} tasks completed")
    say("")
    for line in member_lines(members, {k: (r.nickname if r else "") for k, r in runs.items()}):
        say(line)
    say("")
    for line in board_lines(tasks, width):
        say(line)
    say("")
    say(f"messages (the latest {len(mail)}):" if mail else "messages: none")
    for line in mail_lines(mail, width):
        say(line)
    return 0


def _unknown(ts: TeamStore, name: str) -> UserError:
    known = ", ".join(x.name for x in ts.list_teams()) or "none yet"
    return UserError(f"no team named {name!r} in this store (teams: {known}); 'subagents team list' shows them")


@team.command("delete")
@click.argument("name")
@_where
@click.pass_context
def delete(ctx: click.Context, name: str) -> int:
    """Delete a team whose teammates are all shut down: its members, task board and mailbox.

    The runs of its lead and teammates stay ('subagents runs' shows them).  A team with a teammate
    that is not shut down is refused: a runtime runs it (after a crash, the next Runtime on this
    store resumes it); shut it down there first (the lead's team_shutdown, or Team.shutdown()).
    """
    from ..teams.model import TeamError

    with open_for_writing(ctx) as store:
        ts = _teams(store)
        if ts.get_team(name) is None:
            raise _unknown(ts, name)
        members, tasks = ts.members(name), ts.tasks(name)
        live = [f"{m.name} ({m.status.value.replace('_', ' ')})" for m in members
                if m.status is not MemberStatus.SHUT_DOWN]
        if live:
            who = f"teammate {live[0]} is" if len(live) == 1 else f"teammates {', '.join(live)} are"
            raise UserError(f"team {name!r} was not deleted: its {who} not shut down. The runtime that runs them "
                            "shuts them down (the lead's team_shutdown, or Team.shutdown() in Python; after a crash "
                            "the next Runtime on this store resumes them first); then delete the team")
        try:
            ts.delete_team(name)
        except TeamError as e:  # (a teammate joined or woke since the look above)
            raise UserError(f"team {name!r} was not deleted: {e}") from None
    say(f"deleted team {name}: {len(members)} teammates, {len(tasks)} tasks and its messages (their runs stay: "
        "'subagents runs' shows them)")
    return 0


def member_lines(members: list[MemberRecord], nicknames: dict[str | None, str]) -> list[str]:
    """The members as a table: name, status, agent type, run (short id and nickname), mode."""
    if not members:
        return ["members: none yet"]
    nw = max([4, *(len(m.name) for m in members)])
    tw = max([4, *(len(m.agent_type) for m in members)])
    out = [f"{'NAME':<{nw}}  {'STATUS':<9}  {'TYPE':<{tw}}  {'RUN':<8}  {'MODE':<8}  NICKNAME"]
    for m in members:
        mode = m.mode + (" (plan until approved)" if m.require_plan_approval and not m.plan_approved else "")
        run = short_id(m.agent_id) if m.agent_id else "-"
        out.append(f"{m.name:<{nw}}  {m.status.value:<9}  {m.agent_type:<{tw}}  {run:<8}  {mode:<8}  "
                   f"{nicknames.get(m.agent_id, '')}".rstrip())
    return out


def _cols(s: str) -> int:
    """How many terminal columns ``s`` takes (East Asian wide characters two, combining marks none)."""
    return sum(0 if combining(c) else 2 if east_asian_width(c) in "WF" else 1 for c in s)


def _cut(s: str, n: int, indent: str = "") -> str:
    """``s`` on one line (whitespace collapsed, escape codes and invisible characters written out: a task or message
    made from Python is not checked as a model's is) after ``indent``, cut with … to ``n`` columns in all."""
    s = indent + visible(" ".join(s.split()))
    if len(s) <= n and _cols(s) <= n:
        return s
    s, used = s[: max(n - 1, 0)], 0  # (no more characters than columns fit)
    for i, c in enumerate(s):
        used += _cols(c)
        if used > n - 1:
            return s[:i] + "…"
    return s + "…"


def _pad(s: str, w: int) -> str:
    return s + " " * max(w - _cols(s), 0)


def _card(x: TaskRecord, w: int) -> list[str]:
    """A task as 1-3 lines of at most ``w`` characters: ``#id subject``, its owner and blockers, its note."""
    lines = [_cut(f"#{x.id} {x.subject}", w)]
    about = []
    if x.owner:
        about.append(f"@{x.owner}")
    if x.blocked_by:
        about.append("after " + ",".join(f"#{b}" for b in x.blocked_by))
    if about:
        lines.append(_cut(" ".join(about), w, "   "))
    if x.note and x.status is TaskStatus.COMPLETED:
        lines.append(_cut(f"= {x.note}", w, "   "))
    return lines


def board_lines(tasks: list[TaskRecord], width: int = 100) -> list[str]:
    """The task board in three columns (pending, in progress, completed), each card cut to its column."""
    if not tasks:
        return ["task board: empty"]
    gap = 3
    w = max((width - 2 * gap) // 3, 16)
    cols = [[c for x in tasks if x.status is s for c in _card(x, w)] for s in TaskStatus]
    heads = [f"{s.value.replace('_', ' ').upper()} ({sum(1 for x in tasks if x.status is s)})" for s in TaskStatus]
    out = [(" " * gap).join(_pad(h, w) for h in heads).rstrip(), (" " * gap).join("-" * w for _ in heads)]
    for i in range(max(len(c) for c in cols)):
        out.append((" " * gap).join(_pad(c[i] if i < len(c) else "", w) for c in cols).rstrip())
    return out


def mail_lines(mail: list[MailRecord], width: int = 100) -> list[str]:
    """Messages one per line: ``sender -> recipient [kind] text`` (a broadcast once, to all its recipients)."""
    out: list[str] = []
    i = 0
    while i < len(mail):
        m = mail[i]
        to = [m.recipient]
        while (m.kind == "broadcast" and i + 1 < len(mail) and mail[i + 1].kind == "broadcast"
               and mail[i + 1].sender == m.sender and mail[i + 1].text == m.text):
            i += 1
            to.append(mail[i].recipient)
        i += 1
        head = f"  {m.sender} -> {','.join(to)}" + ("" if m.kind == "message" else f" [{m.kind}]") + ": "
        out.append(head + _cut(m.text, max(width - len(head), 10)))
    return out
