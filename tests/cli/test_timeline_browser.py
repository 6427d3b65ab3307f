"""The timeline page in a real browser: Debian's ``chromium`` driven by playwright (no browser download),
opening the file written by ``subagents runs timeline``.

These tests FAIL when chromium is missing (CI installs it with apt-get): set ``CHROMIUM`` to its path if it
is not ``chromium`` on the PATH.  Each saves a screenshot under its pytest temporary directory and prints
where (``pytest -s`` shows it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, FloatRect, Locator, Page, sync_playwright

from subagents.cli._timeline_assets import OUTCOME_COLOURS
from subagents.cli.main import main
from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore

from .test_demo import tree as demo_tree  # noqa: F401 - the demo's directory fixture
from .timeline_tree import EVIL, build


@pytest.fixture
def browser() -> Iterator[Browser]:
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed: the timeline's browser tests need it (Debian: apt-get install -y "
                    "chromium; .ci/run installs it), or set CHROMIUM to a Chromium binary")
    with sync_playwright() as p:
        # --no-sandbox: Chromium's own sandbox refuses to run as root (CI containers)
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _open(browser: Browser, page_file: Path) -> tuple[Page, list[str], list[str]]:
    """The page opened from its file, with the URLs it requested and the console errors it logged."""
    page = browser.new_page(viewport={"width": 1320, "height": 700})
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    return page, requests, errors


def _timeline(db: Path, root: str, out: Path) -> None:
    assert main(["runs", "--store", f"sqlite:///{db}", "timeline", root, "--html", str(out)]) == 0
    assert out.is_file()


def _shot(page: Page, path: Path) -> None:
    page.mouse.move(5, 5)  # no tooltip over the chart
    page.locator("#tip").wait_for(state="hidden")
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    print(f"\ntimeline screenshot: {path}")


@pytest.fixture
def tree_page(isolated: Path, tmp_path: Path) -> tuple[Path, str]:
    """The page of :mod:`timeline_tree`'s tree, and its root's id."""
    db = isolated.parent / "state.db"
    root = asyncio.run(build(isolated, db))
    out = tmp_path / "timeline.html"
    _timeline(db, root, out)
    return out, root


# (the pages are made before the browser starts: playwright's sync API runs an event loop in the thread)
def test_the_tree_in_chromium_bars_nesting_tooltip_and_no_network(tree_page: tuple[Path, str], browser: Browser,
                                                                  tmp_path: Path) -> None:
    out, root = tree_page
    page, requests, errors = _open(browser, out)

    lanes = page.locator("g.lane")
    assert lanes.count() == 3
    assert page.locator("rect.bar").count() == 3
    rows = [(lanes.nth(i).get_attribute("data-parent-id"), lanes.nth(i).get_attribute("data-depth"),
             lanes.nth(i).get_attribute("data-outcome")) for i in range(3)]
    assert rows == [("", "0", "ok"), (root, "1", "ok"), (root, "1", "error")]
    names = [_box(lanes.nth(i).locator("text.name")) for i in range(3)]
    root_bar, scan_bar, break_bar = (_box(lanes.nth(i).locator("rect.bar")) for i in range(3))
    assert names[0]["x"] < names[1]["x"] == names[2]["x"]  # children indented
    assert names[0]["y"] < names[1]["y"] < names[2]["y"]  # a row each, in tree order
    assert root_bar["x"] < scan_bar["x"] < break_bar["x"]  # spawned in that order, after the root started
    assert scan_bar["x"] + scan_bar["width"] <= root_bar["x"] + root_bar["width"] + 1  # waited for by the root
    fills = [lanes.nth(i).locator("rect.bar").evaluate("e => getComputedStyle(e).fill") for i in range(3)]
    assert fills[0] == fills[1] == _rgb(OUTCOME_COLOURS["ok"])
    assert fills[2] == _rgb(OUTCOME_COLOURS["error"])
    assert page.locator("g.lane").nth(0).locator("[data-kind=model]").count() == 4
    assert page.locator("g.lane").nth(0).locator("[data-kind=tool]").count() == 3
    assert page.locator("g.lane").nth(1).locator("[data-kind=tool]").count() == 1

    tip = page.locator("#tip")
    assert tip.is_hidden()
    _hover_bar(page, lanes.nth(1))
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "explore · background" in text
    assert "tokens 2.4k (in 2.0k / out 400)" in text
    assert "cost $0.0120" in text
    assert f"result: Found the files. {EVIL}" in text  # the result's markup shown as text
    _hover_bar(page, lanes.nth(2))
    assert "error: model 'function' failed: RuntimeError: the breaker's model broke" in tip.inner_text()
    lanes.nth(1).locator("[data-kind=tool]").hover()
    assert tip.inner_text().startswith('list_dir({"path": "."})\nresult: ')
    page.mouse.move(5, 690)
    tip.wait_for(state="hidden")

    assert page.evaluate("typeof window.__pwned") == "undefined"  # no injected script or handler ran
    assert page.locator("img").count() == 0
    assert requests == [out.as_uri()]  # the page itself, nothing else: no network needed
    assert errors == []  # no CSP violation, no script error
    assert page.locator("#summary tr.type").count() == 2
    assert page.locator("#summary tr.all td").all_inner_texts() == ["all agents", "3", page.locator(
        "#summary tr.all td").nth(2).inner_text(), "6.0k", "1.2k", "$0.0360 (+1 n/a)"]
    _shot(page, tmp_path / "timeline.png")


@pytest.fixture
def demo_page(demo_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
              ) -> tuple[Path, RunRecord, list[RunRecord]]:
    """The page of the tree ``subagents demo`` records, its root and its children."""
    db = tmp_path / "demo.db"
    monkeypatch.setenv("SUBAGENTS_STORE", f"sqlite:///{db}")
    assert main(["demo", "--cwd", str(demo_tree)]) == 0
    store = SQLiteStore(db)
    try:
        recs = store.list_runs(include_archived=True)
    finally:
        store.close()
    [root] = [r for r in recs if r.parent_id is None]
    kids = [r for r in recs if r.parent_id == root.run_id]
    assert kids
    assert all(k.agent_type == "explore" and k.background for k in kids)

    out = tmp_path / "demo-timeline.html"
    _timeline(db, root.nickname, out)
    assert len(recs) == 1 + len(kids)
    return out, root, kids


def test_the_demo_tree_opens_in_chromium(demo_page: tuple[Path, RunRecord, list[RunRecord]], browser: Browser,
                                         tmp_path: Path) -> None:
    out, root, kids = demo_page
    page, requests, errors = _open(browser, out)
    lanes = page.locator("g.lane")
    assert lanes.count() == 1 + len(kids)
    assert [lanes.nth(i).get_attribute("data-parent-id") for i in range(lanes.count())] == [
        "", *[root.run_id] * len(kids)]
    assert {lanes.nth(i).get_attribute("data-outcome") for i in range(lanes.count())} == {"ok"}
    assert page.locator("h1").inner_text() == f"Timeline of {root.nickname}"
    _hover_bar(page, lanes.nth(0))
    assert page.locator("#tip").inner_text().startswith(f"{root.nickname} · {root.agent_type}")
    assert requests == [out.as_uri()]
    assert errors == []
    _shot(page, tmp_path / "demo-timeline.png")


def _hover_bar(page: Page, lane: Locator) -> None:
    """Put the pointer on ``lane``'s bar where no mark lies over it: a tool call's mark drawn over the bar's middle
    took the pointer of a plain ``hover()`` there (the demo's real timings put one there now and then)."""
    lane.locator("rect.bar").scroll_into_view_if_needed()
    bar = _box(lane.locator("rect.bar"))
    marks = [_box(m) for m in lane.locator("[data-kind]").all()]
    y = bar["y"] + bar["height"] / 2
    for dx in range(2, int(bar["width"]) - 1):
        x = bar["x"] + dx
        if not any(m["x"] - 2 <= x <= m["x"] + m["width"] + 2 and m["y"] - 2 <= y <= m["y"] + m["height"] + 2
                   for m in marks):
            page.mouse.move(x, y)
            return
    raise AssertionError("marks cover the whole bar: no point of it to hover")


def _box(loc: Locator) -> FloatRect:
    box = loc.bounding_box()
    assert box is not None, "the element is not displayed"
    return box


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"
