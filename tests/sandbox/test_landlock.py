"""The Landlock backend (forced with ``mode = "landlock"``): the attacks of :class:`AttackSuite`.

Where Landlock cannot enforce what bubblewrap does, the test below says so and asserts the limit,
so that a change in either direction is noticed.
"""

from __future__ import annotations

import errno
import os
import platform
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from procutil import SANDBOX_PYTHON
from subagents.sandbox import SandboxPolicy, Workspace, landlock, spawnthread
from subagents.sandbox.shell import ShellSandbox
from subagents.tools.base import ToolContext

from .attacks import AttackSuite, eventually, exists, marked, marker, outcomes, read, run, setsid_sleep

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux only")


def test_this_kernel_has_landlock() -> None:
    # The tests below must not pass by accident on a kernel without Landlock.
    assert landlock.abi_version() >= 6


class TestLandlock(AttackSuite):
    mode = "landlock"

    @pytest.fixture
    def host_tmp_file(self) -> Iterator[str]:
        fd, path = tempfile.mkstemp(prefix="subagents-host-")
        os.write(fd, b"host tmp\n")
        os.close(fd)
        yield path
        os.unlink(path)

    async def test_cannot_connect_to_a_unix_socket_of_the_host(self, ctx: ToolContext, unix_server: str) -> None:
        # Landlock cannot restrict connect() to a pathname socket; the seccomp filter refuses socket()
        # itself while the network is off.  Directory listings are allowed everywhere, so the
        # socket's name can be seen.
        # (the word printed is put together: Python 3.13's traceback quotes the script's line)
        script = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                  "print('CONN' + 'ECTED')")
        out = await run(ctx, f"{SANDBOX_PYTHON} -c \"{script}\" {unix_server}")
        assert "CONNECTED" not in out
        assert "PermissionError" in out

    async def test_the_reaper_answers_bad_metadata_calls_as_the_kernel_would_and_carries_on(self, ctx: ToolContext
                                                                                           ) -> None:
        # The reaper carries out chmod, chown, utimensat and the xattr calls itself (Landlock has no right for them):
        # what a program passes it is untrusted.  Bad pointers, a path or name too long, unknown flags, a descriptor
        # that is not open, an attribute value over the limit: each gets the kernel's error, and the reaper goes on.
        if platform.machine() != "x86_64":
            pytest.skip("raw x86-64 system call numbers")
        script = ("import ctypes, os\n"
                  "libc = ctypes.CDLL(None, use_errno=True); sc = libc.syscall; sc.restype = ctypes.c_long\n"
                  "def t(name, *a):\n"
                  "    r = sc(*a); print(name, 0 if r == 0 else ctypes.get_errno())\n"
                  "open('src/f', 'w').close(); big = b'a' * 5000; c = ctypes.c_char_p\n"
                  "t('null_path', 90, None, 0o644)\n"
                  "t('wild_path', 90, ctypes.c_void_p(0x10), 0o644)\n"
                  "t('long_path', 90, c(big), 0o644)\n"
                  "t('bad_flags', 452, -100, c(b'src/f'), 0o644, 0x4)\n"
                  "t('bad_dirfd', 268, 999, c(b'f'), 0o644)\n"
                  "t('bad_fd', 91, 999, 0o644)\n"
                  "t('long_name', 188, c(b'src/f'), c(b'user.' + big[:300]), c(b'1'), 1, 0)\n"
                  "t('empty_name', 188, c(b'src/f'), c(b''), c(b'1'), 1, 0)\n"
                  "t('wild_value', 188, c(b'src/f'), c(b'user.x'), ctypes.c_void_p(0x10), 8, 0)\n"
                  "t('big_value', 188, c(b'src/f'), c(b'user.x'), c(b'1'), 1 << 20, 0)\n"
                  "t('wild_times', 280, -100, c(b'src/f'), ctypes.c_void_p(0x10), 0)\n"
                  "t('times_flags', 280, -100, c(b'src/f'), None, 0x8)\n"
                  "t('chown_null', 92, None, -1, -1)\n"
                  "t('chown_flags', 260, -100, c(b'src/f'), -1, -1, 0x4)\n"
                  "t('chown_fd', 93, 999, -1, -1)\n"
                  "t('fine', 90, c(b'src/f'), 0o600)\n")
        out, got = await outcomes(ctx, script)
        assert got == {"null_path": str(errno.EFAULT), "wild_path": str(errno.EFAULT),
                       "long_path": str(errno.ENAMETOOLONG), "bad_flags": str(errno.EINVAL),
                       "bad_dirfd": str(errno.EBADF), "bad_fd": str(errno.EBADF), "long_name": str(errno.ERANGE),
                       "empty_name": str(errno.ERANGE), "wild_value": str(errno.EFAULT),
                       "big_value": str(errno.E2BIG), "wild_times": str(errno.EFAULT),
                       "times_flags": str(errno.EINVAL), "chown_null": str(errno.EFAULT),
                       "chown_flags": str(errno.EINVAL), "chown_fd": str(errno.EBADF), "fine": "0",
                       "exit": "code 0"}, out

    async def test_no_abstract_socket_of_the_host_with_the_network_on_before_linux_6_12(
            self, ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        # Before ABI 6 Landlock does not scope abstract sockets either (an X server's): the filter's refusal of new
        # UNIX sockets covers them too (the shared attack covers this kernel's ABI).
        monkeypatch.setattr(landlock, "abi_version", lambda: 5)
        ctx = self.make(ws, home, network=True)
        name = f"subagents-test-{uuid.uuid4().hex[:8]}"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind("\0" + name)
        listener.listen()
        try:
            script = ("import socket, sys\ntry: socket.socket(socket.AF_UNIX).connect(b'\\0' + sys.argv[1].encode());"
                      " print('CONNECTED')\nexcept OSError as e: print('REFUSED', e.errno)")
            out = await run(ctx, f"{SANDBOX_PYTHON} -c \"{script}\" {name}")
        finally:
            listener.close()
        assert "REFUSED 13" in out, out

    async def test_a_process_that_leaves_the_group_still_ends(self, ctx: ToolContext) -> None:
        # No PID namespace: setsid() leaves the group, but the SUBAGENTS_COMMAND tag in its
        # environment gives it away when the command ends.
        mark = marker()
        out = await run(ctx, setsid_sleep(mark) + "; echo started")
        assert out.startswith("started")
        await eventually(lambda: not marked(mark))

    async def test_a_process_that_leaves_the_group_and_clears_its_environment_ends_too(self, ctx: ToolContext) -> None:
        # Once the documented limit of the tag sweep; the command's reaper (sandbox/supervisor.py) ends it now.
        mark = marker()
        out = await run(ctx, "env -i " + setsid_sleep(mark) + "; echo started")
        assert out.startswith("started")
        await eventually(lambda: not marked(mark))

    async def test_limit_no_new_entries_in_the_workspace_root(self, ctx: ToolContext, ws: Path) -> None:
        # The documented limit of an allowlist: write is granted on the root's entries, not on the
        # root, or a command could create a protected name that does not exist yet.
        out = await run(ctx, "touch new.txt; echo rc=$?; echo more >> README.md; mkdir src/d && echo x > src/d/f; "
                             "mv src/app.py src/main.py; echo rc=$?")
        assert out.splitlines()[1] == "rc=1"
        assert "[if a command was refused a new file or directory directly in the workspace root" not in out  # exit 0
        out = await run(ctx, "touch new.txt")
        assert out.splitlines()[-2] == (
            "[if a command was refused a new file or directory directly in the workspace root: this sandbox (Landlock) "
            "lets commands create, rename or delete entries only inside the root's existing directories; create a "
            "top-level file with write_file instead]")
        assert not exists(ws / "new.txt")
        assert read(ws / "README.md") == "readme\nmore\n"
        assert read(ws / "src" / "d" / "f") == "x\n"
        assert exists(ws / "src" / "main.py")

    async def test_temp_dir_is_private_and_removed(self, ctx: ToolContext, host_tmp_file: str) -> None:
        out = await run(ctx, f"echo $TMPDIR; echo hi > $TMPDIR/f && cat $TMPDIR/f; ls /tmp >/dev/null 2>&1; "
                             f"echo ls=$?; cat {host_tmp_file} 2>/dev/null; echo cat=$?; ls /usr >/dev/null; "
                             "echo usr=$?")
        tmpdir, hi, ls, cat, usr, _ = out.splitlines()
        assert hi == "hi"
        assert (ls, cat, usr) == ("ls=2", "cat=1", "usr=0")  # the host's /tmp is neither listed nor read
        assert tmpdir.startswith("/tmp/subagents-cmd-")
        assert not exists(tmpdir)


def _status(field: str) -> str:
    with open("/proc/thread-self/status") as f:
        return next(line.split()[1] for line in f if line.startswith(field + ":"))


async def test_the_runtime_itself_stays_unconfined(tmp_path: Path) -> None:
    # The confinement is applied in a helper thread that starts the command and ends: the thread
    # running the event loop (and every other thread) keeps its rights.
    ws = Workspace(tmp_path, SandboxPolicy(mode="landlock"))
    box = ShellSandbox(ws)
    proc = await box.spawn(["/bin/sh", "-c", "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status"])
    out, _ = await proc.communicate()
    assert out.decode().split() == ["CapEff:", "0000000000000000", "NoNewPrivs:", "1", "Seccomp:", "2"]
    assert (_status("NoNewPrivs"), _status("Seccomp")) == ("0", "0")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM):  # the seccomp filter is not ours
        pass
    fd, path = tempfile.mkstemp()  # nor the Landlock domain
    os.close(fd)
    os.unlink(path)


async def test_the_preexec_fallback_confines_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where asyncio has no hook for the helper thread, the command confines itself in preexec_fn.
    monkeypatch.setattr(spawnthread, "available", lambda: False)
    (tmp_path / "sub").mkdir()
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="landlock")))
    tag = f"/etc/subagents-{uuid.uuid4().hex[:8]}"
    proc = await box.spawn(["/bin/sh", "-c", f"echo x > {tag}; echo y > sub/ok; grep NoNewPrivs /proc/self/status"])
    out, _ = await proc.communicate()
    assert out.decode().split() == ["NoNewPrivs:", "1"]
    assert not exists(tag)
    assert read(tmp_path / "sub" / "ok") == "y\n"
