"""Race-free paths beneath a directory descriptor: the low level of the file tools.

An agent names paths, and the agent (or a command it runs) may change the tree while a tool works,
e.g. swap a directory for a symlink to ``/``.  So a path is never checked and then opened: it is
resolved *and* opened in one step, relative to the workspace root's directory descriptor (the
*anchor*), and what was actually opened is what gets checked.

- :func:`lookup` opens what a relative path names, following symlinks only while they stay beneath
  the anchor.  With ``openat2(2)`` and ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`` (Linux 5.6+) that
  is one system call; without it — and for an absolute symlink pointing back inside, which
  ``RESOLVE_BENEATH`` refuses — a component-by-component walk (:func:`locate`) opens each directory
  with ``O_NOFOLLOW`` at the previous one's descriptor and follows symlinks itself (at most
  :data:`MAX_SYMLINKS`).  The result is an ``O_PATH`` descriptor: nothing is opened for reading yet,
  so a FIFO or a device is inspected (``fstat``) without a side effect or a hang.
- :func:`reopen_file` / :func:`reopen_dir` then open that very object for reading.
- :func:`locate` finds the directory a file is created or replaced in (creating missing directories
  with ``mkdirat`` when asked); :mod:`.atomic` writes there.

Errors are ``OSError``: :class:`EscapeError` (``EXDEV``) when a path or a symlink leads outside,
``FileNotFoundError``, ``NotADirectoryError``, ``ELOOP`` for symlink loops.  Tests force the walk by
setting ``_state.openat2 = False``.
"""

from __future__ import annotations

import errno
import os
import platform
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_SYMLINKS", "EscapeError", "Opened", "Place", "beneath", "locate", "lookup", "openat2",
           "openat2_enabled", "reopen_dir", "reopen_file"]

MAX_SYMLINKS = 40
"""Symlinks followed while resolving one path (Linux's own limit), then ``ELOOP``."""
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine()) if sys.platform == "linux" else None
_O_PATH: int = getattr(os, "O_PATH", 0)
_PROC_FD = "/proc/self/fd/"
_RETRIES = 8
_AT_FDCWD = -100


class EscapeError(OSError):
    """A path or a symlink on the way leads outside the anchor directory (``errno.EXDEV``)."""

    def __init__(self, what: str) -> None:
        super().__init__(errno.EXDEV, "leads outside the directory it must stay beneath", what)


@dataclass(slots=True)
class _State:
    """What this process can use; probed once.  ``openat2=False`` forces the walk (tests do)."""

    openat2: bool | None = None
    proc: bool | None = None


_state = _State()


_syscall: Any = None


def openat2(dirfd: int, path: str, flags: int, mode: int = 0,
            resolve: int = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) -> int:
    """The ``openat2(2)`` system call (``OSError`` on failure; ``ENOSYS`` where it does not exist)."""
    global _syscall
    if _SYS_OPENAT2 is None:
        raise OSError(errno.ENOSYS, "openat2 is not available on this platform", path)
    if _syscall is None:
        from ._openat2 import make_openat2  # ctypes loads with the first file tool call, not on import

        _syscall = make_openat2(_SYS_OPENAT2)
    return int(_syscall(dirfd, path, flags, mode, resolve))


def _proc() -> bool:
    if _state.proc is None:
        _state.proc = bool(_O_PATH) and os.path.isdir(_PROC_FD)
    return _state.proc


def openat2_enabled() -> bool:
    """Whether :func:`lookup` uses ``openat2`` (it exists, works, and ``/proc/self/fd`` is there)."""
    if _state.openat2 is None:
        try:
            os.close(openat2(_AT_FDCWD, ".", _O_PATH | os.O_CLOEXEC))
            _state.openat2 = _proc()
        except OSError:  # ENOSYS (old kernel), EPERM (seccomp), ...
            _state.openat2 = False
    return _state.openat2


def _probe_flags() -> int:
    """How an object is first opened: ``O_PATH``; without it (or /proc), a non-blocking read open."""
    return (_O_PATH if _proc() else os.O_RDONLY | os.O_NONBLOCK) | os.O_CLOEXEC


def beneath(real: str, root: str) -> str | None:
    """``real`` relative to ``root`` ('' for root itself) if it lies beneath it, else ``None``."""
    if real == root:
        return ""
    prefix = root if root.endswith("/") else root + "/"
    return real[len(prefix):] if real.startswith(prefix) else None


def _join(root: str, rel: str) -> str:
    return root if not rel else (root.rstrip("/") + "/" + rel)


def _fd_path(fd: int, root: str) -> str:
    """The real path of ``fd`` (from /proc); :class:`EscapeError` unless it lies beneath ``root``."""
    real = os.readlink(f"{_PROC_FD}{fd}")
    if beneath(real, root) is None:
        raise EscapeError(real)
    return real


@dataclass(slots=True)
class Opened:
    """An object found beneath the anchor: a descriptor (``O_PATH`` on Linux), its ``fstat``, its real path.

    Without ``O_PATH`` a FIFO, socket or device is not opened at all: ``fd`` is then -1.
    """

    fd: int
    st: os.stat_result
    real: str

    def close(self) -> None:
        """Close the descriptor."""
        if self.fd >= 0:
            os.close(self.fd)


@dataclass(slots=True)
class Place:
    """Where a path lands: the directory holding it (``dirfd``, the caller closes it), its real path,
    the last name (``''`` when the path names that directory itself) and the ``lstat`` of that name
    (``None`` if it does not exist).  The name is never a symlink: symlinks were followed."""

    dirfd: int
    dir_real: str
    name: str
    st: os.stat_result | None

    @property
    def real(self) -> str:
        """The real path of the named object (which may not exist yet)."""
        return _join(self.dir_real, self.name)


def _openat2(anchor: int, rel: str, flags: int) -> int | None:
    """``openat2`` beneath ``anchor``, or ``None`` when the walk must decide (``EXDEV``: maybe an
    absolute symlink that leads back inside; ``EAGAIN``: a rename raced with ``..``)."""
    for _ in range(3):
        try:
            return openat2(anchor, rel or ".", flags)
        except OSError as e:
            if e.errno == errno.EXDEV:
                return None
            if e.errno != errno.EAGAIN:
                raise
    return None


def lookup(anchor: int, root: str, rel: str) -> Opened:
    """Open what ``rel`` (relative, normalized) names beneath ``anchor``, whose real path is ``root``.

    Symlinks are followed while they stay beneath, the last one included; the descriptor is
    ``O_PATH`` (not readable: see :func:`reopen_file`).  Raises :class:`EscapeError`,
    ``FileNotFoundError``, ``NotADirectoryError`` or ``OSError(ELOOP)``.
    """
    flags = _probe_flags()
    if openat2_enabled():
        fd = _openat2(anchor, rel, flags)
        if fd is not None:
            try:
                return Opened(fd, os.fstat(fd), _fd_path(fd, root))
            except BaseException:
                os.close(fd)
                raise
    for _ in range(_RETRIES):
        place = locate(anchor, root, rel)
        st = place.st
        if not _O_PATH & flags and st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            os.close(place.dirfd)  # without O_PATH, a FIFO or a device is not opened at all
            return Opened(-1, st, place.real)
        try:
            fd = os.open(place.name or ".", flags | os.O_NOFOLLOW, dir_fd=place.dirfd)
        except OSError as e:
            if e.errno == errno.ELOOP:  # without O_PATH: it became a symlink after the walk; walk again
                continue
            raise
        finally:
            os.close(place.dirfd)
        st = os.fstat(fd)
        if not stat.S_ISLNK(st.st_mode):
            return Opened(fd, st, place.real)
        os.close(fd)  # a symlink was swapped in after the walk: walk again
    raise OSError(errno.ELOOP, "the path kept changing while it was resolved", rel)


def reopen_file(o: Opened) -> int:
    """A blocking read-only descriptor of the object ``o`` names (the same object: nothing is re-resolved)."""
    if _proc():
        return os.open(f"{_PROC_FD}{o.fd}", os.O_RDONLY | os.O_CLOEXEC)
    fd = os.dup(o.fd)  # the probe descriptor was a non-blocking read open already
    os.set_blocking(fd, True)
    return fd


def reopen_dir(o: Opened) -> int:
    """A read-only descriptor of the directory ``o`` names, for ``os.scandir``."""
    return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=o.fd)


def locate(anchor: int, root: str, rel: str, *, mkdir: Callable[[str], None] | None = None) -> Place:
    """The directory that holds what ``rel`` names, beneath ``anchor`` (real path ``root``), and the last name.

    Every symlink on the way is followed while it stays beneath (the last one too, so the name that
    comes back is not a symlink).  With ``mkdir``, missing directories are created (``mkdirat``)
    after ``mkdir(real path)`` returned without raising; without it they raise ``FileNotFoundError``.
    """
    head, _, name = rel.rpartition("/")
    if name not in ("", ".", "..") and openat2_enabled():
        try:  # read-only rather than O_PATH, so the directory can be fsynced after a rename into it
            dirfd = _openat2(anchor, head, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, PermissionError):
            dirfd = None  # the walk creates the missing directories (or raises), and uses O_PATH
        if dirfd is not None:
            try:
                st: os.stat_result | None = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except BaseException:
                os.close(dirfd)
                raise
            if st is None or not stat.S_ISLNK(st.st_mode):
                try:
                    return Place(dirfd, _fd_path(dirfd, root), name, st)
                except BaseException:
                    os.close(dirfd)
                    raise
            os.close(dirfd)  # the last name is a symlink: the walk follows it
    return _Walk(anchor, root, rel, mkdir).run()


class _Walk:
    """One component-by-component resolution (see :func:`locate`)."""

    __slots__ = ("anchor", "fds", "links", "mkdir", "parts", "rel", "root", "todo")

    def __init__(self, anchor: int, root: str, rel: str, mkdir: Callable[[str], None] | None) -> None:
        self.anchor, self.root, self.rel, self.mkdir = anchor, root, rel, mkdir
        self.todo = _components(rel)  # a stack: the next component is last
        self.fds: list[int] = []  # directories opened below the anchor, innermost last
        self.parts: list[str] = []  # their names: the real path of fds[-1] relative to root
        self.links = 0

    def here(self) -> int:
        return self.fds[-1] if self.fds else self.anchor

    def place(self, name: str, st: os.stat_result | None) -> Place:
        real = _join(self.root, "/".join(self.parts))
        fd = self.fds.pop() if self.fds else os.dup(self.anchor)  # the caller owns it now
        return Place(fd, real, name, st)

    def run(self) -> Place:
        try:
            while self.todo:
                name = self.todo.pop()
                if name == "..":
                    if not self.fds:
                        raise EscapeError(self.rel)
                    os.close(self.fds.pop())
                    self.parts.pop()
                    continue
                place = self.step(name)
                if place is not None:
                    return place
            return self.place("", None)  # rel named a directory itself ('' or ending in '..')
        finally:
            for fd in self.fds:
                os.close(fd)

    def step(self, name: str) -> Place | None:
        """Resolve one component; a :class:`Place` when it was the last one."""
        last = not self.todo
        try:
            st = os.stat(name, dir_fd=self.here(), follow_symlinks=False)
        except FileNotFoundError:
            if last:
                return self.place(name, None)
            self.make_dir(name)
            return None
        if stat.S_ISLNK(st.st_mode):
            self.follow(name)
        elif last:
            return self.place(name, st)
        elif not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), self.rel)
        else:
            self.enter(name)
        return None

    def count(self) -> None:
        self.links += 1
        if self.links > MAX_SYMLINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), self.rel)

    def follow(self, name: str) -> None:
        self.count()
        try:
            target = os.readlink(name, dir_fd=self.here())
        except OSError as e:  # EINVAL/ENOENT: it stopped being a symlink meanwhile; look again
            if e.errno not in (errno.EINVAL, errno.ENOENT):
                raise
            self.todo.append(name)
            return
        if target.startswith("/"):
            inside = beneath(target, self.root)
            if inside is None:
                raise EscapeError(target)
            while self.fds:
                os.close(self.fds.pop())
            self.parts.clear()
            target = inside
        self.todo += _components(target)

    def enter(self, name: str) -> None:
        flags = (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, dir_fd=self.here())
        except OSError as e:  # swapped for a symlink or a file since the stat: look again
            if e.errno not in (errno.ENOTDIR, errno.ELOOP, errno.ENOENT):
                raise
            self.count()
            self.todo.append(name)
            return
        self.fds.append(fd)
        self.parts.append(name)

    def make_dir(self, name: str) -> None:
        if self.mkdir is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self.rel)
        self.mkdir(_join(self.root, "/".join([*self.parts, name])))
        try:
            os.mkdir(name, 0o777, dir_fd=self.here())
        except FileExistsError:
            self.count()  # created meanwhile by someone else: look again
        self.todo.append(name)


def _components(path: str) -> list[str]:
    """The names of ``path`` as a stack (next last), without empty and ``.`` components."""
    return [c for c in reversed(path.split("/")) if c and c != "."]
