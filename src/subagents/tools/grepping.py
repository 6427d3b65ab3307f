"""The search behind the ``grep`` tool: RE2 over whole blocks of each file, bounded in time.

``grep`` runs in a worker thread (:func:`subagents._threads.call_in_thread`), never on the event
loop, and RE2 releases the GIL while it matches, so the loop keeps running however long a search
takes.  A search also stops:

- at :data:`GREP_TIME_S` seconds, with what it found and a note saying where it stopped;
- when the call is cancelled (the run's ``timeout_s``, ``close_agent``, Ctrl-C), at its next check
  (between files, and between blocks of a large file);
- after :data:`GREP_LIMIT` matching lines.

Each file is read in blocks of :data:`BLOCK` bytes cut at line ends and searched in one call per
match (not one per line), in multi-line mode with ``never_nl`` (:mod:`.regexes`), so a match never
spans lines.  Line ends are ``\\n``, ``\\r\\n`` or ``\\r``, as with Python's universal newlines.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .._threads import cancelled
from ..exceptions import ToolError
from ..sandbox import tree
from ..sandbox.workspace import Workspace
from .globbing import glob_regex
from .regexes import Regex
from .textio import SNIFF_BYTES

__all__ = ["BLOCK", "GREP_LIMIT", "GREP_LINE_CHARS", "GREP_TIME_S", "Search"]

GREP_LIMIT = 500
"""Matching lines shown at most."""
GREP_LINE_CHARS = 500
"""Longer matching lines are cut."""
GREP_TIME_S = 30.0
"""A search stops after this many seconds and returns what it found."""
BLOCK = 1 << 20
"""Bytes read (and searched) at a time; a longer line is read whole, up to :data:`LONG_LINE`."""
LONG_LINE = 16 * BLOCK
"""A line longer than this is searched in pieces of this size (a match across two pieces is missed)."""
LIST_CHECK_EVERY = 256
"""Entries listed between two looks at the clock while the files to search are collected."""

_clock: Callable[[], float] = time.monotonic


def _join(rel: str, path: str) -> str:
    return path if rel == "." else f"{rel}/{path}"


@dataclass(slots=True)
class Search:
    """One ``grep`` call: the pattern, the hits so far, and why it stopped early (if it did)."""

    rx: Regex
    hits: list[str] = field(default_factory=list)
    deadline: float = 0.0
    stopped: str | None = None  # "time" or "cancelled"
    searched: int = 0
    deep: list[str] = field(default_factory=list)  # directories too deep to enter (tree.MAX_DEPTH)

    def __post_init__(self) -> None:
        self.deadline = _clock() + GREP_TIME_S

    def go_on(self) -> bool:
        """False once the search must stop (time limit, cancellation, enough hits)."""
        if self.stopped is not None or len(self.hits) > GREP_LIMIT:
            return False
        if cancelled():
            self.stopped = "cancelled"
        elif _clock() > self.deadline:
            self.stopped = "time"
        return self.stopped is None

    def files(self, ws: Workspace, fd: int, base: str, glob: str | None, skip: frozenset[str]) -> list[str]:
        """The regular files under the open directory ``fd`` (shown as ``base``) matching ``glob``, sorted."""
        file_rx = glob_regex(glob) if glob else None
        by_name = glob is not None and "/" not in glob
        found: list[str] = []
        for n, (rel, kind) in enumerate(ws.walk(fd, base, skip=skip), 1):
            if n % LIST_CHECK_EVERY == 0 and not self.go_on():
                return []
            if kind == tree.FILE and (file_rx is None
                                      or file_rx.fullmatch(rel.rpartition("/")[2] if by_name else rel)):
                found.append(rel)
            elif kind == tree.DEEP:
                self.deep.append(_join(base, rel))
        found.sort()  # by path, like glob's output
        return [_join(base, rel) for rel in found]

    def search_tree(self, ws: Workspace, fd: int, base: str, glob: str | None, skip: frozenset[str]) -> int:
        """Search the files under the open directory ``fd``; how many files there were to search."""
        todo = self.files(ws, fd, base, glob, skip)
        for rel in todo:
            if not self.go_on():
                break
            try:
                file_fd, _, _ = ws.open_file(rel)  # resolved again beneath the root: never through a changed path
            except (OSError, ToolError):  # gone meanwhile, or refused (hidden, not a regular file): not searched
                continue
            self.searched += search_fd(file_fd, rel, self)
        return len(todo)

    def note(self, total: int) -> str:
        """Why the search stopped early or left directories out, for the end of the result ('' if neither)."""
        deep = deep_note(self.deep, "searched")
        if self.stopped != "time":
            return deep
        of = f" of {total:,}" if total else ""
        return (f"[stopped after {GREP_TIME_S:g} s (the time limit of grep) with {self.searched:,}{of} files "
                "searched; narrow the path or the glob to search the rest]") + (f"\n{deep}" if deep else "")


def deep_note(deep: list[str], done: str) -> str:
    """The note for directories a walk did not enter (``tree.DEEP``), '' for none."""
    if not deep:
        return ""
    first = deep[0] if len(deep[0]) <= 200 else f"{deep[0][:80]}...{deep[0][-80:]} ({len(deep[0]):,} characters)"
    return (f"[the directories below {first}{f' and {len(deep) - 1:,} more' if len(deep) > 1 else ''} were not "
            f"{done}: deeper than {tree.MAX_DEPTH:,} levels or {tree.MAX_PATH:,} characters; pass a path inside "
            "them to go on]")


def search_fd(fd: int, rel: str, s: Search) -> bool:
    """Add ``rel:line: text`` to ``s.hits`` for each matching line of the open file ``fd``; False for a
    binary file, which is not searched.  Closes ``fd``."""
    with open(fd, "rb", buffering=0) as f:
        carry = f.read(SNIFF_BYTES)
        if b"\x00" in carry:
            return False
        line, done, size = 1, len(carry), os.fstat(fd).st_size  # read up to the size it had when opened
        while True:
            block = f.read(min(size - done, BLOCK)) if done < size else b""  # no 1 MiB buffer for a small file
            done += len(block)
            buf = carry + block if block else carry
            last = not block or done >= size
            if last:
                chunk, carry = buf, b""
            else:
                cut = max(buf.rfind(b"\n"), buf.rfind(b"\r", 0, len(buf) - 1)) + 1  # a last \r may start \r\n
                if cut == 0 and len(buf) < LONG_LINE:  # no line end yet: read on
                    carry = buf
                    continue
                cut = cut or len(buf)  # a line of more than LONG_LINE bytes is searched in pieces
                chunk, carry = buf[:cut], buf[cut:]
            line = _search_chunk(chunk, line, rel, s, count=not last)
            if last or not s.go_on():
                return True


def _search_chunk(chunk: bytes, line: int, rel: str, s: Search, *, count: bool) -> int:
    """Search whole lines; ``line`` is the number of the first one.  The number of the line after them
    (counted only if ``count``: more lines follow)."""
    if b"\r" in chunk:
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    n = len(chunk)
    pos = counted = 0  # ``line`` is the number of the line starting at ``counted``
    while pos < n:
        m = s.rx.search(chunk, pos)
        if m is None:
            break
        start = m.start()
        if start == n and (not n or chunk.endswith(b"\n")):
            break  # an empty match after the last line end is not a line
        begin = chunk.rfind(b"\n", 0, start) + 1
        line += chunk.count(b"\n", counted, begin)
        counted = begin
        end = chunk.find(b"\n", start)
        end = n if end < 0 else end
        text = chunk[begin:end].decode("utf-8", "replace")
        if len(text) > GREP_LINE_CHARS:
            text = text[:GREP_LINE_CHARS] + " [...]"
        s.hits.append(f"{rel}:{line}: {text}")
        if len(s.hits) > GREP_LIMIT:
            break
        pos = end + 1
    return line + chunk.count(b"\n", counted) if count else line
