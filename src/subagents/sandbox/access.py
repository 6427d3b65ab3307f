"""Race-free file access for a :class:`~subagents.sandbox.workspace.Workspace`: what the file tools call.

Every function resolves and opens in one step beneath the root's descriptor (:mod:`.fs`) and then
checks the object actually opened against the workspace's rules:

- reading: the opened file's real path must not be hidden, and a file with more than one hard link
  must not be one of the hidden files (compared by ``(st_dev, st_ino)``, so a hard link to the run
  store is refused too); FIFOs, sockets and devices are refused before anything is opened for reading;
- writing: the real path of the directory the file goes into, plus the name, must be neither
  protected nor hidden (directories created on the way are checked before each ``mkdirat``); a file
  with several hard links, or on another device than the root, is refused unless the policy allows
  it; the write itself is atomic (:mod:`.atomic`).

Refusals are :class:`~subagents.exceptions.ToolError` with a sentence for the model; "not found",
"is a directory" and "not a directory" stay ``OSError`` so each tool can phrase them its own way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..exceptions import ToolError
from . import fs, tree
from .atomic import replace_file
from .fs import EscapeError, Opened

if TYPE_CHECKING:
    from .policy import SandboxPolicy


class Workspace(Protocol):
    """What these functions use of :class:`~subagents.sandbox.workspace.Workspace` (which imports this
    module: naming the class here would be an import cycle)."""

    root: Path
    policy: SandboxPolicy
    hidden: tuple[Path, ...]
    protected: tuple[Path, ...]

    def is_hidden(self, real: Path | str) -> bool: ...

    def check_write(self, real: Path | str, raw: str) -> None: ...

    def check_read(self, real: Path | str, raw: str) -> None: ...

    def anchor(self) -> int: ...

    @property
    def root_device(self) -> int: ...

    def relative(self, p: Path) -> str: ...

__all__ = ["Opened", "kind_of", "lookup", "open_dir", "open_file", "open_root", "walk", "write_atomic"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink"))


def kind_of(mode: int) -> str:
    """'a directory', 'a FIFO (named pipe)', ... for an ``st_mode`` that is not a regular file's."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_root(root: Path, expect: tuple[int, int]) -> int:
    """Open the workspace root (no symlink at its last component) and check it is still the same directory."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != expect:
        os.close(fd)
        raise ToolError(f"The workspace root {root} was replaced by another directory since the run started; "
                        "no file tool can be used until the run is restarted.")
    return fd


def relpath(ws: Workspace, raw: str) -> str:
    """``raw`` as a normalized path relative to the root ('' for the root), or the "outside" :class:`ToolError`.

    This is lexical (plus ``realpath`` for absolute paths that are not literally under the root, such
    as ``/proc/self/root/...``): it only decides which relative path to resolve beneath the root's
    descriptor, never whether something may be opened.
    """
    if "\x00" in raw:
        raise ToolError(f"path {raw!r} contains a NUL byte")
    root = str(ws.root)
    rel = fs.beneath(os.path.normpath(os.path.join(root, raw)), root)
    if rel is None and os.path.isabs(raw):
        with contextlib.suppress(OSError):  # realpath can fail while the tree changes: then it is outside
            rel = fs.beneath(os.path.realpath(raw), root)
    if rel is None:
        raise outside(ws, raw)
    return rel


def outside(ws: Workspace, raw: str) -> ToolError:
    """The error for a path that leads outside the workspace (with where it leads, when that is known)."""
    try:  # where it leads, for the message only (the tree may be changing under our feet)
        real: str | None = os.path.realpath(os.path.join(ws.root, raw))
    except OSError:
        real = None
    if real is None or fs.beneath(real, str(ws.root)) is not None:  # a symlink on the way changed meanwhile
        return ToolError(f"path {raw!r} leads outside the workspace {ws.root} through a symlink; "
                         "use a path inside the workspace")
    return ToolError(f"path {raw!r} resolves to {real}, outside the workspace {ws.root}; "
                     "use a path inside the workspace")


def display(ws: Workspace, real: str) -> str:
    """A real path for display: relative to the root ('.' for the root itself)."""
    rel = fs.beneath(real, str(ws.root))
    return real if rel is None else (rel or ".")


_real_cache: dict[int, tuple[tuple[Path, ...], tuple[tuple[str, Path], ...]]] = {}


def _also_real(paths: tuple[Path, ...]) -> tuple[tuple[str, Path], ...]:
    """``(real path, configured path)`` for the configured paths with a symlink on the way (``.git`` -> ``gitdir``,
    ``~/.ssh`` -> ``~/dotfiles/ssh``): what is opened is checked against both names.  Cached per tuple."""
    hit = _real_cache.get(id(paths))
    if hit is None or hit[0] is not paths:
        pairs = tuple((r, p) for p in paths if (r := os.path.realpath(p)) != str(p))
        if len(_real_cache) > 64:
            _real_cache.clear()
        hit = _real_cache[id(paths)] = (paths, pairs)
    return hit[1]


def _real_hit(real: str, paths: tuple[Path, ...]) -> Path | None:
    for r, p in _also_real(paths):
        if real == r or real.startswith(r + "/"):
            return p
    return None


def check_read(ws: Workspace, real: str, raw: str) -> None:
    """:meth:`Workspace.check_read` on a real path, also under the real names of the hidden paths."""
    ws.check_read(real, raw)
    hit = _real_hit(real, ws.hidden)
    if hit is not None:
        ws.check_read(hit, raw)  # raises, naming the path as configured


def check_write(ws: Workspace, real: str, raw: str) -> None:
    """:meth:`Workspace.check_write` on a real path, also under the real names of protected and hidden paths."""
    ws.check_write(real, raw)
    for paths in (ws.protected, ws.hidden):
        hit = _real_hit(real, paths)
        if hit is not None:
            ws.check_write(hit, raw)  # raises, naming the path as configured


INODE_CACHE_S = 2.0
"""How long the inodes of the files inside hidden directories are reused before they are listed again."""
INODE_LIMIT = 20_000
"""Files listed inside hidden directories at most; beyond that, multiply-linked files are refused unread."""

_inode_cache: dict[int, tuple[tuple[Path, ...], float, dict[tuple[int, int], str], bool]] = {}


def _inodes_in_hidden_dirs(hidden: tuple[Path, ...]) -> tuple[dict[tuple[int, int], str], bool]:
    """``({(st_dev, st_ino): path}, complete)`` of the regular files inside the hidden directories.

    Listed again after :data:`INODE_CACHE_S`: the agent cannot create files there (the file tools
    refuse, the shell sandbox hides them), and a new hard link to an old file has the old inode.
    """
    now = time.monotonic()
    hit = _inode_cache.get(id(hidden))
    if hit is not None and hit[0] is hidden and now - hit[1] < INODE_CACHE_S:
        return hit[2], hit[3]
    found: dict[tuple[int, int], str] = {}
    complete = True
    for top in hidden:
        for here, _, names in os.walk(top):  # does not follow symlinks to directories below top
            for name in names:
                path = os.path.join(here, name)
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    if stat.S_ISREG(st.st_mode):
                        found[(st.st_dev, st.st_ino)] = path
            if len(found) > INODE_LIMIT:
                complete = False
                break
    if len(_inode_cache) > 64:
        _inode_cache.clear()
    _inode_cache[id(hidden)] = (hidden, now, found, complete)
    return found, complete


def _hard_link_refusal(ws: Workspace, raw: str, to: str | Path) -> ToolError:
    return ToolError(f"{raw!r} is a hard link to {ws.relative(Path(to))}, which is hidden from agents (it holds the "
                     "run store or credentials, or is listed in [sandbox] deny_read); it cannot be read or written "
                     "by any tool.")


def check_inode(ws: Workspace, st: os.stat_result, raw: str) -> None:
    """Refuse a file that is another name (a hard link) for a hidden file, or for a file in a hidden directory."""
    if st.st_nlink < 2 or not stat.S_ISREG(st.st_mode):
        return  # a single name: its path was checked already
    key = (st.st_dev, st.st_ino)
    for hidden in ws.hidden:  # the hidden files themselves: always looked at afresh (the store's -wal comes and goes)
        try:
            h = os.stat(hidden)
        except OSError:
            continue
        if (h.st_dev, h.st_ino) == key:
            raise _hard_link_refusal(ws, raw, hidden)
    found, complete = _inodes_in_hidden_dirs(ws.hidden)
    if key in found:
        raise _hard_link_refusal(ws, raw, found[key])
    if not complete:
        raise ToolError(f"{raw!r} has {st.st_nlink} hard links, and the hidden directories hold too many files to "
                        "check that it is not one of them, so it was not read. Read a copy of the file instead.")


def lookup(ws: Workspace, raw: str) -> Opened:
    """Open what ``raw`` names beneath the root (``O_PATH``), refusing escapes and hidden objects."""
    rel = relpath(ws, raw)
    try:
        o = fs.lookup(ws.anchor(), str(ws.root), rel)
    except EscapeError:
        raise outside(ws, raw) from None
    except NotADirectoryError:  # a file where a directory was expected on the way: nothing by that name
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), raw) from None
    try:
        check_read(ws, o.real, raw)
        check_inode(ws, o.st, raw)
    except BaseException:
        o.close()
        raise
    return o


def _refuse_non_regular(st: os.stat_result, raw: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), raw)
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{raw!r} is {kind_of(st.st_mode)}, not a regular file, so it was not opened; the file "
                        "tools read and write regular files only.")


def open_file(ws: Workspace, raw: str) -> tuple[int, str, os.stat_result]:
    """``(read-only descriptor, display path, fstat)`` of the regular file ``raw`` names.

    Raises ``FileNotFoundError``, ``IsADirectoryError``, ``NotADirectoryError`` or :class:`ToolError`.
    """
    o = lookup(ws, raw)
    try:
        _refuse_non_regular(o.st, raw)
        return fs.reopen_file(o), display(ws, o.real), o.st
    finally:
        o.close()


def open_dir(ws: Workspace, raw: str) -> tuple[int, str]:
    """``(read-only descriptor, display path)`` of the directory ``raw`` names (``NotADirectoryError`` if not one)."""
    o = lookup(ws, raw)
    try:
        if not stat.S_ISDIR(o.st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), raw)
        return fs.reopen_dir(o), display(ws, o.real)
    finally:
        o.close()


def follower(ws: Workspace, prefix: str) -> Callable[[str], str]:
    """For :func:`tree.walk`: what the symlink at ``prefix + path`` (relative to the root) leads to."""

    def follow(path: str) -> str:
        try:
            o = fs.lookup(ws.anchor(), str(ws.root), prefix + path)
        except EscapeError:
            return tree.OUTSIDE
        except (FileNotFoundError, NotADirectoryError):
            return tree.MISSING
        except OSError as e:
            return tree.LOOP if e.errno == errno.ELOOP else tree.MISSING
        try:
            if ws.is_hidden(o.real) or _real_hit(o.real, ws.hidden) is not None:
                return tree.HIDDEN
            mode = o.st.st_mode
            return tree.DIR if stat.S_ISDIR(mode) else tree.FILE if stat.S_ISREG(mode) else tree.OTHER
        finally:
            o.close()

    return follow


def walk(ws: Workspace, dirfd: int, display_path: str, *, skip: frozenset[str] = frozenset(),
         recurse: bool = True, links_out: bool = False) -> Iterator[tuple[str, str]]:
    """:func:`tree.walk` over the directory ``dirfd`` (shown as ``display_path``), without hidden entries."""
    prefix = "" if display_path == "." else display_path + "/"
    root = str(ws.root)
    names = [str(h) for h in ws.hidden] + [r for r, _ in _also_real(ws.hidden)]
    hidden = tuple(r for h in names if (r := fs.beneath(h, root)))  # hidden paths inside the root
    inner = tuple(h[len(prefix):] for h in hidden if h.startswith(prefix))

    def is_hidden(path: str) -> bool:
        return any(path == h or path.startswith(h + "/") for h in inner)

    return tree.walk(dirfd, hidden=is_hidden, follow=follower(ws, prefix), skip=skip, recurse=recurse,
                     links_out=links_out)


def _make_dir_check(ws: Workspace, raw: str) -> Callable[[str], None]:
    return lambda real: check_write(ws, real, raw)


def _check_target(ws: Workspace, place: fs.Place, raw: str, expect: tuple[int, int] | None) -> None:
    """The policy on the file being replaced and the directory it is in."""
    st = place.st
    if st is not None:
        _refuse_non_regular(st, raw)
        if expect is not None and (st.st_dev, st.st_ino) != expect:
            raise ToolError(f"{raw!r} was replaced by another file while it was being edited, so the edit was "
                            "not written; read it again and retry.")
        if st.st_nlink > 1 and not ws.policy.allow_hardlinks:
            raise ToolError(
                f"{raw!r} has {st.st_nlink} hard links (other names for the same file, possibly outside the "
                "workspace), so it was not written: the file tools do not change files that other paths share. "
                "To allow it, set `allow_hardlinks = true` under [sandbox] in the config (the write then "
                "replaces this name only; the other names keep the old content).")
    device = st.st_dev if st is not None else os.fstat(place.dirfd).st_dev  # a new file: its directory's
    if device != ws.root_device and not ws.policy.allow_other_devices:
        raise ToolError(
            f"{raw!r} is on another device than the workspace root (a mount inside the workspace), so it was "
            "not written. To allow writes to other devices inside the workspace, set "
            "`allow_other_devices = true` under [sandbox] in the config.")


def write_atomic(ws: Workspace, raw: str, data: bytes, *, expect: tuple[int, int] | None = None
                 ) -> tuple[str, bool]:
    """Create or replace the regular file ``raw`` names with ``data``, atomically; ``(display path, existed)``.

    Missing parent directories are created.  ``expect``: the ``(st_dev, st_ino)`` the file must still
    have (``edit_file`` passes what it read).  Raises ``IsADirectoryError``, ``NotADirectoryError``,
    other ``OSError`` (the old file is then untouched) or :class:`ToolError`.
    """
    rel = relpath(ws, raw)
    ws.check_write(os.path.join(ws.root, rel), raw)  # early, lexical: refuse before creating any directory
    try:
        place = fs.locate(ws.anchor(), str(ws.root), rel, mkdir=_make_dir_check(ws, raw))
    except EscapeError:
        raise outside(ws, raw) from None
    try:
        if not place.name:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), raw)
        check_write(ws, place.real, raw)
        _check_target(ws, place, raw, expect)
        replace_file(place.dirfd, place.name, data, place.st)
        return display(ws, place.real), place.st is not None
    finally:
        os.close(place.dirfd)
