"""Walking a directory tree by descriptors, for ``list_dir``, ``glob`` and ``grep``.

Directories are listed with ``os.scandir(fd)`` and entered with ``openat(dirfd, name, O_NOFOLLOW |
O_DIRECTORY)``, so a directory swapped for a symlink is never followed and nothing is reached by a
path that could have changed.  Symlinks are not entered either; the caller's ``follow`` says what one
leads to (resolved beneath the workspace root), and entries it reports as outside or hidden are not
listed at all.  At most one descriptor per level of depth is open at a time, and at most :data:`MAX_OPEN`;
directories deeper than :data:`MAX_DEPTH` levels or :data:`MAX_PATH` characters are not entered (reported as
:data:`DEEP`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator

__all__ = ["DEEP", "DIR", "FILE", "HIDDEN", "LOOP", "MAX_DEPTH", "MAX_OPEN", "MAX_PATH", "MISSING", "OTHER", "OUTSIDE",
           "walk"]

DIR, FILE, OTHER = "dir", "file", "other"
"""Kinds of entries: a directory, a regular file, anything else (FIFO, socket, device)."""
LOOP, MISSING = "loop", "missing"
"""Kinds only symlinks have: a symlink loop (too many levels), a dangling symlink."""
OUTSIDE, HIDDEN = "outside", "hidden"
"""What ``follow`` answers for symlinks that are never listed."""

MAX_OPEN = 64
"""Descriptors a walk holds at most (one per level of depth, up to this)."""
MAX_DEPTH, MAX_PATH = 1024, 16_384
"""Levels of directories a walk enters at most, and the longest path (in characters, from the walk's top) of a
directory it enters.  A tree made deeper (a hostile project: 100,000 nested ``a/``) would otherwise cost memory as
the square of its depth (each level's path is longer than the last, and all of them are held)."""
DEEP = "deep"
"""What a directory past those bounds that has subdirectories is reported as, once: they are not entered."""
_CHILD = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

Listing = Generator[tuple[str, str], None, list[str]]


def _listing(fd: int, sub: str, hidden: Callable[[str], bool], follow: Callable[[str], str],
             skip: frozenset[str], links_out: bool) -> Listing:
    """Yield ``(path, kind)`` for the entries of directory ``fd`` (sorted); return the subdirectories to enter."""
    with os.scandir(fd) as it:
        entries = sorted(it, key=lambda e: e.name)
    subdirs: list[str] = []
    for e in entries:
        path = sub + e.name
        if hidden(path):
            continue
        try:
            if e.is_dir(follow_symlinks=False):
                if e.name in skip:
                    continue
                subdirs.append(e.name)
                kind = DIR
            elif e.is_symlink():
                kind = follow(path)
                if kind == HIDDEN or (kind == OUTSIDE and not links_out):
                    continue
            else:
                kind = FILE if e.is_file(follow_symlinks=False) else OTHER
        except OSError:  # gone meanwhile
            continue
        yield path, kind
    return subdirs


def walk(dirfd: int, *, hidden: Callable[[str], bool], follow: Callable[[str], str],
         skip: frozenset[str] = frozenset(), recurse: bool = True, links_out: bool = False
         ) -> Iterator[tuple[str, str]]:
    """Every entry under the directory ``dirfd`` as ``(path from dirfd, kind)``, top-down, sorted per directory.

    ``hidden(path)`` is true for entries that must neither be listed nor entered; ``follow(path)``
    classifies a symlink (one of the kinds above).  Directories named in ``skip`` are left out, and
    subdirectories that cannot be opened (no permission, swapped for something else) are not entered.
    Symlinks that lead outside are left out unless ``links_out`` (then their kind is ``OUTSIDE``; what
    they point to is never opened).  ``dirfd`` stays the caller's; a listing error at the top propagates.
    At most :data:`MAX_OPEN` descriptors are open at once, however deep the tree: deeper, the levels above are
    closed and opened again (name by name, never through a symlink) when the walk climbs back to them.
    """
    top = os.dup(dirfd)
    stack: list[tuple[int, str, Iterator[str]]] = []
    try:
        subdirs = yield from _listing(top, "", hidden, follow, skip, links_out)
    except BaseException:
        os.close(top)
        raise
    stack.append((top, "", iter(subdirs if recurse else ())))
    try:
        while stack:
            fd, sub, rest = stack[-1]
            name = next(rest, None)
            if name is None:
                if fd >= 0:
                    os.close(fd)
                stack.pop()
                continue
            if fd < 0 and (fd := _reopen(stack)) < 0:  # gone or swapped meanwhile: its other entries too
                stack.pop()
                continue
            try:
                child = os.open(name, _CHILD, dir_fd=fd)
            except OSError:
                continue
            path = sub + name + "/"
            try:
                subdirs = yield from _listing(child, path, hidden, follow, skip, links_out)
            except OSError:
                os.close(child)
                continue
            except BaseException:
                os.close(child)
                raise
            if subdirs and (len(stack) >= MAX_DEPTH or len(path) > MAX_PATH):
                yield path, DEEP
                subdirs = []
            _push(stack, (child, path, iter(subdirs)))
    finally:
        for fd, _, _ in stack:
            if fd >= 0:
                os.close(fd)


def _push(stack: list[tuple[int, str, Iterator[str]]], level: tuple[int, str, Iterator[str]]) -> None:
    """Enter ``level``; close the descriptor of the level :data:`MAX_OPEN` above, if open."""
    stack.append(level)
    if len(stack) > MAX_OPEN + 1 and (old := stack[-MAX_OPEN - 1])[0] >= 0:
        os.close(old[0])  # (the top one, the caller's copy, stays open: the way back down starts there)
        stack[-MAX_OPEN - 1] = (-1, old[1], old[2])


def _reopen(stack: list[tuple[int, str, Iterator[str]]]) -> int:
    """Open the deepest level of ``stack`` again from the nearest level above that is open (stored in ``stack``);
    -1 if a directory on the way is gone or is no longer a directory."""
    j = len(stack) - 2
    while stack[j][0] < 0:
        j -= 1
    fd, below = stack[j][0], stack[-1][1][len(stack[j][1]):].rstrip("/").split("/")
    held = -1
    try:
        for part in below:
            nxt = os.open(part, _CHILD, dir_fd=fd)
            if held >= 0:
                os.close(held)
            fd = held = nxt
    except OSError:
        if held >= 0:
            os.close(held)
        return -1
    _, sub, rest = stack[-1]
    stack[-1] = (held, sub, rest)
    return held
