"""``subagents runs approve ID CALL_ID allow|always|deny [--request STAMP] [--message TEXT]``: answer, from any
terminal, a call of a Temporal-engine run that waits for a person (``subagents runs approvals ID`` lists them, each
with its ``request:`` stamp).  Both only read the run store (the answer goes to the engine): they open it read-only
(:mod:`.runs_store`).

A model may give a later turn's call the id of an earlier one (some OpenAI-compatible servers number each answer's
calls from 0): ``--request`` names the request the answer was decided on, and the engine refuses the answer when
another one waits under ``CALL_ID`` by then.  Without it, the answer goes to whatever waits under ``CALL_ID``."""

from __future__ import annotations

import asyncio

import click

from ..authority.approvals import Decision, visible
from ..exceptions import UserError
from .common import workdir
from .runs import _where, resolve_run, runs
from .runs_store import open_for_reading

__all__ = ["approvals", "approve", "runs"]


def _engine_url(ctx: click.Context) -> str:
    from ..config import load_settings

    url = load_settings(workdir(ctx)).engine_url
    if not url:
        raise UserError("approvals are answered through the Temporal engine: set [engine] url or SUBAGENTS_ENGINE "
                        "to its temporal://host:7233?task_queue=... address")
    return url


@runs.command("approvals")
@click.argument("run_ref", metavar="ID")
@_where
@click.pass_context
def approvals(ctx: click.Context, run_ref: str) -> int:
    """List the calls of a Temporal-engine run waiting for a person.

    Only reads the run store (a read-only one too).
    """
    from ..engines.temporal.client import TemporalEngine

    with open_for_reading(ctx) as store:
        rec = resolve_run(store, run_ref)

    async def go() -> list[dict[str, object]]:
        return await (await TemporalEngine.connect(_engine_url(ctx))).approvals(rec.run_id)

    pending = asyncio.run(go())
    if not pending:
        click.echo(f"{rec.nickname} ({rec.run_id}) waits for no approval")
    for p in pending:
        click.echo(f"{visible(str(p['id']))}  {visible(str(p['tool']))}({visible(str(p['arguments']))})  why: "
                   f"{visible(str(p['reason']))}  always rule: {visible(str(p['always_rule']))}  request: "
                   f"{visible(repr(p.get('created_at')))}")
    return 0


@runs.command("approve")
@click.argument("run_ref", metavar="ID")
@click.argument("call_id", metavar="CALL_ID")
@click.argument("answer", type=click.Choice(["allow", "always", "deny"]))
@click.option("--request", "stamp", default=None, metavar="STAMP",
              help="The request this answer is for (its 'request:' in `runs approvals`): refused if CALL_ID now waits "
                   "for another one.")
@click.option("--message", default=None, help="With deny: the reason the agent reads.")
@click.option("--rule", default=None, help="With always: the rule to allow (default: the request's).")
@_where
@click.pass_context
def approve(ctx: click.Context, run_ref: str, call_id: str, answer: str, stamp: str | None, message: str | None,
            rule: str | None) -> int:
    """Answer a call of a Temporal-engine run that waits for a person: allow (once), always (this run and the
    sub-agents it starts), or deny.

    Give --request (the request's stamp that `runs approvals` shows): a model may reuse a call id in a later turn,
    and the answer is then refused instead of reaching a call you have not seen.  Only reads the run store (a
    read-only one too): the answer goes to the engine.
    """
    from ..engines.temporal.client import TemporalEngine

    _check_options(answer, message, rule)
    created_at = _stamp(stamp)
    with open_for_reading(ctx) as store:
        rec = resolve_run(store, run_ref)
    decision = {"allow": Decision.allow(), "always": Decision.allow_always(rule),
                "deny": Decision.deny(message)}[answer]

    async def go() -> str:
        engine = await TemporalEngine.connect(_engine_url(ctx))
        try:
            if created_at is None:  # names no request: whatever waits under call_id (see the module docstring)
                return await engine.decide(rec.run_id, call_id, decision)
            return await engine.decide(rec.run_id, call_id, decision, created_at=created_at)
        except UserError as e:  # a refusal quotes the call waiting now: shown as a person should read it
            raise UserError(visible(str(e))) from None

    click.echo(f"{rec.nickname}: {visible(call_id)} {asyncio.run(go())}")
    return 0


def _stamp(text: str | None) -> float | None:
    """``--request``'s stamp (a request's ``created_at``), refused before anything is sent when it is none."""
    if text is None:
        return None
    try:
        stamp = float(text)
    except ValueError:
        stamp = float("nan")
    if stamp != stamp or stamp in (float("inf"), float("-inf")):
        raise click.UsageError(f"--request {visible(text)!r} is no request's stamp: give the 'request:' that "
                               "`subagents runs approvals ID` shows for the call")
    return stamp


def _check_options(answer: str, message: str | None, rule: str | None) -> None:
    """Refuse, before anything is sent, an option the answer would drop (``--rule`` is for ``always``, ``--message``
    for ``deny``) and a rule that does not parse (the worker would have remembered the request's own rule instead,
    without a word): the person learns what their answer really does."""
    from ..authority.rules import parse_rule

    if rule is not None and answer != "always":
        raise click.UsageError(f"--rule goes with the answer 'always' (it names what to allow from now on), not "
                               f"with {answer!r}")
    if message is not None and answer != "deny":
        raise click.UsageError(f"--message goes with the answer 'deny' (the reason the agent reads), not with "
                               f"{answer!r}")
    if rule is not None:
        try:
            parse_rule(rule, "--rule")
        except ValueError as e:
            raise click.UsageError(f"--rule: {visible(str(e))}") from None
