"""``subagents runs timeline``: hostile run text (nicknames, labels, tasks, errors, tool names) stays text.

The page is parsed with :mod:`html.parser`: whatever a run carries, the page holds only the renderer's own tags
and attributes, no event handler, no URL attribute, no comment, and one script, the fixed one.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from subagents.cli._timeline_assets import SCRIPT, STYLE
from subagents.cli.timeline import render_html
from subagents.store import RunRecord
from subagents.store.timeline import Lane, Mark, Timeline

PAYLOADS = ("</script><script>alert(1)</script>", "<img src=x onerror=alert(2)>", "javascript:alert(3)",
            '" onmouseover="alert(4)" x="', "' onfocus='alert(5)' '", "<!--", "-->", "<![CDATA[", "]]>",
            "\u2028\u2029", "</svg><script>alert(6)</script>", "<svg onload=alert(7)>", "&lt;script&gt;",
            "\x00\x0c\x1b\x85", "</title><script>alert(8)</script>", "</style><script>alert(9)</script>",
            '<a href="javascript:alert(10)">x</a>', "<iframe srcdoc='<script>alert(11)</script>'>",
            "<base href=//evil.example/>", "<meta http-equiv=refresh content='0;url=javascript:alert(12)'>")
EVIL = " ".join(PAYLOADS)
TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "span", "i", "svg", "defs",
        "pattern", "rect", "g", "line", "text", "tspan", "circle", "path", "table", "thead", "tbody", "tr", "th",
        "td", "script"}


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.raw: list[tuple[str, str]] = []  # (script|style, its text)
        self.comments: list[str] = []
        self._open = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]
        self._open = tag

    def handle_endtag(self, tag: str) -> None:
        self._open = ""

    def handle_data(self, data: str) -> None:
        if self._open in ("script", "style"):
            self.raw.append((self._open, data))

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_decl(self, decl: str) -> None:
        if decl.lower() != "doctype html":
            self.comments.append(decl)

    def unknown_decl(self, data: str) -> None:
        self.comments.append(data)


def _rec(suffix: str, parent: str | None, text: str) -> RunRecord:
    return RunRecord(text + suffix, text, text, text, text, parent_id=parent, label=text, model=text, status=text,
                     outcome=text, created_at=10.0, started_at=11.0, ended_at=20.0, limit=text, result_text=text,
                     error=text, usage={"input_tokens": 5, "output_tokens": 6}, cost_usd=0.5, turns=2, tool_calls=1)


def _timeline(text: str) -> Timeline:
    marks = [Mark(kind, 12.0, exact, text, text, err) for kind in ("model", "tool", "announce")
             for exact in (True, False) for err in (True, False)]
    a, b = _rec("a", None, text), _rec("b", text + "a", text)
    return Timeline([Lane(a, 0, 10.0, 11.0, 20.0, False, list(marks)),
                     Lane(b, 1, 12.0, 13.0, 19.0, True, list(marks))], 10.0, 20.0, 20.0)


def test_hostile_run_text_never_becomes_markup_or_script() -> None:
    page = render_html(_timeline(EVIL))
    parsed = Page()
    parsed.feed(page)
    parsed.close()
    assert set(parsed.tags) <= TAGS
    assert parsed.tags.count("script") == 1
    assert parsed.raw == [("style", STYLE), ("script", SCRIPT)]  # the fixed style and script, nothing else
    assert not parsed.comments
    names = {k for _, k, _ in parsed.attrs}
    assert not {k for k in names if k.startswith("on")}
    assert not names & {"href", "src", "xlink:href", "action", "formaction", "srcdoc"}
    assert [v for t, k, v in parsed.attrs if t == "meta" and k == "http-equiv"] == ["Content-Security-Policy"]
    tips = [v for _, k, v in parsed.attrs if k == "data-tip"]
    assert tips
    assert all(v is not None and "</script><script>alert(1)</script>" in v for v in tips)  # kept, as text


def test_a_lone_surrogate_does_not_stop_the_page_being_written(tmp_path: Path) -> None:
    page = render_html(_timeline("half a pair \ud800 here <b>"))
    out = tmp_path / "t.html"
    out.write_text(page, encoding="utf-8")  # a lone surrogate cannot be encoded: it is dropped
    assert "half a pair  here &lt;b&gt;" in out.read_text(encoding="utf-8")
