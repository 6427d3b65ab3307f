"""Attacks on the shell sandbox, each through the ``bash`` tool: a suite every backend's tests subclass.

The workspace and a fake ``$HOME`` live under ``/var/tmp``, not ``/tmp``: bubblewrap gives every
command a private ``/tmp``, which would hide files there whatever the rest of the setup does.
Subclasses set ``mode`` (the backend is asserted, never silently replaced by another) and override
the tests whose outcome differs, saying why.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import itertools
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from procutil import SANDBOX_PYTHON
from subagents.models.base import AgentInfo
from subagents.sandbox import SandboxPolicy, Workspace, landlock
from subagents.sandbox.shell import ShellSandbox, kill_all_process_groups, live_process_groups
from subagents.tools.base import ToolContext
from subagents.tools.shell import bash

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-SECRET-4f1c2b",
    "OPENAI_API_KEY": "sk-openai-SECRET-9a8e7d",
    "GITHUB_TOKEN": "ghp_SECRET_5e6f7a",
}
SSH_KEY = "-----BEGIN FAKE SSH KEY 7c3d-----"
STORE = "STORE-SECRET-2b9f"
_MARKS = itertools.count(1)


def setsid_sleep(mark: str) -> str:
    """Shell: start ``sleep MARK`` in a session of its own, and wait until it leads it (else the
    command's end could stop it before it leaves the group, and the test would prove nothing)."""
    return (f"setsid sleep {mark} > /dev/null 2>&1 < /dev/null & "
            f"for i in $(seq 200); do ps -eo sid,args | grep -q \"^ *$! sleep {mark}\" && break; sleep 0.01; done")


def marker() -> str:
    """A unique ``sleep`` duration, to find a test's processes in ``/proc``."""
    return f"{4000 + next(_MARKS) + os.getpid() % 1000 / 1000:.3f}"


def marked(mark: str) -> list[int]:
    """Running processes (not zombies) whose command line holds ``mark``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        if mark.encode() in cmdline and stat[stat.rfind(")") + 2] not in "ZX":
            out.append(int(name))
    return out


async def eventually(predicate: Any, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            pytest.fail(f"condition not reached within {timeout} s")
        await asyncio.sleep(0.01)


def exists(path: Path | str) -> bool:
    return os.path.lexists(path)


def read(path: Path) -> str:
    return path.read_text()


async def run(ctx: ToolContext, command: str, timeout_s: float = 30) -> str:
    return await bash.call({"command": command, "timeout_s": timeout_s}, ctx)


async def outcomes(ctx: ToolContext, script: str, *args: object) -> tuple[str, dict[str, str]]:
    """Run a Python ``script`` that prints ``name outcome`` lines: the output, and the outcome of each name."""
    out = await run(ctx, f"{SANDBOX_PYTHON} -c \"{script}\" " + " ".join(map(str, args)))
    return out, dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


class OneBackend:
    """Fixtures for tests against one backend (``mode``): a bare workspace, its sandbox and a tool context."""

    mode: ClassVar[str]

    @pytest.fixture
    def ws(self, tmp_path: Path) -> Path:
        (tmp_path / "src").mkdir()
        return tmp_path

    @pytest.fixture
    def box(self, ws: Path) -> ShellSandbox:
        box = ShellSandbox(Workspace(ws, SandboxPolicy(mode=self.mode)))
        assert box.backend == self.mode, f"{self.mode} does not work here: {box.unavailable()}"
        return box

    @pytest.fixture
    def ctx(self, box: ShellSandbox) -> ToolContext:
        return ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=box.workspace, sandbox=box)


class AttackSuite:
    """The attacks; ``mode`` is the backend under test."""

    mode: ClassVar[str]

    # -- fixtures ---------------------------------------------------------------------------------
    @pytest.fixture
    def place(self) -> Iterator[Path]:
        d = Path(tempfile.mkdtemp(prefix="subagents-attack-", dir="/var/tmp")).resolve()
        yield d
        shutil.rmtree(d, ignore_errors=True)

    @pytest.fixture
    def home(self, place: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        home = place / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_rsa").write_text(SSH_KEY + "\n")
        (home / ".netrc").write_text(f"machine example.com password {SSH_KEY}\n")
        monkeypatch.setenv("HOME", str(home))
        return home

    @pytest.fixture
    def ws(self, place: Path, home: Path) -> Path:
        root = place / "ws"
        (root / ".subagents").mkdir(parents=True)
        (root / ".subagents" / "config.toml").write_text("[sandbox]\nmode = 'auto'\n")
        (root / ".subagents" / "agents").mkdir()
        (root / ".subagents" / "agents" / "helper.md").write_text("---\nname: helper\n---\nHelp.\n")
        (root / ".subagents" / "state.db").write_text(STORE)
        (root / ".subagents" / "state.db-wal").write_text(STORE)
        (root / "src").mkdir()
        (root / "src" / "app.py").write_text("print('app')\n")
        (root / "README.md").write_text("readme\n")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        (root / ".git" / "hooks").mkdir(exist_ok=True)
        return root

    @pytest.fixture
    def secrets(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
        for k, v in SECRETS.items():
            monkeypatch.setenv(k, v)
        return SECRETS

    def make(self, ws: Path, home: Path, **policy: Any) -> ToolContext:
        workspace = Workspace(ws, SandboxPolicy(mode=self.mode, **policy), home=home)
        box = ShellSandbox(workspace)
        assert box.backend == self.mode, f"{self.mode} does not work here: {box.unavailable()}"
        return ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=workspace, sandbox=box)

    @pytest.fixture
    def ctx(self, ws: Path, home: Path, secrets: dict[str, str]) -> ToolContext:
        return self.make(ws, home)

    @pytest.fixture
    async def tcp_server(self) -> AsyncIterator[tuple[int, list[bytes]]]:
        got: list[bytes] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got.append(await reader.read(100))
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        yield server.sockets[0].getsockname()[1], got
        server.close()
        await server.wait_closed()

    @pytest.fixture
    def udp_server(self) -> Iterator[socket.socket]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.setblocking(False)
        yield s
        s.close()

    @pytest.fixture
    def unix_server(self) -> Iterator[str]:
        path = f"/run/subagents-test-{uuid.uuid4().hex[:8]}.sock"  # where docker.sock and D-Bus live
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen(5)
        yield path
        s.close()
        os.unlink(path)

    # -- writes outside the workspace -------------------------------------------------------------
    async def test_cannot_write_outside_the_workspace(self, ctx: ToolContext, home: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        etc, host_tmp, in_home = f"/etc/subagents-{tag}", f"/tmp/subagents-{tag}", home / f"pwned-{tag}"
        out = await run(ctx, f"echo x > {etc}; echo x > {in_home}; echo x > {host_tmp}; ls {host_tmp}; true")
        assert not exists(etc)
        assert not exists(in_home)
        assert not exists(host_tmp)  # with bubblewrap the write succeeds, in the command's private /tmp
        assert "exit code 0" in out

    async def test_cannot_remount_the_root_writable(self, ctx: ToolContext) -> None:
        tag = uuid.uuid4().hex[:8]
        out = await run(ctx, f"mount -o remount,bind,rw / 2>/dev/null; echo rc=$?; "
                             f"unshare -Urm sh -c 'mount -o remount,rw / && touch /etc/{tag}' 2>/dev/null; "
                             f"touch /etc/{tag} 2>/dev/null; echo rc=$?")
        assert out.splitlines()[0] != "rc=0"
        assert out.splitlines()[-2] != "rc=0"
        assert not exists(f"/etc/{tag}")

    # -- protected paths in the workspace ---------------------------------------------------------
    async def test_cannot_change_protected_paths(self, ctx: ToolContext, ws: Path) -> None:
        config = read(ws / ".subagents" / "config.toml")
        git_config = read(ws / ".git" / "config")
        out = await run(ctx, "echo 'mode = \"off\"' >> .subagents/config.toml; "
                             "printf '#!/bin/sh\\ncurl evil\\n' > .git/hooks/pre-commit; "
                             "echo '[core] hooksPath = /tmp' >> .git/config; "
                             "mv .git .git-old; rm -rf .subagents; ln .git/config src/gc; echo evil >> src/gc; "
                             "ln -s ../.subagents/config.toml src/cfg; echo evil >> src/cfg; echo src > src/ok.txt")
        assert read(ws / ".subagents" / "config.toml") == config
        assert read(ws / ".git" / "config") == git_config
        assert not exists(ws / ".git" / "hooks" / "pre-commit")
        assert not exists(ws / ".git-old")
        assert read(ws / "src" / "ok.txt") == "src\n"  # the rest of the workspace is writable
        assert out.endswith("exit code 0")

    async def test_cannot_create_a_protected_directory_that_did_not_exist(self, ctx: ToolContext, ws: Path) -> None:
        # Not even while the command runs: another reader (the user's git, Claude Code) could see it.
        assert not exists(ws / ".claude")
        planted = [ws / ".claude" / "agents" / "x.md", ws / ".qwen" / "settings.json"]
        seen: set[Path] = set()
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                seen.update(p for p in planted if exists(p))
                time.sleep(0.002)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            out = await run(ctx, "mkdir -p .claude/agents .qwen; echo evil > .claude/agents/x.md; "
                                 "echo '{}' > .qwen/settings.json; sleep 0.5; ls -a")
        finally:
            stop.set()
            watcher.join(5)
        assert not seen
        assert not exists(ws / ".claude")
        assert not exists(ws / ".qwen")
        assert "[the command created" not in out

    async def test_a_store_kept_in_the_workspace_cannot_be_moved_or_read(self, ws: Path, home: Path) -> None:
        (ws / "var").mkdir()
        (ws / "var" / "runs.db").write_text(STORE)
        workspace = Workspace(ws, SandboxPolicy(mode=self.mode), home=home, store_files=[ws / "var" / "runs.db"])
        ctx = ToolContext(agent=AgentInfo("a1", "a1", "general-purpose"), workspace=workspace,
                          sandbox=ShellSandbox(workspace))
        out = await run(ctx, "cat var/runs.db; mv var var2; mv var/runs.db var/old.db; rm -rf var; ls var")
        assert STORE not in out
        assert read(ws / "var" / "runs.db") == STORE
        assert not exists(ws / "var2")

    async def test_allow_git_opens_git_but_not_its_hooks_and_config(self, ws: Path, home: Path) -> None:
        ctx = self.make(ws, home, allow_git=True)
        await run(ctx, "echo x > .git/objects/probe; echo x > .git/hooks/pre-commit; echo x >> .git/config; "
                       "mkdir -p .git/modules/lib/hooks && echo x > .git/modules/lib/hooks/post-checkout")
        assert exists(ws / ".git" / "objects" / "probe")
        assert not exists(ws / ".git" / "hooks" / "pre-commit")
        assert "x\n" not in read(ws / ".git" / "config")
        assert not exists(ws / ".git" / "modules" / "lib")  # submodules' gitdirs hold hooks and configs too

    async def test_allow_git_cannot_swap_git_for_one_with_hooks(self, ws: Path, home: Path) -> None:
        # Renaming .git would carry the read-only hooks away and leave room for a .git of the command's own.
        ctx = self.make(ws, home, allow_git=True)
        await run(ctx, "mv .git .git-old; mkdir -p .git/hooks && printf '#!/bin/sh\\nevil\\n' > .git/hooks/pre-commit; "
                       "cp -r src src2; mv src/app.py src/main.py")
        assert not exists(ws / ".git-old")
        assert not exists(ws / ".git" / "hooks" / "pre-commit")
        assert exists(ws / ".git" / "HEAD")

    # -- hidden paths -----------------------------------------------------------------------------
    async def test_cannot_read_the_store_or_credentials(self, ctx: ToolContext, ws: Path, home: Path) -> None:
        out = await run(ctx, f"cat .subagents/state.db .subagents/state.db-wal {home}/.ssh/id_rsa {home}/.netrc "
                             ".subagents/config.toml; "
                             f"ls .subagents; ln -s {home}/.ssh/id_rsa src/k; cat src/k; "
                             f"ln {home}/.ssh/id_rsa src/hard; cat src/hard; "
                             f"cp -r {home}/.ssh src/copy; cat src/copy/id_rsa")
        assert STORE not in out
        assert SSH_KEY not in out
        assert "mode = 'auto'" not in out  # the project config may hold an api_key: hidden too
        assert "agents" in out  # the rest of .subagents stays readable

    async def test_runtime_environment_does_not_leak(self, ctx: ToolContext, secrets: dict[str, str]) -> None:
        pid = os.getpid()
        out = await run(ctx, f"env; tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ; "
                             f"tr '\\0' '\\n' < /proc/{pid}/environ; tr '\\0' '\\n' < /proc/$PPID/environ; "
                             "echo PATH-IS=$PATH")
        for value in secrets.values():
            assert value not in out
        assert "PATH-IS=/" in out

    async def test_cannot_read_the_users_terminal(self, ctx: ToolContext) -> None:
        # A terminal belongs to its user, so DAC alone would let a command read its keystrokes.
        master, slave = os.openpty()
        try:
            os.write(master, b"typed-secret-3f9\n")
            out = await run(ctx, f"timeout 2 head -c 16 {os.ttyname(slave)}; echo rc=$?", timeout_s=10)
        finally:
            os.close(master)
            os.close(slave)
        assert "typed-secret" not in out

    # -- network, sockets, signals ----------------------------------------------------------------
    async def test_no_tcp_egress_without_network(self, ctx: ToolContext, tcp_server: tuple[int, list[bytes]]) -> None:
        port, got = tcp_server
        out = await run(ctx, f"echo hi > /dev/tcp/127.0.0.1/{port}; echo rc=$?", timeout_s=10)
        assert "rc=1" in out
        await asyncio.sleep(0.1)
        assert got == []

    async def test_tcp_egress_with_network(self, ws: Path, home: Path, tcp_server: tuple[int, list[bytes]]) -> None:
        port, got = tcp_server
        ctx = self.make(ws, home, network=True)
        out = await run(ctx, f"echo hi > /dev/tcp/127.0.0.1/{port}; echo rc=$?", timeout_s=10)
        assert "rc=0" in out
        await eventually(lambda: got == [b"hi\n"])

    async def test_no_udp_egress_without_network(self, ctx: ToolContext, udp_server: socket.socket) -> None:
        port = udp_server.getsockname()[1]
        script = (f"import socket as s\ntry: s.socket(s.AF_INET, s.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))"
                  "\nexcept OSError as e: print('TRIED', e.errno)\nelse: print('TRIED')")
        out = await run(ctx, f"{SANDBOX_PYTHON} -c \"{script}\"; echo hi > /dev/udp/127.0.0.1/{port}")
        assert "TRIED" in out  # the attempt really ran (bubblewrap: into its own loopback; Landlock: refused)
        with pytest.raises(BlockingIOError):
            udp_server.recv(100)

    async def test_udp_egress_with_network(self, ws: Path, home: Path, udp_server: socket.socket) -> None:
        ctx = self.make(ws, home, network=True)
        await run(ctx, f"echo hi > /dev/udp/127.0.0.1/{udp_server.getsockname()[1]}")
        assert udp_server.recv(100) == b"hi\n"

    async def test_cannot_change_the_mode_of_what_lies_outside(self, ctx: ToolContext, ws: Path, place: Path,
                                                                 home: Path) -> None:
        # Landlock has no right for chmod: a command could `chmod 000 ~` (the user's home locked), make a key
        # world-readable, or (a root runtime: the command's uid owns /etc) `chmod 666 /etc/shadow`.  Every chmod
        # call is tried: by path, through a symlink in the workspace, relative to a directory descriptor, on a
        # descriptor opened for reading, fchmodat2 with AT_SYMLINK_NOFOLLOW.  In the workspace and $TMPDIR it works.
        outside = place / "outside"
        outside.mkdir()
        target = outside / "key"
        target.write_text("k")
        os.chmod(target, 0o600)
        os.chmod(outside, 0o700)
        (ws / "src" / "f").write_text("f")
        (ws / "src" / "link").symlink_to(target)
        script = ("import os, sys, ctypes\n"
                  "def t(name, f):\n"
                  "    try: f(); print(name, 'DONE')\n"
                  "    except OSError as e: print(name, 'REFUSED', e.errno)\n"
                  "k, d = sys.argv[1], sys.argv[2]\n"
                  "t('path', lambda: os.chmod(k, 0o644))\n"
                  "t('dir', lambda: os.chmod(d, 0o777))\n"
                  "t('link', lambda: os.chmod('src/link', 0o644))\n"
                  "t('home', lambda: os.chmod(sys.argv[3], 0o777))\n"
                  "fd = os.open(d, os.O_RDONLY)\n"
                  "t('at', lambda: os.chmod('key', 0o644, dir_fd=fd))\n"
                  "t('fd', lambda: os.fchmod(os.open(k, os.O_RDONLY), 0o644))\n"
                  "libc = ctypes.CDLL(None, use_errno=True)\n"
                  "def at2(path, flags):\n"
                  "    if libc.syscall(452, -100, path.encode(), 0o644, flags) != 0:\n"
                  "        raise OSError(ctypes.get_errno(), 'fchmodat2')\n"
                  "t('at2', lambda: at2(k, 0))\n"
                  "t('at2_nofollow', lambda: at2(k, 0x100))\n"
                  "t('own', lambda: os.chmod('src/f', 0o755))\n"
                  "t('own_at2', lambda: at2('src/f', 0x100))\n"
                  "tmp = os.path.join(os.environ['TMPDIR'], 't'); open(tmp, 'w').close()\n"
                  "t('tmp', lambda: os.chmod(tmp, 0o700))\n"
                  "t('own_link_nofollow', lambda: at2('src/link', 0x100))\n"
                  "t('missing', lambda: os.chmod('src/nothing', 0o644))\n"
                  "t('own_nofollow', lambda: os.chmod('src/f', 0o600, follow_symlinks=False))\n"
                  "t('nofollow', lambda: os.chmod(k, 0o644, follow_symlinks=False))\n"
                  "def proc(p, m): os.chmod('/proc/self/fd/%d' % os.open(p, os.O_PATH), m)\n"
                  "t('own_proc', lambda: proc('src/f', 0o640))\n"
                  "t('proc', lambda: proc(k, 0o644))\n")
        out, lines = await outcomes(ctx, script, target, outside, home)
        for name in ("path", "dir", "link", "at", "fd", "at2", "at2_nofollow", "nofollow", "proc"):  # (not "home":
            # bubblewrap's is a tmpfs of its own)
            assert lines[name].startswith("REFUSED"), out
        assert os.stat(target).st_mode & 0o7777 == 0o600
        assert os.stat(outside).st_mode & 0o7777 == 0o700
        assert os.stat(home).st_mode & 0o7777 != 0o777
        assert lines["own"] == "DONE", out
        assert lines["tmp"] == "DONE", out
        assert lines["own_at2"] == "DONE", out
        assert lines["own_nofollow"] == "DONE", out
        assert lines["own_proc"] == "DONE", out
        assert (ws / "src" / "f").stat().st_mode & 0o7777 == 0o640  # 0o755, 0o644 (fchmodat2), 0o600, 0o640
        assert lines["missing"] == f"REFUSED {errno.ENOENT}", out
        assert lines["own_link_nofollow"].startswith("REFUSED"), out  # a symlink's own mode: EOPNOTSUPP (or EPERM)

    async def test_cannot_change_times_or_attributes_of_what_lies_outside(self, ctx: ToolContext, ws: Path,
                                                                          place: Path) -> None:
        # Nor by the other metadata calls Landlock has no right for: an ACL set with setxattr is a chmod
        # (system.posix_acl_access: the key readable by all), utimensat rewrites times (backups, make), user.*
        # attributes.  Each by path, without following a symlink, on a descriptor; in the workspace they work.
        target = place / "key"
        target.write_text("k")
        os.chmod(target, 0o600)
        os.utime(target, (1_000_000, 1_000_000))
        (ws / "src" / "f").write_text("f")
        (ws / "src" / "link").symlink_to("f")
        script = ("import os, sys, struct\n"
                  "def t(name, f):\n"
                  "    try: f(); print(name, 'DONE')\n"
                  "    except OSError as e: print(name, 'REFUSED', e.errno)\n"
                  "k = sys.argv[1]\n"
                  "acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', t, p, 0xffffffff)"
                  " for t, p in ((1, 6), (4, 4), (0x20, 4)))\n"
                  "t('acl', lambda: os.setxattr(k, 'system.posix_acl_access', acl))\n"
                  "t('acl_nofollow', lambda: os.setxattr(k, 'system.posix_acl_access', acl, follow_symlinks=False))\n"
                  "t('acl_fd', lambda: os.setxattr(os.open(k, os.O_RDONLY), 'system.posix_acl_access', acl))\n"
                  "t('user', lambda: os.setxattr(k, 'user.x', b'1'))\n"
                  "t('times', lambda: os.utime(k, (0, 0)))\n"
                  "t('now', lambda: os.utime(k))\n"
                  "t('times_fd', lambda: os.utime(os.open(k, os.O_RDONLY), (0, 0)))\n"
                  "t('times_nofollow', lambda: os.utime(k, (0, 0), follow_symlinks=False))\n"
                  "t('own_user', lambda: os.setxattr('src/f', 'user.x', b'12'))\n"
                  "print('own_get', os.getxattr('src/f', 'user.x').decode())\n"
                  "t('own_remove', lambda: os.removexattr('src/f', 'user.x'))\n"
                  "t('own_acl', lambda: os.setxattr('src/f', 'system.posix_acl_access', acl))\n"
                  "t('own_times', lambda: os.utime('src/f', ns=(5_000_000_123, 7_000_000_456)))\n"
                  "t('own_link_times', lambda: os.utime('src/link', (9, 9), follow_symlinks=False))\n"
                  "t('own_fd_times', lambda: os.utime(os.open('src/link', os.O_RDONLY), (8, 8)))\n"
                  "t('missing', lambda: os.utime('src/nothing'))\n")
        out, lines = await outcomes(ctx, script, target)
        for name in ("acl", "acl_nofollow", "acl_fd", "user", "times", "now", "times_fd", "times_nofollow"):
            assert lines[name].startswith("REFUSED"), out
        assert os.stat(target).st_mode & 0o7777 == 0o600
        assert os.stat(target).st_mtime == 1_000_000
        assert os.listxattr(target) == []
        for name in ("own_user", "own_remove", "own_acl", "own_times", "own_link_times", "own_fd_times"):
            assert lines[name] == "DONE", (name, out)
        assert lines["own_get"] == "12", out
        assert lines["missing"] == f"REFUSED {errno.ENOENT}", out
        f = (ws / "src" / "f").stat()
        assert (f.st_mode & 0o7777, f.st_atime_ns, f.st_mtime_ns) == (0o644, 8_000_000_000, 8_000_000_000)
        assert (ws / "src" / "link").lstat().st_mtime == 9

    async def test_cannot_change_the_group_of_what_lies_outside(self, ctx: ToolContext, ws: Path, place: Path) -> None:
        # chown without capabilities gives a file to another of the user's groups (a key with g+r to a shared group).
        # A root runtime's command runs as uid 0 without capabilities: it may give root's files to group 0.
        if os.geteuid() != 0:
            pytest.skip("needs files of another group that the command's user may give to its own: run as root")
        target = place / "key"
        target.write_text("k")
        (ws / "src" / "f").write_text("f")
        (ws / "src" / "link").symlink_to(target)
        for p in (target, ws / "src" / "f"):
            os.chown(p, -1, 1)
        os.lchown(ws / "src" / "link", -1, 1)
        script = ("import os, sys\n"
                  "def t(name, f):\n"
                  "    try: f(); print(name, 'DONE')\n"
                  "    except OSError as e: print(name, 'REFUSED', e.errno)\n"
                  "k = sys.argv[1]\n"
                  "t('path', lambda: os.chown(k, -1, 0))\n"
                  "t('through_link', lambda: os.chown('src/link', -1, 0))\n"
                  "t('nofollow', lambda: os.chown(k, -1, 0, follow_symlinks=False))\n"
                  "t('fd', lambda: os.chown(os.open(k, os.O_RDONLY), -1, 0))\n"
                  "t('at', lambda: os.chown(os.path.basename(k), -1, 0, dir_fd=os.open(os.path.dirname(k), 0)))\n"
                  "t('own', lambda: os.chown('src/f', -1, 0))\n"
                  "t('own_link', lambda: os.chown('src/link', -1, 0, follow_symlinks=False))\n")
        out, lines = await outcomes(ctx, script, target)
        for name in ("path", "through_link", "nofollow", "fd", "at"):
            assert lines[name].startswith("REFUSED"), out
        assert os.stat(target).st_gid == 1
        assert lines["own"] == "DONE", out
        assert lines["own_link"] == "DONE", out
        assert (ws / "src" / "f").stat().st_gid == 0
        assert (ws / "src" / "link").lstat().st_gid == 0

    async def test_cannot_set_the_flags_of_what_lies_outside(self, ctx: ToolContext, place: Path) -> None:
        # chattr: FS_IOC_SETFLAGS on a file opened for reading (+d: left out of dump backups, +S: every write synced);
        # Landlock does not check that ioctl.
        target = place / "key"
        target.write_text("k")
        script = ("import fcntl, os, struct, sys\n"
                  "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
                  "try: fcntl.ioctl(fd, 0x40086602, struct.pack('l', 0x40 | 0x8)); print('flags SET')\n"
                  "except OSError as e: print('flags REFUSED', e.errno)\n")
        out, lines = await outcomes(ctx, script, target)
        assert lines["flags"].startswith("REFUSED"), out
        fd = os.open(target, os.O_RDONLY)
        try:  # FS_IOC_GETFLAGS: neither +d nor +S
            assert struct.unpack("l", fcntl.ioctl(fd, 0x80086601, bytes(8)))[0] & (0x40 | 0x8) == 0
        finally:
            os.close(fd)

    async def test_no_race_changes_the_mode_of_what_lies_outside(self, ctx: ToolContext, ws: Path, place: Path
                                                                  ) -> None:
        # Whoever decides a chmod must act on what it checked: one thread swaps a workspace symlink between a file
        # of the workspace and one outside, another rewrites the path in the very buffer a third passes to chmod,
        # while both call chmod as fast as they can for a second.
        target = place / "key"
        target.write_text("k")
        os.chmod(target, 0o600)
        (ws / "src" / "f").write_text("f")
        script = ("import os, sys, ctypes, threading, time\n"
                  "k = sys.argv[1]; os.symlink('f', 'src/a'); os.symlink(k, 'src/b')\n"
                  "inside, outside = b'src/f'.ljust(len(k) + 1, bytes(1)), k.encode() + bytes(1)\n"
                  "buf = ctypes.create_string_buffer(inside, len(outside) + 8)\n"
                  "libc = ctypes.CDLL(None, use_errno=True); end = time.time() + 1; done = [0, 0]\n"
                  "def swap():\n"
                  "    while time.time() < end:\n"
                  "        os.symlink('a', 'src/t'); os.replace('src/t', 'src/l'); os.symlink('b', 'src/t')\n"
                  "        os.replace('src/t', 'src/l'); ctypes.memmove(buf, outside, len(outside))\n"
                  "        ctypes.memmove(buf, inside, len(inside))\n"
                  "def hit(i):\n"
                  "    while time.time() < end:\n"
                  "        done[i] += libc.chmod(b'src/l' if i else buf, 0o666) == 0\n"
                  "ts = [threading.Thread(target=f, args=a) for f, a in ((swap, ()), (hit, (0,)), (hit, (1,)))]\n"
                  "[t.start() for t in ts]; [t.join() for t in ts]; print('done', done)\n")
        out = await run(ctx, f"{SANDBOX_PYTHON} -c \"{script}\" {target}")
        assert "done [" in out, out
        assert os.stat(target).st_mode & 0o7777 == 0o600, out
        assert (ws / "src" / "f").stat().st_mode & 0o7777 == 0o666, out  # the calls on the workspace's file did work

    async def test_cannot_connect_to_a_unix_socket_of_the_host(self, ctx: ToolContext, unix_server: str) -> None:
        script = ("import socket, sys\ntry: socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print('CONNECTED')"
                  "\nexcept OSError as e: print('REFUSED', e.errno)")
        out = await run(ctx, f"{SANDBOX_PYTHON} -c \"{script}\" {unix_server}; ls /run /var/run")
        assert "CONNECTED" not in out
        assert "REFUSED" in out  # the attempt really ran (and failed)
        assert unix_server.rsplit("/", 1)[1] not in out

    async def test_no_unix_socket_of_the_host_with_the_network_on(self, ws: Path, home: Path,
                                                                  unix_server: str) -> None:
        # With the network on the command shares the host's network namespace (bubblewrap) or has none of its own
        # (Landlock): the host's abstract sockets (an X server's: keystrokes into the desktop; containerd's shims)
        # and, under Landlock, its pathname ones (docker.sock; the D-Bus session bus, whose systemd runs anything
        # outside: systemd-run --user) were reachable.  Bubblewrap scopes abstract sockets (Landlock ABI >= 6) and
        # masks /run; Landlock's seccomp filter refuses new UNIX sockets.  A command's own abstract socket works
        # under bubblewrap; TCP and socketpair() work under both.
        ctx = self.make(ws, home, network=True)
        name = f"subagents-test-{uuid.uuid4().hex[:8]}"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind("\0" + name)
        listener.listen()
        script = ("import socket, sys\n"
                  "def reach(where):\n"
                  "    try: socket.socket(socket.AF_UNIX).connect(where); return 'CONNECTED'\n"
                  "    except OSError as e: return f'REFUSED {e.errno}'\n"
                  "print('host_abstract', reach(b'\\0' + sys.argv[1].encode()))\n"
                  "print('host_path', reach(sys.argv[2]))\n"
                  "try:\n    own = socket.socket(socket.AF_UNIX); own.bind(b'\\0' + sys.argv[1].encode() + b'-own');"
                  " own.listen(); print('own', reach(b'\\0' + sys.argv[1].encode() + b'-own'))\n"
                  "except OSError as e: print('own', 'REFUSED', e.errno)\n"
                  "a, b = socket.socketpair(); a.send(b'x'); print('pair', b.recv(1).decode())\n")
        try:
            out = await run(ctx, f"{SANDBOX_PYTHON} -c \"{script}\" {name} {unix_server}")
        finally:
            listener.close()
        lines = dict(line.split(" ", 1) for line in out.splitlines() if line.split(" ", 1)[0] in (
            "host_abstract", "host_path", "own", "pair"))
        if self.mode == "bwrap" and landlock.abi_version() < 6:  # the documented limit before Linux 6.12: no scope
            assert lines["host_abstract"] == "CONNECTED", out
        else:
            assert lines["host_abstract"].startswith("REFUSED"), out
        assert lines["host_path"].startswith("REFUSED"), out
        assert lines["pair"] == "x", out
        assert lines["own"] == ("CONNECTED" if self.mode == "bwrap" else "REFUSED 13"), out

    async def test_cannot_signal_the_runtime(self, ctx: ToolContext) -> None:
        pid = os.getpid()
        out = await run(ctx, f"kill -0 {pid}; echo rc=$?; kill -9 {pid}; echo rc=$?")
        assert out.count("rc=1") == 2  # and this test process is still here to check it

    # -- processes --------------------------------------------------------------------------------
    async def test_no_process_outlives_its_command(self, ctx: ToolContext) -> None:
        mark, other = marker(), marker()
        out = await run(ctx, f"sleep {mark} & nohup sleep {other} > /dev/null 2>&1 & echo started")
        assert out.startswith("started")
        await eventually(lambda: not marked(mark) and not marked(other))

    async def test_kill_all_process_groups(self, ws: Path, home: Path) -> None:
        ctx = self.make(ws, home)
        mark = marker()
        proc = await ctx.sandbox.spawn(["/bin/bash", "-c", f"sleep {mark} & wait"])
        await eventually(lambda: len(marked(mark)) >= 2)
        assert proc.pid in live_process_groups()
        kill_all_process_groups()
        assert await asyncio.wait_for(proc.wait(), 5) < 0
        await eventually(lambda: not marked(mark))
        assert proc.pid not in live_process_groups()

    # -- plan mode --------------------------------------------------------------------------------
    async def test_plan_mode_is_a_usable_read_only_shell(self, ctx: ToolContext, ws: Path) -> None:
        ctx.shell_writable = False
        out = await run(ctx, "ls; cat src/app.py; git status --short >/dev/null; echo git=$?; "
                             "echo x > src/new.py; echo w=$?; echo x >> README.md; rm src/app.py; echo rm=$?")
        lines = out.splitlines()
        assert "src" in lines
        assert "print('app')" in lines
        assert "git=0" in lines
        assert "w=1" in lines
        assert "rm=1" in lines
        assert not exists(ws / "src" / "new.py")
        assert read(ws / "README.md") == "readme\n"
        assert exists(ws / "src" / "app.py")
        assert not exists(ws / ".git" / "index.lock")
