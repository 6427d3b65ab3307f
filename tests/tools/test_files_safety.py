"""The file tools against an adversarial workspace: escapes, races, protected and hidden paths, hard
links, FIFOs, failed writes and bad text.  Every test runs in each fs mode (openat2, walk, portable)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fsmodes
from subagents.exceptions import ToolError
from subagents.models.base import AgentInfo
from subagents.sandbox.policy import SandboxPolicy
from subagents.tools.base import FunctionTool, ToolContext
from subagents.tools.files import edit_file, glob, grep, list_dir, read_file, write_file
from subagents.tools.paths import Workspace

pytestmark = pytest.mark.usefixtures("fs_mode")

SRC = Path(__file__).resolve().parents[2] / "src"


async def call(t: FunctionTool, ctx: ToolContext, **arguments: Any) -> str:
    return await t.call(arguments, ctx)


async def error(t: FunctionTool, ctx: ToolContext, **arguments: Any) -> str:
    with pytest.raises(ToolError) as info:
        await t.call(arguments, ctx)
    return str(info.value)


def outside_msg(raw: str, real: Path, root: Path) -> str:
    return f"path {raw!r} resolves to {real}, outside the workspace {root}; use a path inside the workspace"


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def data(p: Path) -> bytes:
    return p.read_bytes()


@pytest.fixture
def outside(ws_root: Path) -> Path:
    d = ws_root.parent / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("MARK outside secret\n")
    return d


# --- escapes ------------------------------------------------------------------------------------


async def test_proc_self_root_paths(ctx: ToolContext, ws_root: Path, outside: Path) -> None:
    (ws_root / "in.txt").write_text("inside\n")
    raw = f"/proc/self/root{outside}/secret.txt"
    assert await error(read_file, ctx, path=raw) == outside_msg(raw, outside / "secret.txt", ws_root)
    assert await error(write_file, ctx, path=raw, content="x") == outside_msg(raw, outside / "secret.txt", ws_root)
    # The same workspace file reached through /proc/self/root is still that file.
    assert await call(read_file, ctx, path=f"/proc/self/root{ws_root}/in.txt") == "     1\tinside"
    # A symlink in the workspace through a magic link is refused, whatever it points to.
    (ws_root / "magic").symlink_to(f"/proc/self/root{ws_root}/in.txt")
    (ws_root / "fdlink").symlink_to("/proc/self/cwd")
    assert (await error(read_file, ctx, path="magic")).startswith("path 'magic' ")
    assert (await error(list_dir, ctx, path="fdlink")).startswith("path 'fdlink' ")
    assert (outside / "secret.txt").read_text() == "MARK outside secret\n"


async def test_symlinks_inside_work_for_every_tool(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "real").mkdir()
    (ws_root / "real" / "f.txt").write_text("one\n")
    (ws_root / "abs").symlink_to(ws_root / "real")  # absolute target inside the workspace
    (ws_root / "rel.txt").symlink_to("real/f.txt")
    assert await call(read_file, ctx, path="abs/f.txt") == "     1\tone"
    assert await call(edit_file, ctx, path="rel.txt", old_string="one", new_string="two") == (
        "Edited real/f.txt: replaced 1 occurrence. Lines 1-1 now read:\n     1\ttwo")
    assert await call(write_file, ctx, path="abs/new.txt", content="n\n") == (
        "Created real/new.txt: wrote 2 bytes (1 lines).")
    assert (ws_root / "rel.txt").is_symlink()  # the link is kept; its target was replaced
    assert (ws_root / "real" / "f.txt").read_text() == "two\n"
    assert await call(list_dir, ctx) == "abs/\nreal/\nrel.txt"
    assert await call(grep, ctx, pattern="two") == "real/f.txt:1: two\nrel.txt:1: two"


async def test_write_through_links_out_leaves_nothing_outside(ctx: ToolContext, ws_root: Path, outside: Path) -> None:
    (ws_root / "out").symlink_to("../outside")
    (ws_root / "out_file").symlink_to(outside / "secret.txt")
    assert await error(write_file, ctx, path="out/new.txt", content="x") == outside_msg(
        "out/new.txt", outside / "new.txt", ws_root)
    assert await error(write_file, ctx, path="out/sub/new.txt", content="x") == outside_msg(
        "out/sub/new.txt", outside / "sub" / "new.txt", ws_root)
    assert await error(write_file, ctx, path="out_file", content="x") == outside_msg(
        "out_file", outside / "secret.txt", ws_root)
    assert await error(edit_file, ctx, path="out_file", old_string="MARK", new_string="PWN") == outside_msg(
        "out_file", outside / "secret.txt", ws_root)
    assert listing(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "MARK outside secret\n"


# --- races: a symlink swapped by a thread ---------------------------------------------------------


@pytest.fixture
def swapping(ws_root: Path, outside: Path) -> Iterator[None]:
    """``ws/d`` keeps flipping between a real directory inside and a symlink to ``outside``.

    This is the attack on check-then-open: a path checked while ``d`` is a directory (so its real
    path is inside) and opened a moment later, when ``d`` leads outside.
    """
    (ws_root / "d").mkdir()
    (ws_root / "d" / "secret.txt").write_text("MARK inside\n")
    (ws_root / "link").symlink_to(outside)
    with fsmodes.swapping(ws_root / "d", ws_root / "link"):
        yield


RACE_TRIES = 2000


@pytest.mark.usefixtures("swapping")
async def test_read_race_never_reads_outside(ctx: ToolContext, ws_root: Path) -> None:
    outcomes: dict[str, int] = {}
    for _ in range(RACE_TRIES):
        try:
            out = await call(read_file, ctx, path="d/secret.txt")
        except ToolError as e:
            out = "refused" if "outside" in str(e) else str(e)
        assert "outside secret" not in out
        outcomes[out] = outcomes.get(out, 0) + 1
    assert set(outcomes) <= {"     1\tMARK inside", "refused"}, outcomes


@pytest.mark.usefixtures("swapping")
async def test_write_race_never_writes_outside(ctx: ToolContext, ws_root: Path, outside: Path) -> None:
    written = 0
    for i in range(RACE_TRIES):
        try:
            await call(write_file, ctx, path=f"d/new{i % 3}.txt", content="pwned\n")
            written += 1
        except ToolError:
            pass
    assert listing(outside) == ["secret.txt"]
    assert written > 0
    assert (outside / "secret.txt").read_text() == "MARK outside secret\n"


@pytest.mark.usefixtures("swapping")
async def test_edit_race_never_edits_outside(ctx: ToolContext, ws_root: Path, outside: Path) -> None:
    edited = 0
    for i in range(RACE_TRIES):
        old, new = ("MARK", "KRAM") if i % 2 == 0 else ("KRAM", "MARK")
        try:
            await call(edit_file, ctx, path="d/secret.txt", old_string=old, new_string=new)
            edited += 1
        except ToolError:
            pass
    assert listing(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "MARK outside secret\n"
    assert edited > 0


# --- protected and hidden paths -----------------------------------------------------------------


def protected_msg(raw: str, hit: str) -> str:
    return (f"{raw!r} is inside {hit}, which holds the runtime's own state or version control and is protected: "
            "no agent tool may write or delete it, in any permission mode. Write somewhere else in the workspace.")


@pytest.mark.parametrize(("raw", "hit"), [(".subagents/config.toml", ".subagents"),
                                          (".subagents/agents/x.md", ".subagents"),
                                          (".git/hooks/pre-commit", ".git"), (".claude/agents/x.md", ".claude"),
                                          (".qwen/settings.json", ".qwen"), (".git", ".git")])
async def test_protected_paths_are_never_written(ctx: ToolContext, ws_root: Path, raw: str, hit: str) -> None:
    (ws_root / ".git" / "hooks").mkdir(parents=True)
    (ws_root / ".subagents").mkdir()
    assert await error(write_file, ctx, path=raw, content="#!/bin/sh\nevil\n") == protected_msg(raw, hit)
    assert not (ws_root / raw).is_file()
    assert not (ws_root / ".subagents" / "agents").exists()  # no directory was created either
    assert not (ws_root / ".claude").exists()
    assert listing(ws_root / ".git" / "hooks") == []


async def test_protected_paths_through_symlinks(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / ".git").mkdir()
    (ws_root / ".git" / "config").write_text("[core]\n")
    (ws_root / "cfg").symlink_to(".git/config")
    (ws_root / "g").symlink_to(ws_root / ".git")
    assert await error(write_file, ctx, path="cfg", content="x") == protected_msg("cfg", ".git")
    assert await error(edit_file, ctx, path="cfg", old_string="core", new_string="x") == protected_msg("cfg", ".git")
    assert await error(write_file, ctx, path="g/hooks/post-checkout", content="x") == protected_msg(
        "g/hooks/post-checkout", ".git")
    assert (ws_root / ".git" / "config").read_text() == "[core]\n"
    assert (ws_root / "cfg").is_symlink()
    assert listing(ws_root / ".git") == ["config"]
    assert await call(read_file, ctx, path="cfg") == "     1\t[core]"  # protected is still readable


async def test_protected_and_hidden_paths_that_are_symlinks(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "gitdir" / "hooks").mkdir(parents=True)
    (ws_root / ".git").symlink_to("gitdir")  # the real directory has another name
    (ws_root / "state").mkdir()
    (ws_root / "state" / "state.db").write_text("rows\n")
    (ws_root / ".subagents").symlink_to(ws_root / "state")
    assert await error(write_file, ctx, path="gitdir/hooks/pre-commit", content="x") == protected_msg(
        "gitdir/hooks/pre-commit", ".git")
    assert await error(write_file, ctx, path="gitdir/new/x", content="x") == protected_msg("gitdir/new/x", ".git")
    assert await error(read_file, ctx, path="state/state.db") == hidden_msg("state/state.db", ".subagents/state.db")
    assert await call(glob, ctx, pattern="state/*") == "No paths match 'state/*' in .."
    assert listing(ws_root / "gitdir" / "hooks") == []
    assert not (ws_root / "gitdir" / "new").exists()


def hidden_msg(raw: str, hit: str) -> str:
    return (f"{raw!r} is hidden from agents ({hit} holds the run store or credentials, or is listed in [sandbox] "
            "deny_read); it cannot be read or written by any tool.")


@pytest.fixture
def store(ws_root: Path) -> Path:
    (ws_root / ".subagents").mkdir()
    db = ws_root / ".subagents" / "state.db"
    db.write_text("SQLite format 3 secret rows\n")
    (ws_root / ".subagents" / "state.db-wal").write_text("wal rows\n")
    (ws_root / ".subagents" / "config.toml").write_text("model = 'x'\n")
    return db


async def test_the_store_cannot_be_read(ctx: ToolContext, ws_root: Path, store: Path) -> None:
    assert await error(read_file, ctx, path=".subagents/state.db") == hidden_msg(
        ".subagents/state.db", ".subagents/state.db")
    assert await error(read_file, ctx, path=".subagents/state.db-wal") == hidden_msg(
        ".subagents/state.db-wal", ".subagents/state.db-wal")
    (ws_root / "alias.db").symlink_to(".subagents/state.db")
    assert await error(read_file, ctx, path="alias.db") == hidden_msg("alias.db", ".subagents/state.db")
    os.link(store, ws_root / "copy.db")  # a hard link: another name, the same inode
    assert await error(read_file, ctx, path="copy.db") == (
        "'copy.db' is a hard link to .subagents/state.db, which is hidden from agents (it holds the run store or "
        "credentials, or is listed in [sandbox] deny_read); it cannot be read or written by any tool.")
    assert (await error(edit_file, ctx, path="copy.db", old_string="secret", new_string="x")).startswith(
        "'copy.db' is a hard link to .subagents/state.db")
    assert await error(grep, ctx, pattern="secret", path="copy.db") == (
        "'copy.db' is a hard link to .subagents/state.db, which is hidden from agents (it holds the run store or "
        "credentials, or is listed in [sandbox] deny_read); it cannot be read or written by any tool.")
    # Searches neither list nor read it.
    assert await call(grep, ctx, pattern="rows") == "No matches for 'rows' in .; 0 files searched."
    assert await call(list_dir, ctx, path=".subagents") == ".subagents is empty."  # config.toml is hidden too
    assert await call(glob, ctx, pattern="**/*.db*") == "copy.db"  # alias.db leads to a hidden file
    assert await error(write_file, ctx, path="alias.db", content="x") == protected_msg("alias.db", ".subagents")
    assert data(store) == b"SQLite format 3 secret rows\n"


async def test_deny_read_and_a_custom_store(ws_root: Path) -> None:
    (ws_root / "private").mkdir()
    (ws_root / "private" / "keys.txt").write_text("k\n")
    (ws_root / "runs.db").write_text("rows\n")
    (ws_root / "ok.txt").write_text("k\n")
    ws = Workspace(ws_root, SandboxPolicy(deny_read=("private",)), store_files=[ws_root / "runs.db"])
    c = ToolContext(agent=AgentInfo("a", "a", "general-purpose"), workspace=ws)
    assert await error(read_file, c, path="private/keys.txt") == hidden_msg("private/keys.txt", "private")
    assert await error(list_dir, c, path="private") == hidden_msg("private", "private")
    assert await error(read_file, c, path="runs.db") == hidden_msg("runs.db", "runs.db")
    assert await error(write_file, c, path="runs.db", content="x") == hidden_msg("runs.db", "runs.db")
    assert await call(list_dir, c) == "ok.txt"
    assert await call(grep, c, pattern="k|rows") == "ok.txt:1: k"
    assert await call(glob, c, pattern="**/*") == "ok.txt"
    ws.close()


async def test_hard_links_into_hidden_directories_cannot_be_read(ws_root: Path) -> None:
    home = Path(os.environ["HOME"])  # a temporary $HOME (tests/conftest.py)
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (ws_root / "private").mkdir()
    (ws_root / "private" / "deep").mkdir()
    (ws_root / "private" / "deep" / "token").write_text("TOKEN\n")
    os.link(home / ".ssh" / "id_rsa", ws_root / "key.txt")
    os.link(ws_root / "private" / "deep" / "token", ws_root / "token.txt")
    ws = Workspace(ws_root, SandboxPolicy(deny_read=("private",)))
    c = ToolContext(agent=AgentInfo("a", "a", "general-purpose"), workspace=ws)
    assert await error(read_file, c, path="key.txt") == (
        f"'key.txt' is a hard link to {home / '.ssh' / 'id_rsa'}, which is hidden from agents (it holds the run "
        "store or credentials, or is listed in [sandbox] deny_read); it cannot be read or written by any tool.")
    assert (await error(read_file, c, path="token.txt")).startswith(
        "'token.txt' is a hard link to private/deep/token, which is hidden from agents")
    assert await call(grep, c, pattern="KEY|TOKEN") == "No matches for 'KEY|TOKEN' in .; 0 files searched."
    ws.close()


# --- hard links and devices ---------------------------------------------------------------------


async def test_hard_links_are_not_written_through(ctx: ToolContext, ws_root: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws_root / "hl.txt")
    msg = await error(write_file, ctx, path="hl.txt", content="pwned\n")
    assert msg == (
        "'hl.txt' has 2 hard links (other names for the same file, possibly outside the workspace), so it was not "
        "written: the file tools do not change files that other paths share. To allow it, set "
        "`allow_hardlinks = true` under [sandbox] in the config (the write then replaces this name only; the other "
        "names keep the old content).")
    assert (await error(edit_file, ctx, path="hl.txt", old_string="MARK", new_string="PWN")) == msg
    assert (outside / "secret.txt").read_text() == "MARK outside secret\n"
    assert await call(read_file, ctx, path="hl.txt") == "     1\tMARK outside secret"  # reading is fine
    ws = Workspace(ws_root, SandboxPolicy(allow_hardlinks=True))
    c = ToolContext(agent=AgentInfo("a", "a", "general-purpose"), workspace=ws)
    await call(edit_file, c, path="hl.txt", old_string="MARK", new_string="MINE")
    assert (ws_root / "hl.txt").read_text() == "MINE outside secret\n"
    assert (outside / "secret.txt").read_text() == "MARK outside secret\n"  # the link was replaced, not written
    ws.close()


async def test_other_devices_are_not_written(ctx: ToolContext, ws_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws_root / "f.txt").write_text("a\n")
    ws = ctx.workspace
    ws.anchor()  # the root is open (and checked) already
    monkeypatch.setattr(ws, "_root_id", (ws.root_device + 1, 1))  # as if the file were on a mount in the workspace
    assert await error(write_file, ctx, path="f.txt", content="b\n") == (
        "'f.txt' is on another device than the workspace root (a mount inside the workspace), so it was not written. "
        "To allow writes to other devices inside the workspace, set `allow_other_devices = true` under [sandbox] in "
        "the config.")
    assert (ws_root / "f.txt").read_text() == "a\n"
    monkeypatch.setattr(ws, "policy", SandboxPolicy(allow_other_devices=True))
    await call(write_file, ctx, path="f.txt", content="b\n")
    assert (ws_root / "f.txt").read_text() == "b\n"


# --- FIFOs and sockets --------------------------------------------------------------------------


async def test_fifo_is_refused_without_hanging(ctx: ToolContext, ws_root: Path) -> None:
    fifo = ws_root / "pipe"
    os.mkfifo(fifo)
    (ws_root / "pipe_link").symlink_to("pipe")
    (ws_root / "t.txt").write_text("needle\n")
    expected = ("'{}' is a FIFO (named pipe), not a regular file, so it was not opened; the file tools read and "
                "write regular files only.")
    try:
        for t, args in ((read_file, {}), (write_file, {"content": "x"}),
                        (edit_file, {"old_string": "a", "new_string": "b"})):
            for raw in ("pipe", "pipe_link"):
                with pytest.raises(ToolError) as info:
                    await asyncio.wait_for(t.call({"path": raw, **args}, ctx), 10)
                assert str(info.value) == expected.format(raw)
        assert await asyncio.wait_for(call(grep, ctx, pattern="needle"), 10) == "t.txt:1: needle"
        assert await call(glob, ctx, pattern="pipe*") == "pipe\npipe_link"
    finally:  # if a tool did block opening the FIFO, let it go
        for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, flags))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


async def test_socket_is_refused(ctx: ToolContext, ws_root: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(ws_root / "sock"))
        assert await error(read_file, ctx, path="sock") == (
            "'sock' is a socket, not a regular file, so it was not opened; the file tools read and write regular "
            "files only.")


# --- lossless writes ----------------------------------------------------------------------------


@pytest.fixture
def precious(ws_root: Path) -> Path:
    p = ws_root / "precious.txt"
    p.write_bytes(b"line one\nline two\n")
    return p


def fail_ws_writes(monkeypatch: pytest.MonkeyPatch, ws_root: Path, name: str, err: int) -> None:
    """Make ``os.<name>`` fail with ``err`` on files in the workspace (after writing a little, for write)."""
    real = getattr(os, name)

    def failing(fd: int, *args: Any) -> Any:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(ws_root)):
            if name == "write":
                real(fd, bytes(args[0])[:3])
            raise OSError(err, os.strerror(err))
        return real(fd, *args)

    monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize(("name", "err"), [("write", errno.ENOSPC), ("fsync", errno.EIO), ("write", errno.EDQUOT)])
async def test_failed_write_leaves_the_old_file(ctx: ToolContext, ws_root: Path, precious: Path,
                                                monkeypatch: pytest.MonkeyPatch, name: str, err: int) -> None:
    fail_ws_writes(monkeypatch, ws_root, name, err)
    msg = await error(write_file, ctx, path="precious.txt", content="new content\n" * 100)
    assert msg == (f"Could not write 'precious.txt': {os.strerror(err)}; the file was left as it was. Check that "
                   "the path is a writable file.")
    msg = await error(edit_file, ctx, path="precious.txt", old_string="one", new_string="ONE")
    assert msg.startswith(f"Could not write 'precious.txt': {os.strerror(err)}; the file was left as it was.")
    monkeypatch.undo()
    assert data(precious) == b"line one\nline two\n"
    assert listing(ws_root) == ["precious.txt"]  # no temporary file left behind


def test_file_size_limit_leaves_the_old_file(ws_root: Path, precious: Path, fs_mode: str) -> None:
    script = textwrap.dedent(f"""
        import asyncio, resource, signal, sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from fsmodes import set_mode
        import pytest
        from subagents.models.base import AgentInfo
        from subagents.tools.base import ToolContext
        from subagents.tools.files import write_file
        from subagents.tools.paths import Workspace
        mp = pytest.MonkeyPatch()
        set_mode(mp, {fs_mode!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        ctx = ToolContext(agent=AgentInfo("a", "a", "t"), workspace=Workspace({str(ws_root)!r}))
        try:
            asyncio.run(write_file.call({{"path": "precious.txt", "content": "x" * 100_000}}, ctx))
        except Exception as e:
            print(e)
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert p.stdout.strip() == ("Could not write 'precious.txt': File too large; the file was left as it was. "
                                "Check that the path is a writable file."), p.stderr
    assert data(precious) == b"line one\nline two\n"
    assert listing(ws_root) == ["precious.txt"]


async def test_lone_surrogates_are_refused_before_touching_the_file(ctx: ToolContext, ws_root: Path,
                                                                     precious: Path) -> None:
    assert await error(write_file, ctx, path="precious.txt", content="ok \ud800 bad") == (
        "content cannot be written as UTF-8: it contains '\\ud800' at index 3, a lone surrogate (half of a UTF-16 "
        "pair, not a character), so 'precious.txt' was not changed. Pass valid Unicode text.")
    assert await error(edit_file, ctx, path="precious.txt", old_string="one", new_string="\udcff") == (
        "new_string cannot be written as UTF-8: it contains '\\udcff' at index 0, a lone surrogate (half of a UTF-16 "
        "pair, not a character), so 'precious.txt' was not changed. Pass valid Unicode text.")
    assert await error(write_file, ctx, path="brand-new.txt", content="\udfff") == (
        "content cannot be written as UTF-8: it contains '\\udfff' at index 0, a lone surrogate (half of a UTF-16 "
        "pair, not a character), so 'brand-new.txt' was not changed. Pass valid Unicode text.")
    assert data(precious) == b"line one\nline two\n"
    assert listing(ws_root) == ["precious.txt"]


async def test_edit_keeps_bytes_that_are_not_utf8(ctx: ToolContext, ws_root: Path) -> None:
    p = ws_root / "latin1.txt"
    p.write_bytes(b"caf\xe9 old \xff\xfe\n")
    await call(edit_file, ctx, path="latin1.txt", old_string="old", new_string="new \u00e9")
    assert p.read_bytes() == b"caf\xe9 new \xc3\xa9 \xff\xfe\n"


async def test_mode_and_owner_are_kept(ctx: ToolContext, ws_root: Path) -> None:
    p = ws_root / "run.sh"
    p.write_text("echo one\n")
    p.chmod(0o751)
    if os.geteuid() == 0:  # root can give the file away: the replacement must get the same owner
        os.chown(p, 4321, 4322)
    before = p.stat()
    await call(edit_file, ctx, path="run.sh", old_string="one", new_string="two")
    assert p.stat().st_ino != before.st_ino  # replaced by a new file, not written in place
    await call(write_file, ctx, path="run.sh", content="echo three\n")
    after = p.stat()
    assert p.read_text() == "echo three\n"
    assert (stat.S_IMODE(after.st_mode), after.st_uid, after.st_gid) == (0o751, before.st_uid, before.st_gid)


async def test_new_files_follow_the_umask(ctx: ToolContext, ws_root: Path) -> None:
    old = os.umask(0o027)
    try:
        await call(write_file, ctx, path="n/new.txt", content="x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((ws_root / "n" / "new.txt").stat().st_mode) == 0o640


async def test_edit_refuses_a_file_replaced_meanwhile(ctx: ToolContext, ws_root: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    p = ws_root / "e.txt"
    p.write_text("alpha\n")
    ws = ctx.workspace
    real_open = ws.open_file

    def open_then_replace(raw: str) -> tuple[int, str, os.stat_result]:
        opened = real_open(raw)
        (ws_root / "other.txt").write_text("beta alpha\n")
        os.replace(ws_root / "other.txt", p)
        return opened

    monkeypatch.setattr(Workspace, "open_file", lambda self, raw: open_then_replace(raw))
    assert await error(edit_file, ctx, path="e.txt", old_string="alpha", new_string="gamma") == (
        "'e.txt' was replaced by another file while it was being edited, so the edit was not written; read it "
        "again and retry.")
    assert p.read_text() == "beta alpha\n"


# --- walking ------------------------------------------------------------------------------------


async def test_glob_over_symlink_loops(ctx: ToolContext, ws_root: Path) -> None:
    (ws_root / "src").mkdir()
    (ws_root / "src" / "a.py").write_text("x\n")
    (ws_root / "src" / "self").symlink_to("self")
    (ws_root / "ping").symlink_to("pong")
    (ws_root / "pong").symlink_to("ping")
    (ws_root / "src" / "up").symlink_to("..")  # a directory cycle: listed, never entered
    assert await call(glob, ctx, pattern="**/*") == (
        "src/\nsrc/a.py\nsrc/up/\n"
        "[skipped 3 symlink loop(s), links that never reach a file: ping, pong, src/self]")
    assert await call(glob, ctx, pattern="**/*.py") == "src/a.py"
    assert await call(glob, ctx, pattern="src/s*") == (
        "No paths match 'src/s*' in ..\n[skipped 1 symlink loop(s), links that never reach a file: src/self]")
    assert await call(grep, ctx, pattern="x") == "src/a.py:1: x"
    assert await call(list_dir, ctx, path="src") == "a.py\nself\nup/"
    assert await error(read_file, ctx, path="src/self") == (
        "'src/self' leads into a symlink loop (too many levels of symbolic links); fix or remove the link, or use "
        "the path it should point to.")


async def test_walks_do_not_follow_or_list_links_out(ctx: ToolContext, ws_root: Path, outside: Path) -> None:
    (outside / "deep").mkdir()
    (outside / "deep" / "x.txt").write_text("MARK deep\n")
    (ws_root / "out").symlink_to(outside)
    (ws_root / "out_file.txt").symlink_to(outside / "secret.txt")
    (ws_root / "in.txt").write_text("MARK in\n")
    assert await call(glob, ctx, pattern="**/*") == "in.txt"
    assert await call(grep, ctx, pattern="MARK") == "in.txt:1: MARK in"
    assert await call(list_dir, ctx) == "in.txt\nout\nout_file.txt"  # names only: nothing outside is opened
