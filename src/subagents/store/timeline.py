"""What a timeline of an agent tree shows, read from a store: one lane per agent, in tree order, with its
model and tool calls placed in time.

The store keeps a run's spawn, start and end times, but no time per transcript message.  So a call's
moment is **exact** only where another stored fact dates it:

* a ``spawn_agent`` call happened when the child it made was created (the child's ``created_at``; the
  call's result names the child's id);
* a model call that follows a turn of foreground ``spawn_agent`` calls, or of ``wait`` calls that
  returned children's results, is made once those children ended (their ``ended_at``);
* a call that asked for approval happened when it was decided (the audit entry's ``at``);
* the first model call of a run started once is made when the run started (``started_at``);
* an announcement reached the parent at its ``delivered_at``.

Every other call is **estimated**: placed between the dated ones around it in transcript order.  Marks say
which they are (:attr:`Mark.exact`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..messages import Message, ToolResultBlock
from .base import AuditRecord, RunRecord, Store

__all__ = ["Lane", "Mark", "Timeline", "TypeTotals", "gather_timeline", "place", "tree_order"]

DETAIL_CHARS = 400  # how much of a call's arguments, text or result a mark carries


@dataclass(slots=True)
class Mark:
    """One moment on an agent's lane: a model call, a tool call or an announcement it received."""

    kind: str            # "model" | "tool" | "announce"
    at: float
    exact: bool          # dated by a stored fact (see the module docstring), else estimated from the order
    label: str           # short: "model call 2", "read_file"
    detail: str          # longer text for a tooltip (untrusted: the renderer escapes it)
    error: bool = False  # a tool call whose result is an error


@dataclass(slots=True)
class Lane:
    """One agent's row: its record, its depth under the timeline's root, its span and its marks."""

    rec: RunRecord
    depth: int
    start: float         # spawned (created_at)
    began: float         # started running (started_at; = start when unknown)
    end: float           # ended (ended_at), or the time the timeline was made for a run still going
    running: bool
    marks: list[Mark] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """Running time: from its start to its end (the time it waited for a slot excluded)."""
        return max(self.end - self.began, 0.0)


@dataclass(slots=True)
class TypeTotals:
    """The summary of one agent type: how many agents, their running time, tokens and cost."""

    agent_type: str
    agents: int = 0
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0  # agents whose cost is not known (a model without a price)

    def add(self, lane: Lane) -> None:
        self.agents += 1
        self.seconds += lane.duration_s
        self.input_tokens += int(lane.rec.usage.get("input_tokens", 0))
        self.output_tokens += int(lane.rec.usage.get("output_tokens", 0))
        if lane.rec.cost_usd is None:
            self.cost_unknown += 1
        else:
            self.cost_usd += lane.rec.cost_usd


@dataclass(slots=True)
class Timeline:
    """The lanes of a tree in tree order (a parent before its children, siblings by spawn time)."""

    lanes: list[Lane]
    start: float
    end: float
    made_at: float

    @property
    def root(self) -> RunRecord:
        return self.lanes[0].rec

    def totals(self) -> list[TypeTotals]:
        """Per agent type, in order of first appearance, then the whole tree as ``"all"``."""
        by: dict[str, TypeTotals] = {}
        every = TypeTotals("all")
        for lane in self.lanes:
            by.setdefault(lane.rec.agent_type, TypeTotals(lane.rec.agent_type)).add(lane)
            every.add(lane)
        return [*by.values(), every]


def tree_order(recs: Sequence[RunRecord], root: RunRecord) -> list[tuple[RunRecord, int]]:
    """``root`` and the runs under it, depth first, siblings oldest first, each with its depth under ``root``."""
    kids: dict[str | None, list[RunRecord]] = {}
    for r in recs:
        kids.setdefault(r.parent_id, []).append(r)
    for group in kids.values():
        group.sort(key=lambda r: (r.created_at, r.run_id))
    out: list[tuple[RunRecord, int]] = []
    todo: list[tuple[RunRecord, int]] = [(root, 0)]
    seen: set[str] = set()
    while todo:
        r, d = todo.pop()
        if r.run_id in seen:  # a corrupt store with a cycle in parent ids must not loop forever
            continue
        seen.add(r.run_id)
        out.append((r, d))
        todo += [(c, d + 1) for c in reversed(kids.get(r.run_id, []))]
    return out


def gather_timeline(store: Store, root: RunRecord, now: float) -> Timeline:
    """The timeline of ``root`` and every run under it (archived ones included), as the store holds them.

    ``now`` ends the lanes of runs still going (and of runs whose end the store does not know).
    """
    recs = store.list_runs(include_archived=True, root_id=root.root_id or root.run_id)
    if not any(r.run_id == root.run_id for r in recs):
        recs.append(root)
    order = tree_order(recs, root)
    by_id = {r.run_id: r for r, _ in order}
    kids: dict[str, list[RunRecord]] = {}
    for r, _ in order[1:]:
        kids.setdefault(r.parent_id or "", []).append(r)
    lanes: list[Lane] = []
    for r, depth in order:
        start = r.created_at or r.started_at or now
        began = max(r.started_at or start, start)
        end = max(r.ended_at if r.ended_at is not None else now, began)
        lane = Lane(r, depth, start, began, end, running=not r.is_final)
        lane.marks = place(r, store.transcript(r.run_id), kids.get(r.run_id, []), store.audit_of(r.run_id),
                           began, end)
        lane.marks += [Mark("announce", a.delivered_at, True, "announcement received",
                            _clip(f"from {_nick(by_id, a.child_id)}: {a.text}"))
                       for a in store.announcements_of(parent_id=r.run_id) if a.delivered_at is not None]
        lane.marks.sort(key=lambda m: m.at)
        lanes.append(lane)
    return Timeline(lanes, min(la.start for la in lanes), max(la.end for la in lanes), now)


def _nick(by_id: dict[str, RunRecord], run_id: str) -> str:
    r = by_id.get(run_id)
    return r.nickname if r else run_id


def _clip(text: str, n: int = DETAIL_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass(slots=True)
class _Event:
    mark: Mark
    at: float | None = None  # a stored fact's time, when one dates it
    ends: list[float] = field(default_factory=list)  # a foreground spawn: when its child ended


def place(rec: RunRecord, messages: Sequence[Message], children: Sequence[RunRecord],
          audit: Sequence[AuditRecord], began: float, end: float) -> list[Mark]:
    """The model and tool calls of ``rec``'s transcript as marks between ``began`` and ``end``.

    Calls dated by a stored fact (module docstring) keep their time (clamped to the lane, and never before
    a call made earlier); the others are spread evenly between their dated neighbours.
    """
    results = {b.tool_use_id: b for m in messages if m.role == "user" for b in m.tool_results}
    approvals = [a for a in audit if a.kind == "approval" and a.data.get("tool")]
    events: list[_Event] = []
    turn_ends: list[float] | None = None  # the end times of the previous turn, when all its calls are dated spawns
    for m in messages:
        if m.role != "assistant":
            continue
        n = sum(1 for e in events if e.mark.kind == "model") + 1
        uses = m.tool_uses
        asked = ", ".join(u.name for u in uses) if uses else "no tool: the answer"
        said = f"\nsaid: {_clip(m.text, 200)}" if m.text else ""
        text = f"model call {n}{said}\nasked for: {asked}"
        first = n == 1 and rec.runs <= 1
        events.append(_Event(Mark("model", 0.0, False, f"model call {n}", text),
                             at=began if first else (max(turn_ends) if turn_ends else None)))
        turn_ends = [] if uses else None
        for u in uses:
            res = results.get(u.id)
            ev = _Event(Mark("tool", 0.0, False, u.name, _tool_detail(u.name, u.arguments, res),
                             error=bool(res and res.is_error)))
            child = _child_of(u.name, res, children)
            if child is not None:
                ev.at = child.created_at
                if not child.background and child.ended_at is not None:
                    ev.ends.append(child.ended_at)
            else:
                ev.at = _approved_at(u.name, u.arguments, approvals)
                ev.ends += _waited_for(u.name, res, children)
            if turn_ends is not None and ev.ends:
                turn_ends += ev.ends
            else:
                turn_ends = None
            events.append(ev)
    return _spread(events, began, end)


def _tool_detail(name: str, arguments: dict[str, object], res: ToolResultBlock | None) -> str:
    args = json.dumps(arguments, ensure_ascii=False, default=str)
    out = "no result stored" if res is None else ("error: " if res.is_error else "result: ") + res.content
    return f"{name}({_clip(args, 200)})\n{_clip(out, 300)}"


def _child_of(name: str, res: ToolResultBlock | None, children: Sequence[RunRecord]) -> RunRecord | None:
    """The child a ``spawn_agent`` call made: the one whose id its result names."""
    if name != "spawn_agent" or res is None or res.is_error:
        return None
    return next((c for c in children if c.run_id in res.content), None)


def _waited_for(name: str, res: ToolResultBlock | None, children: Sequence[RunRecord]) -> list[float]:
    """When a ``wait`` that returned the results of children ended: once the last of them had ended."""
    if name != "wait" or res is None or res.is_error or " 0 still running" not in res.content.split("\n", 1)[0]:
        return []  # (a wait that timed out or returned at the first result ended later than its children)
    named = [c for c in children if c.run_id in res.content]
    if not named or any(c.ended_at is None for c in named):
        return []
    return [max(c.ended_at for c in named if c.ended_at is not None)]


def _approved_at(name: str, arguments: dict[str, object], approvals: list[AuditRecord]) -> float | None:
    """When a call asked for approval was decided (each audit entry dates one call, in order)."""
    for i, a in enumerate(approvals):
        if a.data.get("tool") == name and a.data.get("arguments") == arguments:
            del approvals[i]
            return a.at
    return None


def _spread(events: list[_Event], began: float, end: float) -> list[Mark]:
    """Give every event a time: dated ones their date (kept in order, inside the lane), others interpolated."""
    dated: list[tuple[int, float]] = [(-1, began)]
    floor = began
    for i, e in enumerate(events):
        if e.at is not None:
            floor = min(max(e.at, floor), end)
            dated.append((i, floor))
    dated.append((len(events), end))
    out: list[Mark] = []
    k = 0
    for i, e in enumerate(events):
        while dated[k + 1][0] < i:
            k += 1
        (i0, t0), (i1, t1) = dated[k], dated[k + 1]
        if i1 == i:
            e.mark.at, e.mark.exact = t1, True
        else:
            e.mark.at = t0 + (t1 - t0) * (i - i0) / (i1 - i0)
        out.append(e.mark)
    return out
