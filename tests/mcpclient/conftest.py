"""Fixtures: the test MCP server (tests/mcpclient/server.py) over stdio and over streamable HTTP on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("server.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_url() -> Iterator[str]:
    """The test server over streamable HTTP in a subprocess (uvicorn on 127.0.0.1), stopped after the test."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the HTTP MCP server did not start: {proc.communicate()[1].decode()[-2000:]}"
                                   ) from None
            time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
