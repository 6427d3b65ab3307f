"""The fs layer: resolving beneath a directory descriptor, in every mode (openat2, walk, portable walk)."""

from __future__ import annotations

import errno
import os
import platform
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fsmodes
from subagents.sandbox import fs
from subagents.sandbox import tree as walk_tree
from subagents.sandbox.atomic import replace_file

pytestmark = pytest.mark.usefixtures("fs_mode")


@pytest.fixture(params=fsmodes.MODES)
def fs_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once per path-resolution mode of :mod:`subagents.sandbox.fs`."""
    fsmodes.set_mode(monkeypatch, request.param)
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The anchor directory; ``tmp_path / "out"`` is outside it."""
    r = tmp_path / "ws"
    r.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "secret.txt").write_text("outside secret\n")
    return r.resolve()


@pytest.fixture
def anchor(root: Path) -> Iterator[int]:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    yield fd
    os.close(fd)


def look(anchor: int, root: Path, rel: str) -> tuple[str, int]:
    """``(real path, st_mode)`` of what ``rel`` names; the descriptor is closed."""
    o = fs.lookup(anchor, str(root), rel)
    try:
        return o.real, o.st.st_mode
    finally:
        o.close()


def read(anchor: int, root: Path, rel: str) -> str:
    o = fs.lookup(anchor, str(root), rel)
    try:
        fd = fs.reopen_file(o)
    finally:
        o.close()
    with open(fd, encoding="utf-8") as f:
        return f.read()


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("a\n")
    (root / "sub" / "deep" / "b.txt").write_text("b\n")
    (root / "rel").symlink_to("sub/a.txt")
    (root / "abs").symlink_to(root / "sub" / "a.txt")  # absolute, but inside: must keep working
    (root / "sub" / "up").symlink_to("../sub/deep")
    (root / "dirlink").symlink_to("sub")
    return root


# --- what is found ------------------------------------------------------------------------------


def test_plain_paths(anchor: int, tree: Path) -> None:
    assert look(anchor, tree, "sub/a.txt") == (str(tree / "sub/a.txt"), look(anchor, tree, "sub/a.txt")[1])
    assert stat.S_ISREG(look(anchor, tree, "sub/a.txt")[1])
    real, mode = look(anchor, tree, "")
    assert (real, stat.S_ISDIR(mode)) == (str(tree), True)
    assert look(anchor, tree, "sub/deep/../a.txt")[0] == str(tree / "sub/a.txt")
    assert read(anchor, tree, "sub/deep/b.txt") == "b\n"


def test_symlinks_inside_are_followed(anchor: int, tree: Path) -> None:
    assert look(anchor, tree, "rel")[0] == str(tree / "sub/a.txt")
    assert look(anchor, tree, "abs")[0] == str(tree / "sub/a.txt")
    assert look(anchor, tree, "dirlink/deep/b.txt")[0] == str(tree / "sub/deep/b.txt")
    assert look(anchor, tree, "sub/up/b.txt")[0] == str(tree / "sub/deep/b.txt")
    assert look(anchor, tree, "dirlink/up/../a.txt")[0] == str(tree / "sub/a.txt")  # '..' is physical
    assert read(anchor, tree, "abs") == "a\n"


@pytest.mark.parametrize("target", ["../../out/secret.txt", "../sub/../../out/secret.txt", "{out}/secret.txt",
                                    "/proc/self/root{out}/secret.txt", "/proc/self/cwd", "/", "/etc/passwd",
                                    "../..", "{root}/../out/secret.txt"])
def test_symlinks_out_are_refused(anchor: int, root: Path, target: str) -> None:
    (root / "sub").mkdir()  # the link is in sub/: relative targets start from there
    (root / "sub" / "link").symlink_to(target.format(out=root.parent / "out", root=root))
    with pytest.raises(fs.EscapeError) as info:
        look(anchor, root, "sub/link")
    assert info.value.errno == errno.EXDEV
    with pytest.raises(fs.EscapeError):
        look(anchor, root, "sub/link/secret.txt")


def test_dotdot_above_the_root_is_refused(anchor: int, root: Path) -> None:
    with pytest.raises(fs.EscapeError):
        look(anchor, root, "../out/secret.txt")
    (root / "d").mkdir()
    with pytest.raises(fs.EscapeError):
        look(anchor, root, "d/../../out/secret.txt")


def test_chain_that_leaves_at_the_end_is_refused(anchor: int, root: Path) -> None:
    (root / "one").symlink_to("two")
    (root / "two").symlink_to(root / "three")
    (root / "three").symlink_to("../out")
    with pytest.raises(fs.EscapeError):
        look(anchor, root, "one/secret.txt")


def test_missing_and_not_a_directory(anchor: int, tree: Path) -> None:
    with pytest.raises(FileNotFoundError):
        look(anchor, tree, "nope.txt")
    with pytest.raises(FileNotFoundError):
        look(anchor, tree, "nope/x.txt")
    with pytest.raises(NotADirectoryError):
        look(anchor, tree, "sub/a.txt/x")
    (tree / "dangling").symlink_to("sub/none.txt")
    with pytest.raises(FileNotFoundError):
        look(anchor, tree, "dangling")


def test_symlink_loops_and_the_link_limit(anchor: int, root: Path) -> None:
    (root / "self").symlink_to("self")
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    for rel in ("self", "a", "a/x"):
        with pytest.raises(OSError, match="Too many levels of symbolic links") as info:
            look(anchor, root, rel)
        assert info.value.errno == errno.ELOOP
    (root / "f").write_text("end\n")
    for i in range(60):
        (root / f"l{i}").symlink_to(f"l{i + 1}" if i < 59 else "f")
    assert read(anchor, root, f"l{60 - 35}") == "end\n"  # 35 links: under the limit of 40
    with pytest.raises(OSError, match="Too many levels of symbolic links") as info:
        look(anchor, root, "l0")  # 60 links
    assert info.value.errno == errno.ELOOP


def test_fifo_is_found_without_being_opened(anchor: int, root: Path) -> None:
    os.mkfifo(root / "pipe")
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(look(anchor, root, "pipe")[1]), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "lookup of a FIFO blocked"
    assert stat.S_ISFIFO(result[0])


def test_reopen_dir_lists(anchor: int, tree: Path) -> None:
    o = fs.lookup(anchor, str(tree), "dirlink")
    try:
        fd = fs.reopen_dir(o)
    finally:
        o.close()
    try:
        assert sorted(os.listdir(fd)) == ["a.txt", "deep", "up"]
    finally:
        os.close(fd)


# --- locate: where a file is written ------------------------------------------------------------


def place(anchor: int, root: Path, rel: str, made: list[str] | None = None) -> tuple[str, str, bool]:
    p = fs.locate(anchor, str(root), rel, mkdir=None if made is None else made.append)
    os.close(p.dirfd)
    return p.dir_real, p.name, p.st is not None


def test_locate_new_and_existing(anchor: int, tree: Path) -> None:
    assert place(anchor, tree, "new.txt") == (str(tree), "new.txt", False)
    assert place(anchor, tree, "sub/a.txt") == (str(tree / "sub"), "a.txt", True)
    assert place(anchor, tree, "abs") == (str(tree / "sub"), "a.txt", True)  # the last symlink is followed
    (tree / "dangling").symlink_to("sub/deep/later.txt")
    assert place(anchor, tree, "dangling") == (str(tree / "sub/deep"), "later.txt", False)
    assert place(anchor, tree, "sub/..") == (str(tree), "", False)


def test_locate_creates_missing_directories_after_asking(anchor: int, tree: Path) -> None:
    with pytest.raises(FileNotFoundError):
        place(anchor, tree, "x/y/z.txt")
    assert not (tree / "x").exists()
    made: list[str] = []
    assert place(anchor, tree, "dirlink/x/y/z.txt", made) == (str(tree / "sub/x/y"), "z.txt", False)
    assert made == [str(tree / "sub/x"), str(tree / "sub/x/y")]
    assert (tree / "sub/x/y").is_dir()

    def refuse(real: str) -> None:
        raise PermissionError(real)

    with pytest.raises(PermissionError):
        fs.locate(anchor, str(tree), "no/such/dir/f.txt", mkdir=refuse)
    assert not (tree / "no").exists()


def test_locate_refuses_escapes(anchor: int, root: Path) -> None:
    (root / "trap").symlink_to(root.parent / "not-yet.txt")
    (root / "trapdir").symlink_to("../newdir")
    made: list[str] = []
    with pytest.raises(fs.EscapeError):
        place(anchor, root, "trap", made)
    with pytest.raises(fs.EscapeError):
        place(anchor, root, "trapdir/f.txt", made)
    assert made == []
    assert not (root.parent / "not-yet.txt").exists()
    assert not (root.parent / "newdir").exists()


# --- races ----------------------------------------------------------------------------------------


@pytest.fixture
def swapper(root: Path) -> Iterator[None]:
    """A thread that keeps exchanging ``root/d`` (a real directory) and ``root/link`` (a symlink to ``../out``)."""
    (root / "d").mkdir()
    (root / "d" / "secret.txt").write_text("inside\n")
    (root / "link").symlink_to(root.parent / "out")
    with fsmodes.swapping(root / "d", root / "link"):
        yield


@pytest.mark.usefixtures("swapper")
def test_no_escape_while_a_symlink_is_swapped(anchor: int, root: Path) -> None:
    inside = refused = 0
    for _ in range(2000):
        try:
            real, _ = look(anchor, root, "d/secret.txt")
        except fs.EscapeError:
            refused += 1
            continue
        assert real in (str(root / "d" / "secret.txt"), str(root / "link" / "secret.txt"))  # the dir moves
        inside += 1
    assert inside + refused > 0


def test_openat2_binding() -> None:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        with pytest.raises(OSError, match="openat2 is not available") as info:
            fs.openat2(-100, ".", os.O_RDONLY)
        assert info.value.errno == errno.ENOSYS
        return
    fd = fs.openat2(-100, "/", os.O_RDONLY | os.O_DIRECTORY, resolve=0)
    os.close(fd)
    with pytest.raises(OSError, match="cross-device link") as info:
        fs.openat2(-100, "/etc", os.O_RDONLY | os.O_DIRECTORY)  # absolute + RESOLVE_BENEATH
    assert info.value.errno == errno.EXDEV


def test_beneath() -> None:
    assert fs.beneath("/a/b", "/a") == "b"
    assert fs.beneath("/a", "/a") == ""
    assert fs.beneath("/ab", "/a") is None
    assert fs.beneath("/x", "/") == "x"


# --- atomic replacement -------------------------------------------------------------------------


def entries(d: Path) -> list[str]:
    return sorted(os.listdir(d))


def test_replace_file_new_and_existing(anchor: int, root: Path) -> None:
    replace_file(anchor, "new.txt", b"fresh\n", None)
    assert (root / "new.txt").read_bytes() == b"fresh\n"
    p = root / "old.txt"
    p.write_bytes(b"old\n")
    p.chmod(0o640)
    like = os.lstat(p)
    replace_file(anchor, "old.txt", b"new\n", like)
    assert p.read_bytes() == b"new\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert entries(root) == ["new.txt", "old.txt"]


@pytest.mark.parametrize("failing", ["write", "fsync", "rename"])
def test_replace_file_failure_keeps_the_old_file(anchor: int, root: Path, monkeypatch: pytest.MonkeyPatch,
                                                 failing: str) -> None:
    p = root / "keep.txt"
    p.write_bytes(b"precious\n")

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(OSError, match="No space left on device"):
        replace_file(anchor, "keep.txt", b"x" * 10_000, os.lstat(p))
    monkeypatch.undo()
    assert p.read_bytes() == b"precious\n"
    assert entries(root) == ["keep.txt"]


def test_replace_file_replaces_a_swapped_in_symlink_not_its_target(anchor: int, root: Path) -> None:
    (root / "f").symlink_to(root.parent / "out" / "secret.txt")
    replace_file(anchor, "f", b"mine\n", None)  # as if the name became a symlink after the checks
    assert not (root / "f").is_symlink()
    assert (root / "f").read_bytes() == b"mine\n"
    assert (root.parent / "out" / "secret.txt").read_text() == "outside secret\n"


# --- walking --------------------------------------------------------------------------------------


def walked(anchor: int, root: Path, **kwargs: Any) -> list[tuple[str, str]]:
    """``walk_tree.walk`` over ``root`` with a follow() built on :func:`fs.lookup` (kinds are plain strings)."""

    def follow(path: str) -> str:
        try:
            real, mode = look(anchor, root, path)
        except fs.EscapeError:
            return walk_tree.OUTSIDE
        except OSError as e:
            return walk_tree.LOOP if e.errno == errno.ELOOP else walk_tree.MISSING
        return "hidden" if real.endswith("hidden.txt") else "dir" if stat.S_ISDIR(mode) else "file"

    return list(walk_tree.walk(anchor, hidden=lambda p: p.endswith("secret.db"), follow=follow, **kwargs))


@pytest.fixture
def walk_root(root: Path) -> Path:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("")
    (root / "sub" / "secret.db").write_text("")  # hidden: neither listed nor entered
    (root / "sub" / "up").symlink_to("..")  # a cycle: listed, never entered
    (root / "a.txt").write_text("")
    (root / "hidden.txt").write_text("")
    (root / "abs").symlink_to(root / "a.txt")
    (root / "to_hidden").symlink_to("hidden.txt")
    (root / "dirlink").symlink_to("sub")
    (root / "out").symlink_to("../out")
    (root / "loop").symlink_to("loop")
    (root / "dangling").symlink_to("sub/nothing")
    os.mkfifo(root / "fifo")
    return root


def test_walk_by_descriptors(anchor: int, walk_root: Path) -> None:
    assert walked(anchor, walk_root, skip=frozenset({".git"})) == [
        ("a.txt", "file"), ("abs", "file"), ("dangling", "missing"), ("dirlink", "dir"), ("fifo", "other"),
        ("hidden.txt", "file"), ("loop", "loop"), ("sub", "dir"), ("sub/b.txt", "file"), ("sub/up", "dir"),
    ]
    assert walked(anchor, walk_root, recurse=False, links_out=True) == [
        (".git", "dir"), ("a.txt", "file"), ("abs", "file"), ("dangling", "missing"), ("dirlink", "dir"),
        ("fifo", "other"), ("hidden.txt", "file"), ("loop", "loop"), ("out", "outside"), ("sub", "dir"),
    ]


def test_walk_does_not_enter_a_directory_swapped_for_a_symlink(anchor: int, root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "in.txt").write_text("")
    (root / "link").symlink_to(root.parent / "out")
    seen: set[str] = set()
    with fsmodes.swapping(root / "d", root / "link"):
        for _ in range(300):
            seen.update(p for p, _ in walked(anchor, root))
    assert "d/secret.txt" not in seen
    assert "link/secret.txt" not in seen
    assert seen <= {"d", "link", "d/in.txt", "link/in.txt"}


def test_a_deep_tree_is_walked_whole_with_few_descriptors(tmp_path: Path) -> None:
    # One descriptor per level: a tree 400 deep under a limit of 256 open files lost its deepest entries (EMFILE,
    # skipped silently) and every other open of the process failed meanwhile.  Levels above MAX_OPEN are closed
    # and opened again on the way back.
    deep = tmp_path
    for i in range(400):
        deep = deep / f"d{i % 7}"
        deep.mkdir()
        (deep / "f.txt").write_text("")
    (tmp_path / "d0" / "zz").mkdir()  # entered only after the walk climbed back up to a level it had closed
    (tmp_path / "d0" / "zz" / "last.txt").write_text("")
    anchor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fds: list[int] = []
    try:
        seen = []
        for path, kind in walk_tree.walk(anchor, hidden=lambda p: False, follow=lambda p: walk_tree.MISSING):
            seen.append((path, kind))
            if len(seen) % 50 == 0:
                fds.append(len(os.listdir("/proc/self/fd")))
    finally:
        os.close(anchor)
    files = [p for p, k in seen if k == walk_tree.FILE]
    assert len(files) == 401
    assert files[-1] == "d0/zz/last.txt"
    assert max(p.count("/") for p in files) == 400
    assert max(fds) - min(fds) <= 66  # (MAX_OPEN + 2)
