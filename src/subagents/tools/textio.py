"""Opening, decoding and writing text for the file tools, with a sentence for the model on every failure.

The confinement itself (what may be opened or written, atomic writes) is in
:mod:`subagents.sandbox.access`; this module turns its outcomes into the file tools' messages.
"""

from __future__ import annotations

import errno
import os
from typing import BinaryIO

from ..exceptions import ToolError
from ..sandbox.workspace import Workspace

__all__ = ["SNIFF_BYTES", "encode_text", "open_text", "os_error", "write_bytes"]

SNIFF_BYTES = 8192
"""A file whose first 8 KiB contain a NUL byte is treated as binary."""


def os_error(path: str, e: OSError, verb: str) -> ToolError:
    """A sentence for an ``OSError`` that no tool phrases more precisely."""
    if e.errno == errno.ELOOP:
        return ToolError(f"{path!r} leads into a symlink loop (too many levels of symbolic links); fix or remove "
                         "the link, or use the path it should point to.")
    return ToolError(f"Could not {verb} {path!r}: {e.strerror or e}.")


def open_text(ws: Workspace, path: str) -> tuple[BinaryIO, str, os.stat_result]:
    """Open a regular text file to read, with a sentence for the model otherwise; ``(file, display path, fstat)``."""
    try:
        fd, rel, st = ws.open_file(path)
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a directory, not a file; use list_dir to see what it contains.") from None
    except FileNotFoundError:
        raise ToolError(f"File {path!r} does not exist; check the path (list_dir or glob can find it).") from None
    except OSError as e:
        raise os_error(path, e, "read") from e
    f = os.fdopen(fd, "rb")
    try:
        if b"\x00" in f.read(SNIFF_BYTES):
            raise ToolError(
                f"{path!r} looks like a binary file (it contains NUL bytes), so it was not read; the file tools "
                "handle text only (use bash, e.g. `file` or `xxd | head`, to inspect it)."
            )
        f.seek(0)
    except BaseException:
        f.close()
        raise
    return f, rel, st


def encode_text(text: str, what: str, path: str) -> bytes:
    """``text`` as UTF-8, or a :class:`ToolError` (before anything on disk is touched) if it cannot be."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = e.object[e.start : e.end]
        raise ToolError(
            f"{what} cannot be written as UTF-8: it contains {bad!r} at index {e.start}, a lone surrogate (half of "
            f"a UTF-16 pair, not a character), so {path!r} was not changed. Pass valid Unicode text."
        ) from None


def write_bytes(ws: Workspace, path: str, data: bytes, expect: tuple[int, int] | None = None) -> tuple[str, bool]:
    """:meth:`Workspace.write_atomic` with the tools' messages; ``(display path, existed)``."""
    try:
        return ws.write_atomic(path, data, expect=expect)
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a directory; pass the path of a file to write.") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise os_error(path, e, "write") from e
        raise ToolError(
            f"Could not write {path!r}: {e.strerror or e}; the file was left as it was. Check that the path is "
            "a writable file."
        ) from e
