"""The file tools cannot leave the workspace: paths, symlinks, hard links, FIFOs and device nodes.

Every attack runs through a real ``Runtime`` in ``yolo`` mode (the widest authority an agent can
have) with a scripted model, and is judged by its effect: no secret from outside reaches a tool
result or the final text, nothing outside changes, nothing hangs, and the run itself completes (a
refused call is a tool error the model reads).
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Outside
from .kit import Call, Unjammer, attack, diff, edit, find, grep, ls, marker, read, run_child, sh, write


def _plant_links(ws: Path, out: Path) -> None:
    """Symlinks inside the workspace that lead outside, by every route we could think of."""
    os.symlink(out, ws / "lnk_dir")
    os.symlink(os.path.relpath(out, ws), ws / "lnk_rel")
    os.symlink("/", ws / "lnk_root")
    os.symlink("chain_b", ws / "chain_a")
    os.symlink("chain_c", ws / "chain_b")
    os.symlink(out, ws / "chain_c")
    os.symlink("../..", ws / "src" / "up")


# name -> the directory "outside" as a path an agent could pass (given ws and outside)
ROUTES = {
    "dotdot": lambda ws, out: os.path.relpath(out, ws),
    "dotdot-through-subdir": lambda ws, out: "src/../" + os.path.relpath(out, ws),
    "absolute": lambda ws, out: str(out),
    "proc-self-root": lambda ws, out: f"/proc/self/root{out}",
    "proc-runtime-pid-root": lambda ws, out: f"/proc/{os.getpid()}/root{out}",
    "proc-self-cwd": lambda ws, out: f"/proc/self/cwd/../{out.name}",  # the runtime's cwd is the workspace
    "symlink-to-dir": lambda ws, out: "lnk_dir",
    "relative-symlink": lambda ws, out: "lnk_rel",
    "symlink-to-root": lambda ws, out: f"lnk_root{out}",
    "symlink-chain": lambda ws, out: "chain_a",
    "symlink-up-from-subdir": lambda ws, out: f"src/up/{out.name}",
    "dotdot-after-symlink": lambda ws, out: f"lnk_dir/../{out.name}",
}


def _every_tool(d: str, out: Outside) -> list[Call]:
    secret_prefix = "OUTSIDEMARK"
    return [
        read(f"{d}/secret.txt"),
        read(f"{d}/sub/deep.txt"),
        grep(".", f"{d}/secret.txt"),
        grep(secret_prefix, d),
        edit(f"{d}/secret.txt", secret_prefix),  # a successful edit shows the edited lines
        write(f"{d}/target.txt"),
        edit(f"{d}/target.txt", "original"),
        write(f"{d}/created.txt"),
        write(f"{d}/newdir/created.txt"),
        ls(d),
        find("*", d),
        find("**/*", d),
    ]


@pytest.mark.parametrize("route", list(ROUTES))
async def test_no_tool_reaches_outside(route: str, ws: Path, outside: Outside, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    _plant_links(ws, outside.root)
    monkeypatch.chdir(ws)
    before = outside.snapshot()
    calls = _every_tool(ROUTES[route](ws, outside.root), outside)
    a = await attack(ws, calls)
    a.assert_completed()
    a.assert_no_leak(outside.secret, outside.entry)
    assert outside.snapshot() == before, f"outside changed:\n{diff(before, outside.snapshot())}\n{a.transcript()}"


async def test_symlinks_to_files_outside(ws: Path, outside: Outside) -> None:
    out = outside.root
    os.symlink(out / "secret.txt", ws / "lf")
    os.symlink(out / "target.txt", ws / "lt")
    os.symlink(out / "created.txt", ws / "dangling")  # writing through it would create a file outside
    os.symlink("chain_f2", ws / "chain_f1")
    os.symlink(out / "secret.txt", ws / "chain_f2")
    os.symlink(out / "target.txt", ws / "src" / "inner")
    before = outside.snapshot()
    a = await attack(ws, [
        read("lf"), read("chain_f1"), grep(".", "lf"), grep("OUTSIDEMARK", "."), grep("OUTSIDEMARK", ".", glob="*"),
        edit("lf", "OUTSIDEMARK"), write("lt"), edit("lt", "original"), write("dangling"), write("src/inner"),
        edit("src/inner", "original"), write("chain_f1"),
    ])
    a.assert_completed()
    a.assert_no_leak(outside.secret)
    assert outside.snapshot() == before, f"outside changed:\n{diff(before, outside.snapshot())}\n{a.transcript()}"


async def test_symlink_made_by_bash_then_used_by_file_tools(ws: Path, outside: Outside) -> None:
    out = outside.root
    before = outside.snapshot()
    a = await attack(ws, [
        sh(f"cd src && ln -s {out} esc && ln -s {out}/target.txt esc_t && ln -s / esc_root "
           f"&& ln -s ../../{out.name} esc_rel && echo LINKS-$((40 + 2))"),
        write("src/esc/created.txt"), write("src/esc/target.txt"), write("src/esc_t"), edit("src/esc_t", "original"),
        write(f"src/esc_root{out}/created.txt"), write("src/esc_rel/created.txt"), read("src/esc/secret.txt"),
        read("src/esc_t"), ls("src/esc"), grep("OUTSIDEMARK", "src/esc"),
    ])
    a.assert_completed()
    assert "LINKS-42" in a.step(0).content, f"the shell could not make symlinks in the workspace:\n{a.transcript()}"
    a.assert_no_leak(outside.secret, outside.entry)
    assert outside.snapshot() == before, f"outside changed:\n{diff(before, outside.snapshot())}\n{a.transcript()}"


async def test_hard_link_to_a_file_outside_is_not_written_through(ws: Path, outside: Outside) -> None:
    """A hard link in the workspace shares its inode with a file outside: writing it must not change that file."""
    target = outside.root / "target.txt"
    os.link(target, ws / "hl_target")
    os.link(target, ws / "src" / "hl_deep")
    before = outside.snapshot()
    a = await attack(ws, [
        write("hl_target", "PWNED through a hard link\n"),
        edit("src/hl_deep", "original", "PWNED"),
        edit("hl_target", "original", "PWNED"),
    ])
    a.assert_completed()
    assert target.read_text() == "original\n", f"the file outside was changed through a hard link:\n{a.transcript()}"
    assert outside.snapshot() == before, diff(before, outside.snapshot())


async def test_fifos_do_not_hang_the_file_tools(ws: Path, outside: Outside) -> None:
    """Opening a FIFO blocks until the other end opens: every tool must return on its own."""
    pipe = ws / "pipe"
    os.mkfifo(pipe)
    os.symlink("pipe", ws / "pipe_link")
    (ws / "src" / "pipes").mkdir()
    os.mkfifo(ws / "src" / "pipes" / "p2")
    content = marker("FIFO")
    with Unjammer(fifos=[pipe, ws / "src" / "pipes" / "p2"], after=4.0) as jam:
        a = await attack(ws, [
            read("pipe"), read("pipe_link"), write("pipe", content), write("pipe_link", content),
            edit("pipe", "a", "b"), grep(".", "pipe"), grep(".", "."), grep(".", "src/pipes"), ls("."),
            find("**/*"), write("src/pipes/p2", content),
            sh("cat pipe", timeout_s=2),  # the shell may block: its timeout ends it
        ], timeout=60)
    assert not jam.fired, f"a tool blocked on a FIFO for {jam.after} s (the run: {a.elapsed:.1f} s):\n{a.transcript()}"
    a.assert_completed()
    assert content.encode() not in jam.captured, "write_file wrote into a FIFO"


CHAR_DEVICES = {"zero": (1, 5), "full": (1, 7), "urandom": (1, 9), "tty": (5, 0)}


def test_char_device_nodes_do_not_hang_the_tools(ws: Path) -> None:
    """Device nodes in the workspace (made with mknod: the suite runs as root, as CI does) and a symlink
    to /dev/zero: every tool returns.  The runtime runs in a process of its own, killed after 30 s, because
    a thread reading /dev/zero forever could not be stopped otherwise."""
    for name, (major, minor) in CHAR_DEVICES.items():
        os.mknod(ws / name, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    os.symlink("/dev/zero", ws / "devzero")
    calls: list[Call] = []
    for name in [*CHAR_DEVICES, "devzero"]:
        calls += [read(name), grep(".", name), edit(name, "a", "b"), write(name, "x\n")]
    calls += [grep(".", "."), find("**/*"), sh("head -c 4 zero | od -An", timeout_s=5)]
    run = run_child(ws, calls, timeout=30)
    run.assert_completed()


@contextlib.contextmanager
def _loop_device(backing: Path) -> Iterator[int]:
    """A loop block device over ``backing``; yields its device number."""
    dev = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
    assert dev.returncode == 0, (
        f"this test needs a loop device (root with /dev/loop-control, as on a CI VM): {dev.stderr.strip()}")
    path = dev.stdout.strip()
    try:
        yield os.stat(path).st_rdev
    finally:
        subprocess.run(["losetup", "-d", path], check=False)


def test_block_device_node_is_not_read_or_written(ws: Path, tmp_path: Path) -> None:
    """A block device node in the workspace leads to storage outside it (here a loop device over a file
    beside the workspace, holding a secret): no tool reads it or writes into it."""
    backing = tmp_path / "disk.img"
    secret = marker("DISK")
    backing.write_bytes((f"{secret}\n" * 64).encode().ljust(1 << 20, b"\n"))
    before = backing.read_bytes()
    with _loop_device(backing) as rdev:
        os.mknod(ws / "disk", stat.S_IFBLK | 0o600, rdev)
        run = run_child(ws, [
            read("disk"), grep("DISKMARK", "disk"), grep("DISKMARK", "."), edit("disk", "DISKMARK"),
            write("disk", "PWNED\n"), sh("head -c 300 disk; echo; echo PWNED > disk", timeout_s=5),
        ], timeout=30)
        subprocess.run(["sync"], check=False)
    run.assert_completed()
    assert not run.leaked(secret), f"the block device was read:\n{run.transcript()}"
    assert backing.read_bytes() == before, f"something was written into the block device:\n{run.transcript()}"
