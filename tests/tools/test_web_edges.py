"""``web_fetch`` against hostile servers and names: DNS rebinding, IPv6 forms of private addresses, cross-host
redirects, proxies from the environment, compression bombs, a server that dribbles, bad URLs and charsets.
Every case ends as a tool result or a tool error for the model, never as an exception out of the tool."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import httpcore
import pytest

from subagents.messages import ToolUseBlock
from subagents.tools import web
from subagents.tools.base import Tool, ToolContext, ToolRegistry
from subagents.tools.web import MAX_BYTES, web_fetch, web_fetch_tool

PUBLIC = "93.184.216.34"  # a global address the tests never really connect to (see `offline`)
SECRET = b"SECRET-ON-LOOPBACK"
BOMB = gzip.compress(b"\0" * 30_000_000)  # about 30 kB that inflate to 30 MB
DOUBLE_BOMB = gzip.compress(BOMB, 9)
PAGE = b"<html><body><h1>Packed</h1><p>small page</p></body></html>"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hits: list[str] = []  # noqa: RUF012 - shared by the test and the server thread

    def _send(self, body: bytes, ctype: str = "text/plain", **headers: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        Handler.hits.append(self.path)
        path, _, query = self.path.partition("?to=")
        if path.startswith("/redirect/"):
            self.send_response(int(path.removeprefix("/redirect/")))
            self.send_header("Location", unquote(query))
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/secret":
            self._send(SECRET)
        elif path == "/bomb":
            self._send(BOMB, Content_Encoding="gzip")
        elif path == "/double-bomb":
            self._send(DOUBLE_BOMB, Content_Encoding="gzip, gzip")
        elif path == "/gzip":
            self._send(gzip.compress(PAGE), "text/html", Content_Encoding="gzip")
        elif path == "/deflate":
            self._send(zlib.compress(PAGE), "text/html", Content_Encoding="deflate")
        elif path == "/raw-deflate":
            c = zlib.compressobj(wbits=-15)
            self._send(c.compress(PAGE) + c.flush(), "text/html", Content_Encoding="deflate")
        elif path == "/base64-charset":
            self._send(b"plain words", "text/plain; charset=base64")
        elif path == "/dribble":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(100_000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.02)
            except OSError:
                pass
        else:
            self._send(b"?")

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


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Connections to a global address fail at once (no network in tests); returns the hosts connected to."""
    seen: list[str] = []
    real = httpcore.AnyIOBackend.connect_tcp

    async def connect_tcp(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        seen.append(host)
        if host == PUBLIC:
            raise httpcore.ConnectError("offline test: no route")
        return await real(self, host, port, *args, **kwargs)

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect_tcp)
    return seen


def resolve(monkeypatch: pytest.MonkeyPatch, name: str, answers: list[str]) -> None:
    """``name`` resolves to ``answers[0]`` the first time, ``answers[1]`` the next, ... (the last one after)."""
    real = socket.getaddrinfo
    calls = [0]

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if (host.decode() if isinstance(host, bytes) else host) != name:
            return real(host, port, *args, **kwargs)
        ip = answers[min(calls[0], len(answers) - 1)]
        calls[0] += 1
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        sockaddr = (ip, int(port or 0), 0, 0) if family == socket.AF_INET6 else (ip, int(port or 0))
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


LOCAL = web_fetch_tool(allow_private_hosts=["127.0.0.1"])


async def call(ctx: ToolContext, tool: Tool, url: str) -> tuple[str, bool]:
    r = await ToolRegistry([tool]).execute(ToolUseBlock("c1", "web_fetch", {"url": url}), ctx)
    return str(r.content), r.is_error


async def test_a_name_that_rebinds_to_loopback_after_the_check_is_not_fetched(
        ctx: ToolContext, port: int, offline: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    resolve(monkeypatch, "rebind.test", [PUBLIC, "127.0.0.1"])  # public when checked, loopback a moment later
    out, err = await call(ctx, web_fetch, f"http://rebind.test:{port}/secret")
    assert err
    assert "SECRET" not in out
    assert not Handler.hits
    assert offline == [PUBLIC]  # the address checked is the address connected to


async def test_a_name_that_resolves_to_loopback_is_refused_when_connecting(
        ctx: ToolContext, port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    resolve(monkeypatch, "intranet.test", ["127.0.0.1"])
    out, err = await call(ctx, web_fetch, f"http://intranet.test:{port}/secret")
    assert err
    assert "refused: 'intranet.test' resolves to 127.0.0.1" in out
    assert "allow_private_hosts" in out
    assert not Handler.hits


@pytest.mark.parametrize("host", ["[::127.0.0.1]", "[::ffff:127.0.0.1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::1]",
                                  "[fec0::1]", "2130706433", "0x7f.1", "127.1", "0.0.0.0", "evil@127.0.0.1",
                                  "public.example\\@127.0.0.1"])
async def test_other_spellings_of_private_addresses_are_refused(
        ctx: ToolContext, port: int, host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web, "TIMEOUT_S", 1.0)
    out, err = await call(ctx, web_fetch, f"http://{host}:{port}/secret")
    assert err
    assert "SECRET" not in out
    assert "non-public address" in out or "InvalidURL" in out


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
async def test_a_redirect_to_another_host_is_reported_not_followed(ctx: ToolContext, port: int, code: int) -> None:
    for to in (f"http://localhost:{port}/secret", f"http://[::1]:{port}/secret", "http://169.254.169.254/latest/",
               "http://10.0.0.1/", f"http://2130706433:{port}/secret", f"//localhost:{port}/secret"):
        Handler.hits = []
        out, err = await call(ctx, LOCAL, f"http://127.0.0.1:{port}/redirect/{code}?to={to}")
        assert err, to
        assert "redirects to another host" in out or "non-public address" in out
        assert Handler.hits == [f"/redirect/{code}?to={to}"]


async def test_proxies_from_the_environment_are_ignored(ctx: ToolContext, port: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there: using it would fail
    out, err = await call(ctx, LOCAL, f"http://127.0.0.1:{port}/secret")
    assert not err
    assert "SECRET-ON-LOOPBACK" in out


async def test_a_gzip_bomb_inflates_only_up_to_the_cap(ctx: ToolContext, port: int) -> None:
    for path in ("/bomb", "/double-bomb"):
        tracemalloc.start()
        try:
            out, err = await call(ctx, LOCAL, f"http://127.0.0.1:{port}{path}")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 * MAX_BYTES, (path, peak)
        if path == "/bomb":
            assert not err
            assert "page truncated" in out
        else:
            assert err
            assert "Content-Encoding 'gzip, gzip'" in out


async def test_compressed_pages_are_still_read(ctx: ToolContext, port: int) -> None:
    for path in ("/gzip", "/deflate", "/raw-deflate"):
        out, err = await call(ctx, LOCAL, f"http://127.0.0.1:{port}{path}")
        assert not err, out
        assert "# Packed" in out
        assert "small page" in out


async def test_a_server_that_dribbles_is_cut_off_by_the_overall_deadline(
        ctx: ToolContext, port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web, "TOTAL_TIMEOUT_S", 0.5, raising=False)
    started = time.monotonic()
    out, err = await asyncio.wait_for(call(ctx, LOCAL, f"http://127.0.0.1:{port}/dribble"), 4)
    assert time.monotonic() - started < 3
    assert err
    assert "took longer than 0.5 s" in out


async def test_a_url_httpx_rejects_is_a_tool_error(ctx: ToolContext, port: int) -> None:
    out, err = await call(ctx, LOCAL, f"http://127.0.0.1:{port}/a\x01b")
    assert err
    assert "InvalidURL" in out
    out, err = await call(ctx, LOCAL, "http://[::1/")
    assert err
    assert "is not valid" in out


async def test_a_charset_that_is_not_a_text_encoding_falls_back_to_utf8(ctx: ToolContext, port: int) -> None:
    out, err = await call(ctx, LOCAL, f"http://127.0.0.1:{port}/base64-charset")
    assert not err, out
    assert "plain words" in out
