"""No network unless configured: servers the test runs on the host (loopback TCP and UDP, a UNIX socket on
a host path, an abstract UNIX socket) must see no connection from an agent — from its shell, nor through
the runtime itself (a sub-agent's model pointed at a URL the agent chose, with the runtime's API key).
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest

from .conftest import Home
from .kit import Trap, UdpTrap, attack, core, ran, sh, spawn

TCP_CLIENTS = {
    "python": "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=3); "
              "s.sendall(b'EGRESS')\"",
    "python-localhost": "python3 -c \"import socket; s = socket.create_connection(('localhost', {port}), timeout=3); "
                        "s.sendall(b'EGRESS')\"",
    "dev-tcp": "exec 3<>/dev/tcp/127.0.0.1/{port} && echo EGRESS >&3",
    "curl": "if command -v curl >/dev/null; then curl -s -m 3 http://127.0.0.1:{port}/egress; else python3 -c "
            "\"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/egress', timeout=3)\"; fi",
    "bash-background": "(exec 3<>/dev/tcp/127.0.0.1/{port} && echo EGRESS >&3) > /dev/null 2>&1 & sleep 1",
}


@pytest.mark.parametrize("client", list(TCP_CLIENTS))
async def test_shell_has_no_tcp(client: str, ws: Path) -> None:
    with Trap.tcp() as trap:
        a = await attack(ws, [sh(TCP_CLIENTS[client].format(port=trap.port), timeout_s=10)])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert not trap.hits, f"the shell reached a loopback server: {trap.hits}\n{a.transcript()}"


async def test_shell_has_no_udp(ws: Path) -> None:
    with UdpTrap() as trap:
        a = await attack(ws, [sh(f"python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                                 f".sendto(b'EGRESS', ('127.0.0.1', {trap.port}))\"; "
                                 f"echo EGRESS > /dev/udp/127.0.0.1/{trap.port}; sleep 0.5")])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert not trap.hits, f"the shell reached a UDP server: {trap.hits}"


UNIX_CLIENT = ("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(3); "
               "s.connect({addr!r}); s.sendall(b'EGRESS')\"")


@pytest.mark.parametrize("where", ["beside-workspace", "in-home"])
async def test_shell_cannot_reach_unix_sockets_on_host_paths(where: str, ws: Path, home: Home, tmp_path: Path) -> None:
    path = str((tmp_path if where == "beside-workspace" else home.root) / f"s{uuid.uuid4().hex[:8]}.sock")
    with Trap.unix(path) as trap:
        a = await attack(ws, [sh(UNIX_CLIENT.format(addr=path))])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert not trap.hits, f"the shell reached a UNIX socket at {path}"


async def test_shell_cannot_reach_abstract_unix_sockets(ws: Path) -> None:
    """Abstract sockets (X11, D-Bus, ...) belong to the network namespace, not to a path."""
    name = "\0subagents-escape-" + uuid.uuid4().hex
    with Trap.unix(name) as trap:
        client = ("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(3); "
                  f"s.connect(b'\\0{name[1:]}'); s.sendall(b'EGRESS')\"")
        a = await attack(ws, [sh(client)])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert not trap.hits, "the shell reached an abstract UNIX socket"


async def test_subagent_model_cannot_be_pointed_at_an_agent_chosen_server(ws: Path, api_keys: dict[str, str]
                                                                          ) -> None:
    """``spawn_agent(model="openai:<m>@<url>")``: the runtime itself would connect wherever the agent says,
    sending the child's prompt (anything the agent read) and, with ``OPENAI_API_KEY`` set, the key."""
    with (ws / ".subagents" / "config.toml").open("a") as f:
        f.write("\n[providers.openai]\nmax_retries = 0\n")  # when it does connect, fail at once
    with Trap.tcp() as trap:
        a = await attack(ws, [spawn("general-purpose", "EXFILTRATED workspace contents",
                                    model=f"openai:gpt-4o@http://127.0.0.1:{trap.port}/v1")])
    a.assert_completed()
    sent = b"\n".join(trap.hits).decode("latin-1")
    keys = [k for k in core(api_keys) if k in sent]
    assert not keys, f"the runtime sent the API key(s) {keys} to a server the agent chose"
    assert not trap.hits, f"the runtime connected to a server the agent chose: {sent[:500]!r}"


def test_trap_is_reachable_from_the_host() -> None:
    """The traps work: a client outside the sandbox does reach them (so an empty trap means something)."""
    with Trap.tcp() as trap:
        with socket.create_connection(("127.0.0.1", trap.port), timeout=3) as s:
            s.sendall(b"hello")
        deadline = time.monotonic() + 3
        while not trap.hits and time.monotonic() < deadline:
            time.sleep(0.01)
    assert trap.hits == [b"hello"]
