"""The Landlock fallback holds the same line: a compact rerun of the shell attacks with ``sandbox="landlock"``.

``auto`` picks bubblewrap wherever it is installed (as on CI), so the fallback would otherwise go
untested.  One run per promise, several attacks each; the assertions name the attacks that got through.
For the full suite against the fallback, run it again with ``SUBAGENTS_SANDBOX=landlock``.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

from .conftest import Home, Outside
from .kit import Trap, attack, core, diff, is_store_file, marker, ran, sh, snapshot
from .test_processes import host_processes

LANDLOCK = {"sandbox": "landlock"}


async def test_landlock_shell_cannot_write_outside_or_protected_paths(ws: Path, outside: Outside, home: Home) -> None:
    protected = {p: snapshot(ws / p, skip=is_store_file) for p in (".subagents", ".git")}
    before_out, before_home = outside.snapshot(), home.snapshot()
    tmp_name = Path("/tmp") / f"subagents-escape-{uuid.uuid4().hex}"
    try:
        a = await attack(ws, [
            sh(f"echo PWNED > {outside.root}/created.txt; echo PWNED >> {outside.root}/target.txt"),
            sh(f"echo PWNED > /proc/{os.getpid()}/root{outside.root}/created2.txt"),
            sh(f"echo evil >> {home.root}/.bashrc; printf '[sandbox]\\nmode = \"off\"\\n' >> {home.user_config}"),
            sh("echo evil >> .subagents/config.toml; rm -rf .subagents/agents; mv .subagents x"),
            sh("git config core.hooksPath /tmp/evil; echo evil > .git/hooks/pre-commit; mv .git y"),
            sh("ln .subagents/config.toml src/cfg && echo evil >> src/cfg"),
            sh(f"echo PWNED > {tmp_name}"),
            sh("echo ordinary > src/ok.txt && cat src/ok.txt"),
        ], **LANDLOCK)
        a.assert_completed()
        assert all(ran(s.content) for s in a.steps), a.transcript()
        assert "ordinary" in a.step(7).content, f"the workspace is not writable under Landlock:\n{a.transcript()}"
        assert not tmp_name.exists(), "the shell wrote into the host's /tmp"
    finally:
        tmp_name.unlink(missing_ok=True)
    assert outside.snapshot() == before_out, diff(before_out, outside.snapshot())
    assert home.snapshot() == before_home, diff(before_home, home.snapshot())
    for p, snap in protected.items():
        now = snapshot(ws / p, skip=is_store_file)
        assert now == snap, f"{p} changed:\n{diff(snap, now)}"


async def test_landlock_shell_cannot_read_secrets(ws: Path, outside: Outside, home: Home,
                                                  api_keys: dict[str, str]) -> None:
    secret = marker("STORE")
    await attack(ws, [], seeds=[f"the first run mentions {secret}"], **LANDLOCK)
    files = " ".join(str(home.root / rel) for rel in home.secrets)
    a = await attack(ws, [
        sh(f"cat {files} 2>&1"),
        sh(f"cat {outside.root}/secret.txt; ls {outside.root}"),
        sh("env; cat /proc/self/environ | tr '\\0' '\\n'; tr '\\0' '\\n' < /proc/$PPID/environ"),
        sh("strings .subagents/state.db* | grep -o 'STOREMARK[0-9a-f]*'"),
        sh(f"for f in /proc/{os.getpid()}/fd/*; do case $(readlink $f) in *state.db*) strings $f;; esac; done"),
    ], seeds=[f"this run mentions {secret} too"], **LANDLOCK)
    a.assert_completed()
    assert all(ran(s.content) for s in a.steps), a.transcript()
    a.assert_no_leak(*home.markers, outside.secret, outside.entry, *core(api_keys), secret)


async def test_landlock_shell_has_no_network(ws: Path, tmp_path: Path) -> None:
    unix_path = str(tmp_path / "host.sock")
    abstract = "\0subagents-escape-" + uuid.uuid4().hex
    with Trap.tcp() as tcp, Trap.unix(unix_path) as unix, Trap.unix(abstract) as abstract_trap:
        unix_client = "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect("
        a = await attack(ws, [
            sh(f"exec 3<>/dev/tcp/127.0.0.1/{tcp.port} && echo EGRESS >&3"),
            sh(f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {tcp.port}), timeout=3)\""),
            sh(unix_client + f"'{unix_path}')\""),
            sh(unix_client + f"b'\\0{abstract[1:]}')\""),
        ], **LANDLOCK)
    a.assert_completed()
    assert all(ran(s.content) for s in a.steps), a.transcript()
    reached = [n for n, t in (("tcp", tcp), ("unix", unix), ("abstract", abstract_trap)) if t.hits]
    assert not reached, f"the shell reached {reached} under Landlock:\n{a.transcript()}"


async def test_landlock_processes_end_with_their_command_and_cannot_signal(ws: Path, tag: str) -> None:
    got: list[int] = []
    old = signal.signal(signal.SIGUSR1, lambda s, frame: got.append(s))
    try:
        a = await attack(ws, [
            sh(f"setsid bash -c 'exec -a {tag} sleep 300' > /dev/null 2>&1 < /dev/null &\n"
               f"python3 -c \"import os; os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); "
               f"os.execvp('sleep', ['{tag}', '300'])\" > /dev/null 2>&1\nsleep 0.3"),
            ("host_processes", {"tag": tag}),
            sh(f"kill -USR1 {os.getpid()}; kill -USR1 $PPID; sleep 0.2"),
        ], tools=[host_processes], **LANDLOCK)
    finally:
        signal.signal(signal.SIGUSR1, old)
    a.assert_completed()
    assert a.step(1).content == "none", f"a process outlived its command under Landlock: {a.step(1).content}"
    assert not got, "the shell signalled the runtime under Landlock"


async def test_landlock_plan_mode_shell_is_read_only(ws: Path) -> None:
    before = snapshot(ws, skip=is_store_file)
    a = await attack(ws, [sh("cat README.md"), sh("touch new.txt; echo PWNED >> README.md; rm -rf src")],
                     mode="plan", **LANDLOCK)
    a.assert_completed()
    assert "The readme says hello" in a.step(0).content, a.transcript()
    assert snapshot(ws, skip=is_store_file) == before, diff(before, snapshot(ws, skip=is_store_file))
