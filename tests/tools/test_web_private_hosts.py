"""``[web] allow_private_hosts``: the runtime's ``web_fetch`` reaches a loopback server only when the user's own
config names it; a project's config cannot open it (issue 17's web_fetch, docs/seed-audit.md I17.13)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from subagents import ConfigError, Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body><h1>Internal docs</h1><p>port 8080</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
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
    yield f"http://127.0.0.1:{srv.server_address[1]}/docs"
    srv.shutdown()
    srv.server_close()


def user_config(text: str) -> None:
    d = Path(os.environ["XDG_CONFIG_HOME"]) / "subagents"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.toml").write_text(text)


async def fetch(workdir: Path, url: str) -> tuple[str, bool]:
    out: list[tuple[str, bool]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("web_fetch", {"url": url})])
        r = req.messages[-1].tool_results[0]
        out.append((r.content, r.is_error))
        return ModelResponse(text="ok")

    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", permission_mode="yolo") as rt:
        await rt.run("read the docs")
    return out[0]


async def test_a_host_named_in_the_user_config_is_fetched(workdir: Path, server: str) -> None:
    user_config('[web]\nallow_private_hosts = ["127.0.0.1"]\n')
    text, err = await fetch(workdir, server)
    assert not err
    assert "# Internal docs" in text


async def test_without_it_the_refusal_names_the_setting(workdir: Path, server: str) -> None:
    text, err = await fetch(workdir, server)
    assert err
    assert text.startswith("refused: '127.0.0.1' resolves to 127.0.0.1, a loopback, private")
    assert "[web] allow_private_hosts in your user config file" in text


async def test_other_hosts_stay_refused(workdir: Path, server: str) -> None:
    user_config('[web]\nallow_private_hosts = ["docs.internal"]\n')
    text, err = await fetch(workdir, server)
    assert err
    assert text.startswith("refused:")


def test_a_project_config_cannot_set_it(workdir: Path) -> None:
    (workdir / ".subagents").mkdir()
    (workdir / ".subagents" / "config.toml").write_text('[web]\nallow_private_hosts = ["127.0.0.1"]\n')
    with pytest.raises(ConfigError, match=r"\[web\] allow_private_hosts is read only from your user config file"):
        Runtime(model=FunctionModel(lambda req: "x"), workdir=workdir, store="memory://")
