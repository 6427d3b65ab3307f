"""Restart recovery ("restore once"): take over the runs a dead process left unfinished.

When a :class:`~subagents.Runtime` first runs or spawns (or enters ``async with``), it calls
:func:`restore` once for its store:

1. Find the runs that are not final and whose owner is gone: its lease (see
   :mod:`subagents.store._lease`) is absent or expired, or its process is provably gone (same machine:
   that PID is dead, or is another process now).  Runs of a runtime whose lease is renewed are never
   touched, whatever PIDs say.  Of a SQLite store (a file: it may come with a cloned project), only the
   runs this user's runtimes started (:func:`subagents.owner_key.owned_by_this_user`) are taken over;
   the others stay as they are, never run unasked, and are named in one
   :class:`~subagents.owner_key.ForeignRunsWarning` (:func:`foreign_runs`).
2. ``on_restart="resume"`` (default): re-create each run's agent from its record and transcript
   and start it again.  A tool call the model made but whose result was never recorded is
   answered with an ``is_error`` tool result saying it was interrupted — it is **not** re-run,
   the model decides — except a ``spawn_agent`` call whose child was started (see
   :mod:`.pending_spawns`): it gets what it returns live, a foreground child's result once that
   child ends (a finished child is not run again), so the parent receives it exactly once.
   A transcript that already ends in a final answer is finished with it — unless it is a team member's
   or lead's (:mod:`.teams`): it waited for mail, and waits again.  (A teammate stopped by a signal is left
   unfinished too, so it comes back here: :mod:`.team_roles`.)
   ``on_restart="mark_interrupted"``: set each to ``errored`` / outcome ``interrupted``, keeping
   the last assistant text as the partial result (and announcing it to a background child's parent).
3. Adopt the finished runs of the same trees (so a resumed parent can ``wait`` on, or resume,
   its earlier children) and hand every undelivered announcement to its parent: into the inbox of
   a resumed parent, else into the parent's follow-ups (delivered when it is resumed).

Afterwards no record is ``running`` without a live task behind it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..authority.names import MODES
from ..authority.permissions import mode_rank
from ..exceptions import DefinitionError, SpawnError
from ..messages import Block, Message, TextBlock, ToolResultBlock, Usage
from ..owner_key import ForeignRunsWarning, foreign_runs_note, owned_by_this_user, owner_key
from ..store._lease import process_gone
from ..store.base import AnnouncementRecord, RunRecord, Store
from ..tools.todo import todos_from_transcript
from .isolation import interrupted_line, worktree_from_record
from .limits import charge_tree, limits_from_record
from .loop import Final
from .node import AgentNode
from .pending_spawns import pending_spawns, spawn_result
from .prompts import announcement_text
from .result import RunResult
from .status import Outcome, Status
from .structured import restore as restore_output

if TYPE_CHECKING:
    from .manager import AgentManager

__all__ = ["INTERRUPTED_TOOL", "RestoreReport", "adopt_children", "adopt_tree", "foreign_runs", "is_orphaned",
           "record_result", "restore"]

INTERRUPTED_TOOL = (
    "interrupted: the process running this tool stopped (a crash or restart) before the tool returned, "
    "so its result is unknown and it may or may not have taken effect; check before calling it again")
INTERRUPTED_RUN = ("interrupted: the process running this agent stopped (a crash or restart); "
                   "the partial result is kept — resume it with a message to continue")


@dataclass(slots=True)
class RestoreReport:
    resumed: list[str] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)      # transcripts that already held the final answer
    adopted: list[str] = field(default_factory=list)       # every node re-created (final ones included)
    announcements: list[str] = field(default_factory=list)  # undelivered announcements handed to parents
    failed: dict[str, str] = field(default_factory=dict)    # run id -> why it could not be re-created
    foreign: list[str] = field(default_factory=list)        # orphaned runs left alone: not this user's (warned)


def record_result(rec: RunRecord) -> RunResult:
    """The :class:`RunResult` a finished record describes (for ``rt.result`` after eviction or a restart)."""
    status = Status(rec.status) if rec.status in Status.__members__.values() else Status.ERRORED
    outcome = Outcome(rec.outcome) if rec.outcome else (Outcome.OK if status is Status.COMPLETED else Outcome.ERROR)
    dur = (rec.ended_at - rec.started_at) if rec.ended_at is not None and rec.started_at is not None else 0.0
    return RunResult(
        id=rec.run_id, nickname=rec.nickname, agent=rec.agent_type, status=status, outcome=outcome,
        text=rec.result_text or "", truncated=rec.truncated, limit=rec.limit, turns=rec.turns,
        usage=Usage.from_dict(rec.usage), cost_usd=rec.cost_usd, duration_s=max(dur, 0.0), error=rec.error,
        tool_calls=rec.tool_calls, parent_id=rec.parent_id, depth=rec.depth)


def is_orphaned(store: Store, rec: RunRecord, now: float) -> bool:
    """Whether ``rec``'s owning runtime is gone: no lease, an expired one, or a process provably gone."""
    if rec.owner == store.owner:
        return False
    if rec.owner.startswith("temporal:"):
        return False  # the Temporal engine drives it (docs/scale-out.md): its workers own it, not a process
    lease = store.lease(rec.owner) if rec.owner else None
    return lease is None or lease.expires_at <= now or process_gone(lease.process)


def adopt(mgr: AgentManager, rec: RunRecord, transcript: list[Message]) -> AgentNode:
    """Re-create the agent of ``rec`` in ``mgr`` (not started); raises ``SpawnError`` when impossible."""
    try:
        d = mgr.defs.get(rec.agent_type)
    except DefinitionError as e:
        raise SpawnError(str(e)) from None
    parent = mgr.nodes.get(rec.parent_id) if rec.parent_id else None
    mdl = mgr.factory.model_for(d, parent.core.model if parent else None, None)
    grant = mgr.factory.authority(d, parent.mode if parent else None, parent.core.registry if parent else None,
                                  rec.depth)
    if rec.permission_mode in MODES and mode_rank(rec.permission_mode) < mode_rank(grant.mode):
        grant.mode = rec.permission_mode  # it keeps the narrower mode it ran in; never a wider one
    node = mgr.assemble(d, parent, rec.depth, mdl, limits_from_record(rec.limits), rec.task, "", rec.label,
                        rec.background, rec.cleanup, transcript, grant, ids=(rec.run_id, rec.nickname))
    if rec.system_prompt:
        node.core.system = rec.system_prompt
    if rec.parent_id is None and (b := node.core.budget) is not None:  # what its tree spent in its last run
        charge_tree(b, rec, mgr.store.tree_spend)
    restore_output(node.core, rec.limits)  # a structured run must still end with a valid final_result
    node.core.ctx.todos[:] = todos_from_transcript(transcript)  # its todo list, from its last todo_write
    node.worktree = worktree_from_record(rec.worktree)
    node.root_id = rec.root_id or rec.run_id
    node.runs = rec.runs
    if rec.is_final:
        node.status = Status(rec.status)
        node.result = record_result(rec)
    node.children_complete = False
    mgr.nodes[node.id] = node
    if parent is not None and node.id not in parent.children:
        parent.children.append(node.id)
    if not rec.is_final and _takes_over(mgr.store, rec.owner):  # (never another user's: see foreign_runs)
        mgr.store.update_run(rec.run_id, {"owner": mgr.store.owner})
    return node


def adopt_children(mgr: AgentManager, node: AgentNode) -> None:
    """Re-create, from the store, the children of a restored ``node`` that are not in memory yet.

    A restore re-creates only the unfinished runs and their ancestors; the finished children of a
    restored parent are loaded when it asks for them (``wait`` without ids, an id it names).
    """
    if node.children_complete:
        return
    node.children_complete = True
    store = mgr.store
    store.flush()
    for cid in store.child_ids(node.id):
        if cid in mgr.nodes:
            continue
        rec = store.get_run(cid)
        if rec is None:
            continue
        try:
            adopt(mgr, rec, store.transcript(cid))
        except SpawnError:
            continue
    order = {c: i for i, c in enumerate(store.child_ids(node.id))}
    node.children.sort(key=lambda c: order.get(c, len(order)))


def adopt_tree(mgr: AgentManager, store: Store, root_id: str) -> list[AgentNode]:
    """Re-create every run of a tree not in memory (parents first); final runs stay final."""
    recs = sorted(store.list_runs(include_archived=True, root_id=root_id), key=lambda r: (r.depth, r.created_at))
    out = []
    for rec in recs:
        if rec.run_id in mgr.nodes or (rec.parent_id and rec.parent_id not in mgr.nodes):
            continue
        out.append(adopt(mgr, rec, store.transcript(rec.run_id)))
    return out


def _start(mgr: AgentManager, node: AgentNode, rec: RunRecord, report: RestoreReport) -> None:
    """Resume a re-created, unfinished agent from its transcript (or queue it for a slot, see SlotPool.take)."""
    core = node.core
    mgr.nicknames.hold(node.nickname)

    def launch(prompt: str | None, before: Callable[[], Awaitable[None]] | None = None) -> None:
        _launch(mgr, node, report, prompt, before)

    prompt: str | None = None
    last = core.messages[-1] if core.messages else None
    if _waited_for_mail(mgr, node, last):
        launch(None)
        return
    if last is None:
        prompt = rec.task
    elif last.role == "assistant" and last.tool_uses:
        ready: dict[str, ToolResultBlock] = {}
        waits: dict[str, tuple[RunRecord, AgentNode]] = {}
        for call_id, child in pending_spawns(mgr, node, last).items():  # spawned, not answered: no re-spawn
            kid = mgr.nodes.get(child.run_id)
            if child.is_final or child.background:
                ready[call_id] = spawn_result(mgr, call_id, child, record_result(child))
            elif kid is not None:
                waits[call_id] = (child, kid)  # resumed with this restore: its result comes when it ends
        if waits:
            async def hand_over() -> None:  # the resumed foreground children of last's spawn calls end first
                for call_id, (child_rec, kid) in waits.items():
                    ready[call_id] = spawn_result(mgr, call_id, child_rec, await mgr.wait_one(kid))
                _answer(node, last, ready)

            launch(None, hand_over)
            return
        _answer(node, last, ready)
    elif last.role == "assistant":  # the answer was recorded, the final status was not
        node.runs = max(node.runs, 1)
        mgr.finish(node, core.result(Final(last.text)))
        report.finished.append(node.id)
        return
    launch(prompt)


def _launch(mgr: AgentManager, node: AgentNode, report: RestoreReport, prompt: str | None,
            before: Callable[[], Awaitable[None]] | None = None) -> None:
    if mgr.slots.take(node, mgr.nodes.get(node.parent_id) if node.parent_id else None):
        mgr.start(node, prompt, before=before)
    else:
        ahead = mgr.slots.enqueue(node, prompt, before)
        mgr.recorder.emit(node, "subagent_queued", {"ahead": ahead})
    report.resumed.append(node.id)


def _waited_for_mail(mgr: AgentManager, node: AgentNode, last: Message | None) -> bool:
    """Give a team member or lead its role back; ``True`` if its transcript ends idle (it waits again)."""
    idle = last is not None and last.role == "assistant" and not last.tool_uses
    return mgr.teams is not None and mgr.teams.adopt(node, idle=idle) and idle


def _answer(node: AgentNode, last: Message, ready: dict[str, ToolResultBlock]) -> None:
    """Record the results of ``last``'s calls: those in ``ready``, *interrupted* for the others."""
    core = node.core
    content: list[Block] = [ready.get(b.id) or ToolResultBlock(b.id, INTERRUPTED_TOOL, True) for b in last.tool_uses]
    content.extend(TextBlock(t) for t in core.inbox.drain())  # the tool boundary: announcements join it
    m = Message("user", content)
    core.messages.append(m)
    if core.on_message is not None:
        core.on_message(m)


def _mark_interrupted(store: Store, rec: RunRecord, now: float, result_max_chars: int) -> None:
    text = next((m.text for m in reversed(store.transcript(rec.run_id)) if m.role == "assistant" and m.text), "")
    if line := interrupted_line(rec.worktree):  # its worktree and branch stay: say where its changes are
        text = f"{text}\n\n{line}" if text else line
    fields = {"status": str(Status.ERRORED), "outcome": str(Outcome.INTERRUPTED), "ended_at": now,
              "truncated": True, "result_text": text, "error": INTERRUPTED_RUN}
    ann = None
    if rec.background and rec.parent_id:
        done = RunRecord(**{**rec.to_dict(), **fields})
        ann = AnnouncementRecord(f"{rec.run_id}:{max(rec.runs, 1)}", rec.parent_id, rec.run_id,
                                 announcement_text(record_result(done), rec.label, result_max_chars), now)
    store.finish_run(rec.run_id, fields, ann)


def restore(mgr: AgentManager, *, on_restart: str = "resume", now: float | None = None) -> RestoreReport:
    """Take over what a dead process left (see the module docstring).  Needs a running event loop."""
    store = mgr.store
    now = time.time() if now is None else now
    report = RestoreReport()
    store.flush()
    gone: dict[str, bool] = {}  # by owner: a store of many runs of few owners asks for each lease once
    open_runs = [r for status in (str(Status.PENDING_INIT), str(Status.RUNNING))
                 for r in store.list_runs(include_archived=True, status=status)
                 if r.run_id not in mgr.nodes and (gone[r.owner] if r.owner in gone else
                                                   gone.setdefault(r.owner, is_orphaned(store, r, now)))]
    open_runs, foreign = foreign_runs(store, open_runs)
    report.foreign = [r.run_id for r in foreign]
    open_runs.sort(key=lambda r: r.created_at)
    # take them over atomically: a runtime restoring at the same moment gets the others, never the same
    claimed = store.claim_runs({r.run_id: r.owner for r in open_runs})
    open_runs = [r for r in open_runs if r.run_id in claimed]
    if on_restart == "mark_interrupted":
        for r in open_runs:
            _mark_interrupted(store, r, now, mgr.cfg.result_max_chars)
            report.interrupted.append(r.run_id)
        store.flush()
        open_runs = []
    open_ids = {r.run_id for r in open_runs}
    # an unfinished run not taken over here is never re-created: adopt() would make it this runtime's (unstarted)
    needed = [r for r in _with_ancestors(store, [*open_runs, *_parents_with_pending(store, now)])
              if r.is_final or r.run_id in open_ids]
    by_id = _adopt_records(mgr, needed, open_ids, now, report)
    for r in open_runs:  # a run whose tree could not be re-created (its parent record is gone)
        if r.run_id not in by_id and r.run_id not in report.failed:
            _mark_interrupted(store, r, now, mgr.cfg.result_max_chars)
            report.interrupted.append(r.run_id)
    for a in store.pending_announcements():  # before the starts: they join the first message of the resumed run
        _hand_over(mgr, a, report)
    for run_id in [i for i in by_id if i in open_ids]:
        node, rec = by_id[run_id]
        _start(mgr, node, rec, report)
    for run_id in report.resumed:  # announcements queued while the parent was not started yet go to its inbox
        node = by_id[run_id][0]
        for a in node.followups:
            node.core.inbox.put(a.text, key=f"ann:{a.id}")
        node.followups = []
    if mgr.teams is not None:  # teammates whose runs stay ended: idle (resumable), not "working" (team_roles.py)
        mgr.teams.after_restore()
    return report


def _checks_owners(store: Store) -> bool:
    """Whether recovery takes over only this user's runs of ``store``: a SQLite store's, a file that may have come
    with the project.  (A PostgreSQL store is a server the deployment set up, shared by its processes — other users,
    other machines — whose runs must be recovered; a memory store's runs are this process's.)"""
    return str(getattr(store, "url", "")).startswith("sqlite:")


def _takes_over(store: Store, owner: str) -> bool:
    """Whether this runtime may make the runs of ``owner`` its own unasked (of a SQLite store: only this user's)."""
    return owner == store.owner or not _checks_owners(store) or owned_by_this_user(owner)


def foreign_runs(store: Store, orphans: list[RunRecord]) -> tuple[list[RunRecord], list[RunRecord]]:
    """``orphans`` split into those recovery may take over and those this user's runtimes did not start (a
    shipped store's, another user's; warned about here, with a key that cannot be used, in one warning)."""
    if not _checks_owners(store):
        return orphans, []
    mine: list[RunRecord] = []
    others: list[RunRecord] = []
    ours: dict[str, bool] = {}  # by owner (an HMAC each: 1,000,000 runs of one shipped owner took 96 s)
    for r in orphans:
        taken = ours[r.owner] if r.owner in ours else ours.setdefault(r.owner, _takes_over(store, r.owner))
        (mine if taken else others).append(r)
    problem = owner_key().problem
    if others or problem:
        others.sort(key=lambda r: r.created_at)
        where = str(getattr(store, "path", None) or getattr(store, "url", ""))
        warnings.warn(ForeignRunsWarning(foreign_runs_note(where, [(r.nickname, r.run_id) for r in others],
                                                           problem)), stacklevel=2)
    return mine, others


def _parents_with_pending(store: Store, now: float) -> list[RunRecord]:
    """Parents whose undelivered announcements this process may deliver (the parent is ours or orphaned)."""
    out: dict[str, RunRecord] = {}
    for a in store.pending_announcements():
        if a.parent_id in out:
            continue
        rec = store.get_run(a.parent_id)
        if rec is not None and (rec.owner == store.owner or is_orphaned(store, rec, now)):
            out[rec.run_id] = rec
    return list(out.values())


def _with_ancestors(store: Store, recs: list[RunRecord]) -> list[RunRecord]:
    """``recs`` and every ancestor of theirs, parents before children (only these are re-created)."""
    found = {r.run_id: r for r in recs}
    todo = [r.parent_id for r in recs if r.parent_id]
    while todo:
        pid = todo.pop()
        if pid is None or pid in found:
            continue
        rec = store.get_run(pid)
        if rec is not None:
            found[pid] = rec
            if rec.parent_id:
                todo.append(rec.parent_id)
    return sorted(found.values(), key=lambda r: (r.depth, r.created_at))


def _adopt_records(mgr: AgentManager, recs: list[RunRecord], open_ids: set[str], now: float,
                   report: RestoreReport) -> dict[str, tuple[AgentNode, RunRecord]]:
    store = mgr.store
    by_id: dict[str, tuple[AgentNode, RunRecord]] = {}
    for rec in recs:
        if rec.run_id in mgr.nodes or (rec.parent_id and rec.parent_id not in mgr.nodes):
            continue
        try:
            node = adopt(mgr, rec, store.transcript(rec.run_id))
        except SpawnError as e:
            report.failed[rec.run_id] = str(e)
            if rec.run_id in open_ids:
                store.finish_run(rec.run_id, {"status": str(Status.ERRORED), "outcome": str(Outcome.INTERRUPTED),
                                              "ended_at": now, "error": f"{INTERRUPTED_RUN} (not resumable: {e})"},
                                 None)
            continue
        by_id[rec.run_id] = (node, rec)
        report.adopted.append(rec.run_id)
    return by_id


def _hand_over(mgr: AgentManager, a: AnnouncementRecord, report: RestoreReport) -> None:
    parent = mgr.nodes.get(a.parent_id)
    if parent is None:
        return
    queued = parent.core.inbox.keys()
    if any(f.id == a.id for f in parent.followups) or f"ann:{a.id}" in queued:
        return
    if parent.status.is_final():
        parent.followups.append(a)
    else:
        parent.core.inbox.put(a.text, key=f"ann:{a.id}")
    report.announcements.append(a.id)
