"""``subagents runs timeline ROOT_ID --html out.html``: a Gantt chart of an agent tree as one HTML file.

The page is self-contained (inline style, SVG and one small script; nothing is fetched, and its Content
Security Policy forbids fetching): one bar per agent from its spawn to its end, coloured by outcome,
in tree order and indented by depth, a dashed line from the parent's bar where it spawned the child,
the model calls (circles, above the middle of the bar) and tool calls (diamonds, below) on each bar, and
a tooltip on everything (tokens, cost, result; a call's arguments and result).  Below the chart, a table
sums the time, tokens and cost per agent type.

Every text that comes from a run (tasks, results, arguments, nicknames) is escaped: prompts and results
are untrusted.  Which call times are exact and which are estimated: :mod:`subagents.store.timeline`.
"""

from __future__ import annotations

import html
import math
import re
import time
from collections.abc import Callable
from pathlib import Path

from ..exceptions import UserError
from ..store.base import RunRecord, Store
from ..store.timeline import Lane, Mark, Timeline, TypeTotals, gather_timeline
from ._timeline_assets import CSP, OUTCOME_COLOURS, RUNNING_COLOUR, SCRIPT, STYLE

__all__ = ["brief_stats", "render_html", "write_timeline"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")  # all but tab and newline; lone surrogates
LABEL_W, CHART_W, ROW_H, AXIS_H, INDENT = 290, 940, 30, 26, 14
BAR_H = 16


def write_timeline(store: Store, rec: RunRecord, path: Path, now: float | None = None) -> str:
    """Write the timeline page of ``rec``'s tree (``rec`` and every run under it) to ``path``; return a line
    saying what was written."""
    tl = gather_timeline(store, rec, time.time() if now is None else now)
    try:
        path.write_text(render_html(tl), encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write the timeline to {path}: {e.strerror or e}; pass --html with a file in a "
                        "directory that exists and that you may write to") from None
    return (f"Wrote the timeline of {_n(len(tl.lanes), 'agent')} under {rec.nickname} "
            f"({_secs(tl.end - tl.start)}) to {path}")


def brief_stats(rec: RunRecord, now: float) -> str:
    """A run's running time, tokens and cost in a few words (for ``runs tree``): ``3.2s · 1.5k tok · $0.0123``."""
    if rec.started_at is None:
        return "not started"
    end = rec.ended_at if rec.ended_at is not None else now
    tokens = int(rec.usage.get("input_tokens", 0)) + int(rec.usage.get("output_tokens", 0))
    cost = "$ n/a" if rec.cost_usd is None else f"${rec.cost_usd:.4f}"
    going = "" if rec.is_final else " so far"
    return f"{_secs(max(end - rec.started_at, 0.0))}{going} · {_k(tokens)} tok · {cost}"


def render_html(tl: Timeline) -> str:
    """The whole page."""
    root = tl.root
    title = f"Timeline of {root.nickname}"
    head = (f"{root.agent_type} · {root.status}{'/' + root.outcome if root.outcome else ''} · "
            f"{_n(len(tl.lanes), 'agent')} · wall time {_secs(tl.end - tl.start)} · started "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(tl.start))}\ntask: {_clip(root.task, 300)}")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">{_e(head)}</p>',
        _legend(),
        _chart(tl),
        '<p class="note">Bars run from when an agent was spawned to when it ended; the pale part before a bar is '
        "the wait for a slot. Filled marks are dated by the store (a spawn, an approval, a run's start, a "
        "delivered announcement); hollow ones are placed by their order between those: the store keeps no "
        "time per model or tool call.</p>",
        "<h2>Summary by agent type</h2>",
        _summary(tl.totals(), tl.end - tl.start),
        '<div id="tip" role="tooltip" hidden></div>',
        f"<script>{SCRIPT}</script>",
        "</body></html>",
        "",
    ])


def _legend() -> str:
    items = [f'<span><i class="sw" style="background:{c}"></i>{_e(o)}</span>' for o, c in OUTCOME_COLOURS.items()]
    items.append(f'<span><i class="sw" style="background:{RUNNING_COLOUR}"></i>running</span>')
    marks = ('<span><svg width="12" height="12"><circle cx="6" cy="6" r="4" class="mark model exact"/></svg>'
             'model call</span><span><svg width="12" height="12"><path d="M6 1 L11 6 L6 11 L1 6 Z" '
             'class="mark tool exact"/></svg>tool call</span><span><svg width="12" height="12"><path '
             'd="M1 2 L11 2 L6 10 Z" class="mark announce"/></svg>announcement received</span>'
             '<span><svg width="12" height="12"><circle cx="6" cy="6" r="4" class="mark model guess"/></svg>'
             "hollow: time estimated</span>")
    return f'<div class="legend">{"".join(items)}{marks}</div>'


def _chart(tl: Timeline) -> str:
    span = max(tl.end - tl.start, 1e-3)

    def x(t: float) -> float:
        return LABEL_W + (t - tl.start) / span * CHART_W

    height = AXIS_H + ROW_H * len(tl.lanes) + 4
    rows = {la.rec.run_id: i for i, la in enumerate(tl.lanes)}
    out = [f'<svg id="chart" xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + CHART_W + 24}" '
           f'height="{height}" role="img" aria-label="timeline of the agent tree">',
           '<defs><pattern id="going" width="8" height="8" patternUnits="userSpaceOnUse" '
           f'patternTransform="rotate(45)"><rect width="8" height="8" fill="{RUNNING_COLOUR}"/>'
           '<rect width="3" height="8" fill="#ffffff" fill-opacity=".35"/></pattern></defs>',
           _axis(span, height)]
    for i in range(1, len(tl.lanes), 2):
        out.append(f'<rect class="stripe" x="0" y="{_y(i) - ROW_H / 2:.1f}" width="{LABEL_W + CHART_W + 24}" '
                   f'height="{ROW_H}"/>')
    for la in tl.lanes:  # the links under the bars
        p = rows.get(la.rec.parent_id or "")
        if p is not None:
            cx = x(la.start)
            out.append(f'<line class="link" x1="{cx:.1f}" y1="{_y(p):.1f}" x2="{cx:.1f}" '
                       f'y2="{_y(rows[la.rec.run_id]):.1f}"/>')
    for i, la in enumerate(tl.lanes):
        out.append(_lane(i, la, x))
    out.append("</svg>")
    return "\n".join(out)


def _y(i: int) -> float:
    return AXIS_H + ROW_H * i + ROW_H / 2


def _axis(span: float, height: int) -> str:
    step = _step(span)
    ticks = []
    n = 0
    while n * step <= span + 1e-9:
        px = LABEL_W + n * step / span * CHART_W
        ticks.append(f'<line x1="{px:.1f}" y1="{AXIS_H - 6}" x2="{px:.1f}" y2="{height}"/>'
                     f'<text x="{px:.1f}" y="{AXIS_H - 10}" text-anchor="middle">{_e(_tick(n * step, step))}</text>')
        n += 1
    return f'<g class="axis">{"".join(ticks)}</g>'


def _step(span: float) -> float:
    raw = span / 8
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return float(m * mag)
    return float(10 * mag)  # pragma: no cover - the loop always returns


def _tick(t: float, step: float) -> str:
    if t >= 120 and step >= 1:
        return f"{int(t // 60)}:{int(t % 60):02d}"
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{t:.{digits}f}s"


def _lane(i: int, la: Lane, xf: Callable[[float], float]) -> str:
    r, y = la.rec, _y(i)
    colour = RUNNING_COLOUR if la.running else OUTCOME_COLOURS.get(r.outcome or "", "#8a8f98")
    tip = _e(_bar_tip(la))
    lx = 6 + INDENT * la.depth
    room = max((LABEL_W - lx - 10) // 7, 8)  # characters that fit before the chart (about 7 px each)
    parts = [f'<g class="lane" data-run-id="{_e(r.run_id)}" data-parent-id="{_e(r.parent_id or "")}" '
             f'data-depth="{la.depth}" data-outcome="{_e(r.outcome or "running")}">',
             f'<text class="name" x="{lx}" y="{y + 4:.1f}" data-tip="{tip}">{_e(_clip(r.nickname, room))}'
             + (f' <tspan class="type">{_e(r.agent_type)}</tspan>' if len(r.nickname) + len(r.agent_type) < room
                else "") + "</text>"]
    if la.began > la.start:
        parts.append(f'<rect class="wait" x="{xf(la.start):.1f}" y="{y - 3:.1f}" '
                     f'width="{max(xf(la.began) - xf(la.start), 1):.1f}" height="6" data-tip="{tip}"/>')
    fill = ' class="bar running"' if la.running else f' class="bar" fill="{colour}"'
    parts.append(f'<rect{fill} x="{xf(la.began):.1f}" y="{y - BAR_H / 2:.1f}" '
                 f'width="{max(xf(la.end) - xf(la.began), 2):.1f}" height="{BAR_H}" rx="3" tabindex="0" '
                 f'data-tip="{tip}"/>')
    parts += [_mark(m, xf(m.at), y) for m in la.marks]
    parts.append("</g>")
    return "".join(parts)


def _mark(m: Mark, cx: float, y: float) -> str:
    how = "exact" if m.exact else "guess"
    err = " err" if m.error else ""
    when = "at" if m.exact else "about"
    tip = _e(f"{m.detail}\n({when} {time.strftime('%H:%M:%S', time.localtime(m.at))}"
             f".{int(m.at % 1 * 1000):03d}{'' if m.exact else ', estimated from the order of the calls'})")
    cls = f'class="mark {m.kind} {how}{err}" data-kind="{m.kind}" data-tip="{tip}"'
    if m.kind == "model":
        return f'<circle {cls} cx="{cx:.1f}" cy="{y - 4:.1f}" r="3.5"/>'
    if m.kind == "tool":
        yy = y + 4
        return (f'<path {cls} d="M{cx:.1f} {yy - 4:.1f} L{cx + 4:.1f} {yy:.1f} L{cx:.1f} {yy + 4:.1f} '
                f'L{cx - 4:.1f} {yy:.1f} Z"/>')
    top = y - BAR_H / 2 - 7
    return f'<path {cls} d="M{cx - 4:.1f} {top:.1f} L{cx + 4:.1f} {top:.1f} L{cx:.1f} {top + 7:.1f} Z"/>'


def _bar_tip(la: Lane) -> str:
    r = la.rec
    u = r.usage
    i, o = int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0))
    cache = (f" · cache read {_k(int(u.get('cache_read_tokens', 0)))} / write "
             f"{_k(int(u.get('cache_write_tokens', 0)))}") if u.get("cache_read_tokens") or u.get(
        "cache_write_tokens") else ""
    lines = [f"{r.nickname} · {r.agent_type}{' · background' if r.background else ''}",
             f"{r.status}{' / ' + r.outcome if r.outcome else ''}{f' ({r.limit})' if r.limit else ''}",
             f"ran {_secs(la.duration_s)}{' so far' if la.running else ''}"
             + (f" after waiting {_secs(la.began - la.start)} for a slot" if la.began - la.start >= 0.05 else ""),
             f"tokens {_k(i + o)} (in {_k(i)} / out {_k(o)}){cache}",
             f"cost {'n/a (no price for the model)' if r.cost_usd is None else f'${r.cost_usd:.4f}'}",
             f"{r.turns} turn{'' if r.turns == 1 else 's'} · {r.tool_calls} tool call{'' if r.tool_calls == 1 else 's'}"
             + (f" · model {r.model}" if r.model else ""),
             f"task: {_clip(r.task, 300)}"]
    if r.result_text:
        lines.append(f"result: {_clip(r.result_text, 400)}")
    if r.error:
        lines.append(f"error: {_clip(r.error, 300)}")
    return "\n".join(lines)


def _summary(totals: list[TypeTotals], wall: float) -> str:
    rows = []
    for t in totals:
        cost = f"${t.cost_usd:.4f}" + (f" (+{t.cost_unknown} n/a)" if t.cost_unknown else "")
        if t.cost_unknown == t.agents:
            cost = "n/a"
        name = "all agents" if t.agent_type == "all" else t.agent_type
        rows.append(f'<tr class="{"all" if t.agent_type == "all" else "type"}"><td>{_e(name)}</td>'
                    f"<td>{t.agents}</td><td>{_secs(t.seconds)}</td><td>{_k(t.input_tokens)}</td>"
                    f"<td>{_k(t.output_tokens)}</td><td>{_e(cost)}</td></tr>")
    return ('<table id="summary"><thead><tr><th>agent type</th><th>agents</th><th>running time</th>'
            "<th>input tokens</th><th>output tokens</th><th>cost</th></tr></thead><tbody>"
            + "".join(rows) + f'</tbody></table><p class="note">Wall time of the tree: {_secs(wall)}; running '
            "time sums the agents' own times (children run in parallel with their parents).</p>")


def _e(text: str) -> str:
    """Text made safe for HTML and SVG content and attribute values (quotes included)."""
    return html.escape(_printable(text), quote=True)


def _printable(text: str) -> str:
    """Drop the control characters HTML does not allow (a NUL, a form feed...), keep newlines and tabs; drop lone
    surrogates too (a page with one cannot be written as UTF-8)."""
    return _CONTROL.sub("", text)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _secs(s: float) -> str:
    if s < 60:
        return f"{s:.2f}s" if s < 10 else f"{s:.1f}s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h = m // 60
    return f"{h}h{m % 60:02d}m" if h < 48 else f"{h // 24}d{h % 24:02d}h"


def _k(n: int) -> str:
    return str(n) if n < 1000 else f"{n / 1000:.1f}k" if n < 1_000_000 else f"{n / 1_000_000:.2f}M"


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
