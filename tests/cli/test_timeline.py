"""``subagents runs timeline``: what the page holds (lanes, dated and estimated calls, summary) and that no run text
becomes markup.  The page in a real browser: ``test_timeline_browser.py``."""

from __future__ import annotations

import asyncio
import html
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.cli.timeline import brief_stats, render_html
from subagents.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from subagents.store import RunRecord
from subagents.store.base import AuditRecord
from subagents.store.sqlite import SQLiteStore
from subagents.store.timeline import Timeline, gather_timeline, place

from .timeline_tree import EVIL, build


@pytest.fixture
def recorded(isolated: Path) -> tuple[Path, str]:
    db = isolated.parent / "state.db"
    root = asyncio.run(build(isolated, db))
    return db, root


def _timeline(db: Path, root: str) -> Timeline:
    store = SQLiteStore(db)
    try:
        rec = store.get_run(root)
        assert rec is not None
        return gather_timeline(store, rec, time.time())
    finally:
        store.close()


def test_lanes_in_tree_order_with_calls_dated_by_the_store(recorded: tuple[Path, str]) -> None:
    tl = _timeline(*recorded)
    root, scanner, breaker = (la.rec for la in tl.lanes)
    assert [(la.rec.agent_type, la.depth, la.rec.outcome) for la in tl.lanes] == [
        ("general-purpose", 0, "ok"), ("explore", 1, "ok"), ("general-purpose", 1, "error")]
    assert scanner.parent_id == breaker.parent_id == root.run_id
    assert scanner.background
    assert not breaker.background
    assert tl.start == root.created_at
    assert tl.end == max(r.ended_at or 0 for r in (root, scanner, breaker))

    marks = [(m.kind, m.label, m.exact) for m in tl.lanes[0].marks]
    assert marks == [("model", "model call 1", True), ("tool", "spawn_agent", True), ("model", "model call 2", False),
                     ("tool", "spawn_agent", True), ("model", "model call 3", True), ("tool", "wait", False),
                     ("model", "model call 4", True), ("announce", "announcement received", True)]
    at = [m.at for m in tl.lanes[0].marks]
    assert at[0] == root.started_at  # the first call is made when the run starts
    assert (at[1], at[3]) == (scanner.created_at, breaker.created_at)  # a spawn: when its child was created
    assert at[4] == breaker.ended_at  # after a foreground child: once it ended
    assert at[6] == scanner.ended_at  # after a wait that returned the scanner
    assert at[1] < at[2] < at[3]
    assert at[4] < at[5] < at[6]
    assert "breaker" in tl.lanes[0].marks[3].detail
    assert "error" in tl.lanes[0].marks[3].detail
    assert [(m.label, m.exact) for m in tl.lanes[1].marks] == [
        ("model call 1", True), ("list_dir", False), ("model call 2", False)]
    assert tl.lanes[2].marks == []  # its model raised: no call recorded

    [gp, ex, every] = tl.totals()
    assert (gp.agent_type, gp.agents, gp.input_tokens, gp.output_tokens, gp.cost_unknown) == (
        "general-purpose", 2, 4000, 800, 1)
    assert gp.cost_usd == pytest.approx(0.024)
    assert ex.cost_usd == pytest.approx(0.012)
    assert (every.agents, every.input_tokens) == (3, 6000)
    assert every.cost_usd == pytest.approx(0.036)
    assert every.seconds == pytest.approx(sum(la.duration_s for la in tl.lanes))


def test_the_cli_writes_one_self_contained_page_where_run_text_stays_text(
    recorded: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, root = recorded
    out = tmp_path / "tl.html"
    assert main(["runs", "--store", f"sqlite:///{db}", "timeline", root[-8:], "--html", str(out)]) == 0
    assert capsys.readouterr().out.startswith("Wrote the timeline of 3 agents under general-purpose-ada (")
    page = out.read_text()
    tags = _Tags()
    tags.feed(page)
    assert tags.names <= PAGE_TAGS  # no <img>, no second <script>: the run's markup stayed text
    assert tags.scripts == 1  # only the page's own tooltip script
    assert tags.handlers == []  # no onerror=, onload=... attribute anywhere
    assert html.escape(EVIL, quote=True) in page  # the task, the results and a call's arguments, as text
    assert "default-src &#x27;none&#x27;" in page  # the CSP: nothing from the network
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # no external resource
    assert len(re.findall(r'<rect class="bar', page)) == 3
    assert '<td>general-purpose</td><td>2</td>' in page
    assert "$0.0360 (+1 n/a)" in page


def test_an_unknown_run_and_no_store_are_clear_errors(
    recorded: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = recorded
    out = tmp_path / "tl.html"
    assert main(["runs", "--store", f"sqlite:///{db}", "timeline", "nobody-here", "--html", str(out)]) == 2
    assert "no run matches 'nobody-here'" in capsys.readouterr().err
    assert main(["runs", "--store", f"sqlite:///{tmp_path / 'none.db'}", "timeline", "x", "--html", str(out)]) == 2
    assert "there is no run store yet" in capsys.readouterr().err
    assert not out.exists()
    bad = tmp_path / "missing-dir" / "tl.html"
    assert main(["runs", "--store", f"sqlite:///{db}", "timeline", "general-purpose-ada", "--html", str(bad)]) == 2
    assert capsys.readouterr().err == (f"error: cannot write the timeline to {bad}: No such file or directory; pass "
                                       "--html with a file in a directory that exists and that you may write to\n")


PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "span", "i", "svg", "defs",
             "pattern", "rect", "g", "line", "text", "tspan", "circle", "path", "table", "thead", "tbody", "tr",
             "th", "td", "script"}


class _Tags(HTMLParser):
    """The element names, the number of scripts and any event-handler attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.scripts = 0
        self.handlers: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.scripts += tag == "script"
        self.handlers += [(tag, k) for k, _ in attrs if k.startswith("on")]


def _use(i: int, name: str = "read_file") -> ToolUseBlock:
    return ToolUseBlock(f"c{i}", name, {"path": f"f{i}"})


def test_calls_without_a_stored_time_are_spread_evenly_and_dated_ones_stay_in_order() -> None:
    rec = RunRecord("r", "r", "explore-ada", "explore", "t", runs=1)
    msgs = [Message.user("t"), Message("assistant", [_use(1), _use(2), _use(3)]),
            Message("user", [ToolResultBlock(f"c{i}", "ok", is_error=i == 2) for i in (1, 2, 3)]),
            Message("assistant", [TextBlock("done")])]
    marks = place(rec, msgs, [], [], 10.0, 20.0)
    assert [(m.label, m.at, m.exact, m.error) for m in marks] == [
        ("model call 1", 10.0, True, False), ("read_file", 12.0, False, False), ("read_file", 14.0, False, True),
        ("read_file", 16.0, False, False), ("model call 2", 18.0, False, False)]
    # an approval dates the third call; one dated before an earlier call keeps the order (clamped up)
    audit = [AuditRecord("r", 19.0, "approval", {"tool": "read_file", "arguments": {"path": "f3"}}),
             AuditRecord("r", 11.0, "approval", {"tool": "read_file", "arguments": {"path": "f2"}})]
    marks = place(rec, msgs, [], audit, 10.0, 20.0)
    assert [(m.at, m.exact) for m in marks] == [(10.0, True), (10.5, False), (11.0, True), (19.0, True),
                                                (19.5, False)]
    resumed = RunRecord("r", "r", "explore-ada", "explore", "t", runs=2)  # started_at is the latest start
    assert not place(resumed, msgs, [], [], 10.0, 20.0)[0].exact


def test_brief_stats_for_runs_tree() -> None:
    done = RunRecord("r", "r", "n", "explore", "t", status="completed", started_at=100.0, ended_at=103.2,
                     usage={"input_tokens": 1200, "output_tokens": 300}, cost_usd=0.0123)
    assert brief_stats(done, 500.0) == "3.20s · 1.5k tok · $0.0123"
    going = RunRecord("r", "r", "n", "explore", "t", status="running", started_at=100.0)
    assert brief_stats(going, 175.0) == "1m15s so far · 0 tok · $ n/a"
    assert brief_stats(going, 100.0 + 3 * 86400 + 7200) == "3d02h so far · 0 tok · $ n/a"
    assert brief_stats(RunRecord("r", "r", "n", "explore", "t"), 1.0) == "not started"


def test_a_run_still_going_is_drawn_to_now(recorded: tuple[Path, str]) -> None:
    db, root = recorded
    store = SQLiteStore(db)
    try:
        rec = store.get_run(root)
        assert rec is not None
        store.update_run(rec.run_id, {"status": "running", "outcome": None, "ended_at": None})
        store.flush()
        rec = store.get_run(root)
        assert rec is not None
        now = (rec.started_at or 0) + 60
        tl = gather_timeline(store, rec, now)
    finally:
        store.close()
    assert tl.lanes[0].running
    assert tl.lanes[0].end == now == tl.end
    page = render_html(tl)
    assert 'class="bar running"' in page
    assert "so far" in page
