"""Atomic, lossless file replacement inside a directory descriptor.

:func:`replace_file` never writes into the existing file: it writes a temporary file next to it
(created ``O_EXCL`` through the directory descriptor), fsyncs it, gives it the original's owner and
mode, renames it over the name and fsyncs the directory.  Readers see the old content or the new,
never a mix; a failure at any step (disk full, a quota, an I/O error) leaves the old file
byte-for-byte and removes the temporary file.  The rename replaces the directory entry itself, so
a name that became a symlink or a hard link meanwhile is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import errno
import os

__all__ = ["fsync_dir", "replace_file"]

_TEMP_TRIES = 5


def _temp_name(name: str) -> str:
    return f".{name[:120]}.{os.urandom(4).hex()}.tmp"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:  # pragma: no cover - os.write raises rather than return 0 for regular files
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def _copy_owner_and_mode(fd: int, like: os.stat_result) -> None:
    """Give the new file the old one's owner (when allowed) and mode bits (after chown, which clears set-id bits)."""
    if (like.st_uid, like.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):  # only root may give a file away; keep ours then
            os.fchown(fd, like.st_uid, like.st_gid)
    os.fchmod(fd, like.st_mode & 0o7777)


def _create_temp(dirfd: int, name: str, mode: int) -> tuple[str, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TEMP_TRIES):
        tmp = _temp_name(name)
        try:
            return tmp, os.open(tmp, flags, mode, dir_fd=dirfd)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "could not create a temporary file next to it", name)


def fsync_dir(dirfd: int) -> None:
    """fsync a directory given by any descriptor (an ``O_PATH`` one is reopened read-only first)."""
    try:
        os.fsync(dirfd)
        return
    except OSError as e:
        if e.errno != errno.EBADF:  # EBADF: an O_PATH descriptor, which cannot be synced
            raise
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(dirfd: int, name: str, data: bytes, like: os.stat_result | None) -> None:
    """Give ``name`` in directory ``dirfd`` the content ``data``, atomically.

    ``like`` is the ``lstat`` of the file being replaced (its owner and mode are kept), or ``None``
    for a new file (mode ``0o666`` minus the umask).  On failure the old file is untouched and the
    temporary file is gone; the ``OSError`` propagates.
    """
    tmp, fd = _create_temp(dirfd, name, 0o600 if like is not None else 0o666)
    try:
        try:
            _write_all(fd, data)
            if like is not None:
                _copy_owner_and_mode(fd, like)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dirfd)
        raise
    # The rename is the commit point: the new content is in place.  Syncing the directory makes the
    # rename durable; a file system that cannot (EINVAL) or an error now must not report the write
    # as failed, since it was not.
    with contextlib.suppress(OSError):
        fsync_dir(dirfd)
