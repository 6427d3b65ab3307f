"""``web_fetch`` against pages and URLs built to break it: HTML that makes the conversion recurse or crawl,
charsets whose codec cannot replace bad bytes, and hosts written with the dots IDNA reads as ``.`` but a URL
parser (and so a ``web_fetch(domain:...)`` rule) does not.  Every case ends as a tool result or a tool error
for the model, in bounded time, with the event loop free meanwhile."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.messages import ToolUseBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools import web
from subagents.tools.base import ToolContext, ToolRegistry
from subagents.tools.web import web_fetch_tool

DEEP = b"<html><body>" + b"<div>" * 5000 + b"deep words" + b"</div>" * 5000 + b"</body></html>"
MANY = b"<html><body>" + b"".join(b"<p>para %d</p>" % i for i in range(3000)) + b"</body></html>"
LIST = b"<html><body><ol>" + b"".join(b"<li>item %d</li>" % i for i in range(3000)) + b"</ol></body></html>"
UNCLOSED = b"<p>start</p>" + b"<a " * 6000  # html.parser rescans to the end for each: minutes at 2 MB
MARKED = b"<p>before</p><![foo bar]]><p>after</p>"  # html.parser rejects an unknown marked section


class Handler(BaseHTTPRequestHandler):
    hits: list[str] = []  # noqa: RUF012 - shared by the test and the server thread

    def do_GET(self) -> None:
        Handler.hits.append(self.path)
        if self.path.startswith("/charset/"):
            body, ctype = "café au lait".encode(), "text/plain; charset=" + self.path.removeprefix("/charset/")
        else:
            pages = {"/deep": DEEP, "/many": MANY, "/list": LIST, "/unclosed": UNCLOSED, "/marked": MARKED}
            body, ctype = pages.get(self.path, b"SECRET"), "text/html"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    Handler.hits = []
    yield int(srv.server_address[1])
    srv.shutdown()
    srv.server_close()


LOCAL = web_fetch_tool(allow_private_hosts=["127.0.0.1"])


async def call(ctx: ToolContext, url: str) -> tuple[str, bool]:
    r = await ToolRegistry([LOCAL]).execute(ToolUseBlock("c1", "web_fetch", {"url": url}), ctx)
    return str(r.content), r.is_error


async def test_deeply_nested_html_is_converted_not_a_recursion_error(ctx: ToolContext, port: int) -> None:
    out, err = await call(ctx, f"http://127.0.0.1:{port}/deep")
    assert not err, out[:300]
    assert "deep words" in out


async def test_html_past_the_tag_cap_is_left_out_and_said_so(
        ctx: ToolContext, port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web, "MAX_TAGS", 1000, raising=False)
    out, err = await call(ctx, f"http://127.0.0.1:{port}/many")
    assert not err, out[:300]
    assert "para 10\n" in out
    assert "para 2999" not in out
    assert "page truncated" in out


async def test_the_conversion_runs_off_the_event_loop_and_within_the_deadline(
        ctx: ToolContext, port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(body: str, ctype: str) -> tuple[str, bool, str]:  # stands for a page that is slow to convert
        time.sleep(3)
        return body, False, ""

    monkeypatch.setattr(web, "_to_markdown", slow)
    monkeypatch.setattr(web, "TOTAL_TIMEOUT_S", 0.5)
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    try:
        out, err = await call(ctx, f"http://127.0.0.1:{port}/many")
    finally:
        ticker.cancel()
    assert time.monotonic() - started < 2.5
    assert max(gaps) < 1.0
    assert err
    assert "took longer than 0.5 s" in out


async def test_a_page_slow_to_convert_comes_back_as_plain_text(
        ctx: ToolContext, port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web, "CONVERT_S", 0.0, raising=False)  # numbering an <ol>'s items is quadratic
    out, err = await call(ctx, f"http://127.0.0.1:{port}/list")
    assert not err, out[:300]
    assert "item 2999" in out
    assert "plain text is shown instead" in out


async def test_unclosed_tags_are_parsed_in_linear_time(ctx: ToolContext, port: int) -> None:
    started = time.monotonic()
    out, err = await call(ctx, f"http://127.0.0.1:{port}/unclosed")
    assert time.monotonic() - started < 3
    assert not err, out[:300]
    assert "start" in out


async def test_a_marked_section_the_parser_rejects_is_read_as_a_comment(ctx: ToolContext, port: int) -> None:
    out, err = await call(ctx, f"http://127.0.0.1:{port}/marked")
    assert not err, out[:300]
    assert "before\n\nafter" in out


@pytest.mark.parametrize("charset", ["idna", "undefined", "punycode", "unicode_escape", "raw-unicode-escape", "base64",
                                     "rot13", "no-such-charset"])
async def test_a_charset_whose_codec_cannot_replace_falls_back_to_utf8(
        ctx: ToolContext, port: int, charset: str) -> None:
    out, err = await call(ctx, f"http://127.0.0.1:{port}/charset/{charset}")
    assert not err, out
    assert "café au lait" in out


@pytest.mark.parametrize("dot", ["\u3002", "\uff0e", "\uff61"])
async def test_a_host_with_a_non_ascii_dot_is_refused(ctx: ToolContext, port: int, dot: str) -> None:
    out, err = await call(ctx, f"http://127{dot}0{dot}0{dot}1:{port}/secret")
    assert err
    assert "non-ASCII dot" in out
    assert not Handler.hits


@pytest.mark.parametrize("dot", ["\u3002", "\uff0e", "\uff61"])
async def test_a_non_ascii_dot_does_not_slip_past_a_domain_deny_rule(
        workdir: Path, port: int, monkeypatch: pytest.MonkeyPatch, dot: str) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, p: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("docs.internal", b"docs.internal"):
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", int(p)))]
        return real(host, p, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    seen: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse("", [ToolCall("web_fetch", {"url": f"http://docs{dot}internal:{port}/secret"})])
        seen.append(repr(req.messages[-1]))
        return ModelResponse("done")

    tool = web_fetch_tool(allow_private_hosts=["docs.internal"])
    async with Runtime(FunctionModel(fn), workdir=workdir, store="memory://", tools=[tool], permission_mode="yolo",
                       deny=["web_fetch(domain:docs.internal)"]) as rt:
        await rt.run("fetch")
    assert not Handler.hits
    assert "SECRET" not in seen[-1]
