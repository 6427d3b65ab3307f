"""``web_fetch``: a loopback server (allowed explicitly), HTML -> Markdown, caps, redirects, refusals, permissions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.messages import ToolUseBlock
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.base import Tool, ToolContext, ToolRegistry
from subagents.tools.web import MAX_CHARS, web_fetch, web_fetch_tool

PAGE = (b"<html><head><title>T</title><style>p{color:red}</style></head><body><h1>Release notes</h1>"
        b"<p>Version <b>2.1</b> adds <a href='/docs'>docs</a>.</p><script>alert(1)</script></body></html>")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        routes = {
            "/page": (200, "text/html; charset=utf-8", PAGE),
            "/big": (200, "text/plain", b"x" * (MAX_CHARS * 2)),
            "/img": (200, "image/png", b"\x89PNG...."),
            "/missing": (404, "text/plain", b"not here"),
        }
        if self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.end_headers()
            return
        if self.path == "/away":
            self.send_response(301)
            self.send_header("Location", f"http://localhost:{self.server.server_address[1]}/page")
            self.end_headers()
            return
        status, ctype, body = routes.get(self.path, (404, "text/plain", b"?"))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


LOCAL = web_fetch_tool(allow_private_hosts=["127.0.0.1"])


async def call(ctx: ToolContext, tool: Tool, **args: object) -> tuple[str, bool]:
    r = await ToolRegistry([tool]).execute(ToolUseBlock("c1", "web_fetch", dict(args)), ctx)
    return str(r.content), r.is_error


async def test_html_becomes_markdown_with_the_prompt(ctx: ToolContext, server: str) -> None:
    out, err = await call(ctx, LOCAL, url=f"{server}/page", prompt="what changed?")
    assert not err
    assert out.startswith(f"URL: {server}/page\nStatus: 200\nAsked: what changed?\n\n")
    assert "# Release notes" in out
    assert "Version **2.1** adds [docs](/docs)." in out
    assert "alert" not in out
    assert "color:red" not in out


async def test_size_cap_and_non_text(ctx: ToolContext, server: str) -> None:
    out, err = await call(ctx, LOCAL, url=f"{server}/big")
    assert not err
    assert out.endswith(f"[... page truncated: the first {MAX_CHARS:,} characters shown ...]")
    assert out.count("x") == MAX_CHARS
    out, err = await call(ctx, LOCAL, url=f"{server}/img")
    assert err
    assert "is image/png, not text or HTML" in out
    out, err = await call(ctx, LOCAL, url=f"{server}/missing")
    assert not err
    assert "Status: 404" in out
    assert "(the server answered with an error, HTTP 404)" in out


async def test_redirects_same_host_followed_other_host_reported(ctx: ToolContext, server: str) -> None:
    out, err = await call(ctx, LOCAL, url=f"{server}/hop")
    assert not err
    assert out.startswith(f"URL: {server}/page\n")
    both = web_fetch_tool(allow_private_hosts=["127.0.0.1", "localhost"])
    out, err = await call(ctx, both, url=f"{server}/away")
    assert err
    assert "redirects to another host: http://localhost:" in out
    assert "Call web_fetch again with that URL" in out


async def test_loopback_private_and_other_schemes_are_refused_by_default(ctx: ToolContext, server: str) -> None:
    for url in (f"{server}/page", "http://localhost/", "http://10.1.2.3/", "http://[::1]/", "http://169.254.169.254/"):
        out, err = await call(ctx, web_fetch, url=url)
        assert err, url
        assert "a loopback, private or otherwise non-public address" in out
        assert "web_fetch_tool(allow_private_hosts=" in out
    out, err = await call(ctx, LOCAL, url="http://localhost:1/")  # allowing 127.0.0.1 does not allow localhost
    assert err
    assert "non-public" in out
    for url in ("file:///etc/passwd", "ftp://example.com/x", "example.com"):
        out, err = await call(ctx, web_fetch, url=url)
        assert err
        assert "only http:// and https:// URLs can be fetched" in out
    out, err = await call(ctx, web_fetch, url="http:///nohost")
    assert err
    assert "has no host" in out


def fetching(url: str, seen: list[str]) -> FunctionModel:
    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse("", [ToolCall("web_fetch", {"url": url})])
        seen.append(repr(req.messages[-1]))
        return ModelResponse("done")

    return FunctionModel(fn)


async def test_it_is_a_network_action_under_the_permission_rules(workdir: Path, server: str) -> None:
    seen: list[str] = []
    async with Runtime(fetching(f"{server}/page", seen), workdir=workdir, store="memory://", tools=[LOCAL],
                       permission_mode="yolo") as rt:
        await rt.run("fetch")
    assert "Release notes" in seen[-1]
    async with Runtime(fetching(f"{server}/page", seen), workdir=workdir, store="memory://", tools=[LOCAL],
                       permission_mode="yolo", deny=["web_fetch"]) as rt:
        await rt.run("fetch")
    assert "denied by the rule 'web_fetch'" in seen[-1]
    async with Runtime(fetching(f"{server}/page", seen), workdir=workdir, store="memory://", tools=[LOCAL],
                       permission_mode="default") as rt:  # default mode asks; nobody can answer here
        await rt.run("fetch")
    assert "Release notes" not in seen[-1]
    assert "web_fetch" in seen[-1]
