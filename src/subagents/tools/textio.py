"""Opening, decoding and writing text for the file tools, with a sentence for the model on every failure.

The confinement itself (what may be opened or written, atomic writes) is in
:mod:`subagents.sandbox.access`; this module turns its outcomes into the file tools' messages.
"""

from __future__ import annotations

import errno
import os
from typing import BinaryIO, TextIO

from .._threads import cancelled
from ..exceptions import ToolError
from ..sandbox.workspace import Workspace

__all__ = [
    "SNIFF_BYTES", "LineReader", "encode_text", "line_end", "open_text", "os_error", "with_line_ends", "write_bytes",
]

SNIFF_BYTES = 8192
"""A file whose first 8 KiB contain a NUL byte is treated as binary."""
BLOCK_CHARS = 1 << 16
"""Characters read at a time past what is kept (the rest of a cut line, the lines after those shown)."""


def line_end(text: str) -> str | None:
    """``"\\r\\n"`` if every line of ``text`` ends in CRLF, ``"\\n"`` if every one in LF; ``None`` if mixed or none."""
    lf = text.count("\n")
    if not lf:
        return None
    crlf = text.count("\r\n")
    return "\r\n" if crlf == lf else "\n" if not crlf else None


def with_line_ends(text: str, eol: str | None) -> str:
    """``text`` with its line ends made ``eol`` (CRLF or LF; ``None``: left as they are)."""
    if eol == "\r\n":
        return text.replace("\r\n", "\n").replace("\n", "\r\n") if "\n" in text else text
    return text.replace("\r\n", "\n") if eol == "\n" and "\r\n" in text else text


class LineReader:
    """The lines of a text file (universal newlines), read in blocks: bounded memory whatever the file holds.

    A line longer than ``most`` characters is cut, and never held whole (a file of one 4 GB line costs a
    few blocks of memory, not 4 GB); lines are skipped and counted a block at a time.
    """

    __slots__ = ("buf", "f", "most", "pos")

    def __init__(self, f: TextIO, most: int) -> None:
        self.f, self.most, self.buf, self.pos = f, most, "", 0

    def _more(self) -> bool:
        """Whether characters are left in ``buf`` (reading the next block when it is used up)."""
        if self.pos < len(self.buf):
            return True
        if cancelled():  # the caller stopped waiting (the run's timeout, Ctrl-C): stop reading
            raise ToolError("the read was cancelled before it finished.")
        self.buf, self.pos = self.f.read(BLOCK_CHARS), 0
        return bool(self.buf)

    def skip(self, k: int) -> int:
        """Skip ``k`` lines (fewer at the end of the file); how many were skipped."""
        done, tail = 0, False  # tail: characters of an unfinished line were skipped
        while done < k:
            if not self._more():
                return done + tail  # a last line without a line end counts
            buf, pos = self.buf, self.pos
            c = buf.count("\n", pos)
            if done + c >= k:
                for _ in range(k - done):
                    pos = buf.index("\n", pos) + 1
                self.pos = pos
                return k
            done += c
            tail = not buf.endswith("\n")
            self.pos = len(buf)
        return done

    def line(self) -> tuple[str, bool] | None:
        """The next line without its line end, cut to ``most`` chars, and whether it was cut (``None``: none left)."""
        head: list[str] = []
        size = 0
        while self._more():
            buf, pos = self.buf, self.pos
            i = buf.find("\n", pos)
            end = len(buf) if i < 0 else i
            if size <= self.most:
                head.append(buf[pos : min(end, pos + self.most + 1 - size)])
            size += end - pos
            self.pos = end if i < 0 else i + 1
            if i >= 0:
                break
        else:
            if not head:
                return None
        return "".join(head)[: self.most], size > self.most

    def count_rest(self, most: int) -> int | None:
        """How many lines are left; ``None`` when more than ``most`` characters are left (not all counted)."""
        lines, seen, last = 0, 0, "\n"
        while self._more():
            lines += self.buf.count("\n", self.pos)
            seen += len(self.buf) - self.pos
            last, self.pos = self.buf[-1], len(self.buf)
            if seen > most:
                return None
        return lines + (last != "\n")


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
        head = f.read(SNIFF_BYTES)
        if head.startswith((b"\xff\xfe", b"\xfe\xff")) and len(head) % 2 == 0:
            raise ToolError(
                f"{path!r} is UTF-16 text (it starts with a UTF-16 byte order mark), so it was not read; the file "
                "tools handle UTF-8 only (convert it with bash, e.g. `iconv -f UTF-16 -t UTF-8`)."
            )
        if b"\x00" in head:
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
