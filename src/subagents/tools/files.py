"""The file tools: ``read_file``, ``write_file``, ``edit_file``, ``list_dir``, ``glob`` and ``grep``.

Every path a model passes is resolved and opened in one step beneath the workspace root's
descriptor (:meth:`Workspace.open_file`, :meth:`~Workspace.open_dir`, :meth:`~Workspace.write_atomic`,
:meth:`~Workspace.walk`): ``..``, absolute paths outside the root and symlinks that lead outside are
refused, even when the tree changes meanwhile; hidden files are never read, protected paths never
written, FIFOs and devices never opened, and every write is atomic (the old file stays whole if it
fails).  The tools are plain sync functions: :class:`~subagents.tools.base.FunctionTool` runs them in
a worker thread, so their blocking I/O never blocks the event loop.  Paths in results are relative
to the workspace root.
"""

from __future__ import annotations

import io
import os
import re
from typing import Annotated

from .._threads import cancelled
from ..exceptions import ToolError
from ..sandbox import tree
from ..sandbox.workspace import Workspace
from . import grepping
from .base import ToolCategory, ToolContext, tool
from .globbing import glob_regex
from .regexes import Regex, compile_line_regex
from .schema import Range
from .textio import LineReader, encode_text, line_end, open_text, os_error, with_line_ends, write_bytes

__all__ = ["edit_file", "glob", "grep", "list_dir", "read_file", "write_file"]

READ_LIMIT = 2000
"""Lines ``read_file`` returns when no ``limit`` is given."""
MAX_LINE_NUMBER = 10**9
"""The largest ``offset`` and ``limit`` a model may pass to ``read_file``."""
_Lines = Annotated[int, Range(1, MAX_LINE_NUMBER)]
READ_MAX_CHARS = 45_000
"""``read_file`` stops early rather than produce more than this (the registry caps at 50,000)."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut in ``read_file`` output."""
EDIT_MAX_BYTES = 32 << 20
"""The largest file ``edit_file`` takes (it holds the file, and the edited copy, in memory)."""
COUNT_CHARS = 256 << 20
"""``read_file`` counts the lines after those it shows through this many characters at most."""
LIST_LIMIT = 1000
GLOB_LIMIT = 1000
LOOPS_NAMED = 10
"""``glob`` names this many symlink loops it skipped, and counts the rest."""
SKIP_DIRS = frozenset({".git", ".hg", ".svn"})
"""Version-control directories that ``glob`` and ``grep`` never descend into."""

_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as decoded with "surrogateescape"
_NOT_UTF8_HINT = (
    " The file holds bytes that are not UTF-8, which read_file shows as \ufffd and which no old_string can "
    "match: leave them out (match the text beside them), or change those lines with bash."
)

# ``tool(...)`` is typed ``Any``; name the decorators' real type so the tools stay typed.
_read_tool = tool(category=ToolCategory.READ)
_edit_tool = tool(category=ToolCategory.EDIT)


# --- helpers ------------------------------------------------------------------------------------


def _count_lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _number(lines: list[str], first: int) -> str:
    """Lines numbered like ``cat -n``, starting at ``first``."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


def _capped(lines: list[str], limit: int, what: str, hint: str) -> str:
    if len(lines) <= limit:
        return "\n".join(lines)
    more = len(lines) - limit
    return "\n".join(lines[:limit]) + f"\n[... {more:,} more {what} not shown; {hint} ...]"


def _join(rel: str, path: str) -> str:
    return path if rel == "." else f"{rel}/{path}"


# --- tools --------------------------------------------------------------------------------------


@_read_tool
def read_file(ctx: ToolContext, path: str, offset: _Lines = 1, limit: _Lines = READ_LIMIT) -> str:
    """Read a text file; lines come numbered like `cat -n`.

    Reads up to 2000 lines by default; when more remain, the result says which offset to pass to
    read on. Directories and binary files are refused.

    Args:
        path: the file, relative to the workspace root (or absolute inside it).
        offset: the 1-based line number to start at.
        limit: how many lines to return at most.
    """
    if offset < 1:
        raise ToolError(f"offset must be 1 or more (the first line is line 1), got {offset}.")
    if limit < 1:
        raise ToolError(f"limit must be 1 or more, got {limit}.")
    raw_file, rel, st = open_text(ctx.workspace, path)
    shown: list[str] = []
    size = n = 0
    rest: int | None = 0  # lines after the last one read (None: too many characters left to count)
    stopped = False  # a line was not shown because of the size budget
    with io.TextIOWrapper(raw_file, encoding="utf-8", errors="replace") as f:
        lines = LineReader(f, MAX_LINE_CHARS)
        n = lines.skip(offset - 1)
        while n >= offset - 1 and (got := lines.line()) is not None:
            n += 1
            line, cut = got
            if cut:
                line += f" [... line cut at {MAX_LINE_CHARS:,} characters]"
            size += len(line) + 8
            stopped = size > READ_MAX_CHARS and bool(shown)
            if not stopped:
                shown.append(line)
            if stopped or n >= offset + limit - 1:
                rest = lines.count_rest(COUNT_CHARS)
                break
    total = None if rest is None else n + rest
    if n == 0:
        return f"{rel} is empty (0 lines)."
    if n < offset:
        raise ToolError(
            f"offset {offset} is past the end of {rel}, which has {n:,} lines; use an offset from 1 to {n}."
        )
    last = offset + len(shown) - 1
    text = _number(shown, offset)
    why = " (stopped early to keep the output small)" if stopped else ""
    if total is None:
        text += (
            f"\n\n[lines {offset:,}-{last:,} shown{why}; more lines follow ({rel} is {st.st_size:,} bytes, too "
            f"large to count its lines). Call read_file with offset={last + 1} to read on.]"
        )
    elif last < total:
        text += (
            f"\n\n[lines {offset:,}-{last:,} of {total:,} shown{why}; {total - last:,} more lines. "
            f"Call read_file with offset={last + 1} to read on.]"
        )
    return text


@_edit_tool
def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write a text file, replacing it if it exists; missing parent directories are created.

    Args:
        path: the file, relative to the workspace root (or absolute inside it).
        content: the complete new content of the file.
    """
    if path.endswith(("/", "/.")) or path == ".":
        raise ToolError(f"{path!r} ends with '/', so it names a directory, not a file; pass the file's path "
                        "without the trailing '/'.")
    data = encode_text(content, "content", path)
    rel, existed = write_bytes(ctx.workspace, path, data)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {rel}: wrote {len(data):,} bytes ({_count_lines(content):,} lines)."


@_edit_tool
def edit_file(ctx: ToolContext, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    """Replace an exact piece of text in a file.

    old_string must match the file exactly, whitespace and indentation included, and occur exactly
    once unless replace_all is true. Read the file first and copy the text from it.

    Args:
        path: the file to edit, relative to the workspace root (or absolute inside it).
        old_string: the exact text to replace.
        new_string: the text to put in its place.
        replace_all: replace every occurrence instead of requiring exactly one.
    """
    if not old_string:
        raise ToolError("old_string is empty; pass the exact text to replace (use write_file to create a file).")
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same, so there is nothing to change.")
    encode_text(new_string, "new_string", path)
    f, rel, st = open_text(ctx.workspace, path)
    with f:
        data = f.read(EDIT_MAX_BYTES + 1)  # never a whole file of gigabytes in memory
    if len(data) > EDIT_MAX_BYTES:
        raise ToolError(
            f"{rel} is {max(st.st_size, len(data)):,} bytes, more than edit_file takes ({EDIT_MAX_BYTES:,} bytes), "
            "so it was not changed; edit it with bash (sed, or a script that streams it)."
        )
    text = data.decode("utf-8", "surrogateescape")  # bytes that are not UTF-8 survive the round trip
    eol = line_end(text)
    count = text.count(old_string)
    if count == 0 and "\r\n" in text and "\n" in old_string and "\r\n" not in old_string:
        crlf = old_string.replace("\n", "\r\n")  # the file uses CRLF line endings; the model wrote LF
        count = text.count(crlf)
        if count:
            old_string, eol = crlf, "\r\n"  # the text replaced has CRLF line ends: its replacement too
    new_string = with_line_ends(new_string, eol)  # the file keeps its line ends, whichever the model wrote
    if count == 0:
        raise ToolError(
            f"old_string was not found in {rel}; read the file and copy the exact text to replace, "
            "including whitespace and indentation." + (_NOT_UTF8_HINT if "\ufffd" in old_string and
                                                       _NOT_UTF8.search(text) else "")
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {rel}; add surrounding lines to old_string so it matches "
            "exactly one place, or set replace_all=true to replace every occurrence."
        )
    if old_string == new_string:
        raise ToolError("old_string and new_string differ only in their line ends, so there is nothing to change.")
    start = text.index(old_string)
    new_text = text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1)
    write_bytes(ctx.workspace, path, new_text.encode("utf-8", "surrogateescape"), expect=(st.st_dev, st.st_ino))
    first = _universal(text[:start]).count("\n") + 1  # line numbers as read_file gives them
    lines = _universal(new_text).split("\n")
    if lines[-1] == "":
        lines.pop()  # after the last line end: no line
    if not lines:
        return f"Edited {rel}: replaced {count} occurrence(s); the file is now empty."
    lo, hi = max(first - 3, 1), min(first + _universal(new_string).count("\n") + 3, len(lines))
    done = f"replaced {count} occurrences" if count > 1 else "replaced 1 occurrence"
    shown = [_shown(line) for line in lines[lo - 1 : hi]]
    return f"Edited {rel}: {done}. Lines {lo}-{hi} now read:\n{_number(shown, lo)}"


def _universal(text: str) -> str:
    """``text`` with every line end (CRLF, CR, LF) as LF: lines split as read_file splits them."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _shown(line: str) -> str:
    """A line of a file for a result: bytes that are not UTF-8 as U+FFFD (as read_file shows them), cut if long."""
    line = line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS:,} characters]"
    return line


@_read_tool
def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a directory: one entry per line, sorted, directories marked with a trailing `/`.

    Args:
        path: the directory, relative to the workspace root (or absolute inside it).
    """
    ws = ctx.workspace
    try:
        fd, rel = ws.open_dir(path)
    except FileNotFoundError:
        raise ToolError(f"Directory {path!r} does not exist; check the path (list the parent directory).") from None
    except NotADirectoryError:
        raise ToolError(f"{path!r} is a file, not a directory; use read_file to read it.") from None
    except OSError as e:
        raise os_error(path, e, "list") from e
    try:
        found = ws.walk(fd, rel, recurse=False, links_out=True)  # links out are listed by name, never opened
        entries = sorted(name + "/" if kind == tree.DIR else name for name, kind in found)
    except OSError as e:
        raise os_error(path, e, "list") from e
    finally:
        os.close(fd)
    if not entries:
        return f"{rel} is empty."
    return _capped(entries, LIST_LIMIT, "entries", "use glob with a pattern to narrow the listing")


@_read_tool
def glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Find files and directories whose path matches a glob pattern, e.g. `**/*.py` or `src/*.{js,ts}`.

    `*` and `?` stay within one directory, `**` spans any number of directories, `{a,b}` gives
    alternatives. Results are relative to the workspace root, sorted, directories end with `/`.
    Version-control directories (.git, .hg, .svn) are skipped.

    Args:
        pattern: the glob, matched against paths relative to `path`.
        path: the directory to search from, relative to the workspace root.
    """
    if not pattern.strip():
        raise ToolError("pattern is empty; pass a glob such as '**/*.py'.")
    if pattern.startswith("/"):
        raise ToolError(f"pattern {pattern!r} is absolute; pass the directory as path and a relative pattern.")
    if ".." in pattern.split("/"):
        raise ToolError(f"pattern {pattern!r} contains '..'; pass the directory to search as path instead.")
    ws = ctx.workspace
    try:
        fd, base = ws.open_dir(path)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"path {path!r} is not a directory; pass the directory to search from.") from None
    except OSError as e:
        raise os_error(path, e, "search") from e
    # Walk from the longest literal prefix of the pattern ("src/pkg/**/*.py" walks src/pkg only).
    parts = pattern.split("/")
    literal: list[str] = []
    while len(parts) > 1 and not re.search(r"[*?\[{]", parts[0]):
        literal.append(parts.pop(0))
    start = base
    if literal:
        os.close(fd)
        try:  # the literal prefix may pass through a symlink that leads outside: that is refused
            fd, start = ws.open_dir(os.path.join(ws.root, "" if base == "." else base, *literal))
        except (FileNotFoundError, NotADirectoryError):
            return f"No paths match {pattern!r} in {base}."
    try:
        matches, loops, deep = _glob_walk(ws, fd, start, glob_regex("/".join(parts)))
    except OSError as e:
        raise os_error(path, e, "search") from e
    more = f" and {len(loops) - LOOPS_NAMED} more" if len(loops) > LOOPS_NAMED else ""
    note = f"\n[skipped {len(loops)} symlink loop(s), links that never reach a file: {', '.join(loops[:LOOPS_NAMED])}"
    note = (note + more + "]" if loops else "") + (f"\n{grepping.deep_note(deep, 'listed')}" if deep else "")
    if not matches:
        return f"No paths match {pattern!r} in {base}." + note
    return _capped(matches, GLOB_LIMIT, "matches", "narrow the pattern or the path") + note


def _glob_walk(ws: Workspace, fd: int, start: str, rx: Regex) -> tuple[list[str], list[str], list[str]]:
    """``(matches, matching symlink loops, directories too deep to enter)`` under the directory ``fd`` (shown as
    ``start``), sorted; closes ``fd``."""
    matches: list[str] = []
    loops: list[str] = []
    deep: list[str] = []
    try:
        for n, (p, kind) in enumerate(ws.walk(fd, start, skip=SKIP_DIRS)):
            if n % 256 == 255 and cancelled():  # the caller stopped waiting: stop walking
                break
            if kind == tree.DEEP:
                deep.append(_join(start, p))
                continue
            try:
                hit = rx.fullmatch(p)
            except UnicodeEncodeError:  # a name that is not UTF-8 (its bytes as surrogates): matched as U+FFFD
                hit = rx.fullmatch(p.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
            if hit:
                (loops if kind == tree.LOOP else matches).append(_join(start, p) + ("/" if kind == tree.DIR else ""))
    finally:
        os.close(fd)
    return sorted(matches), sorted(loops), deep


@_read_tool
def grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None) -> str:
    """Search file contents for a regular expression; each matching line is printed as `path:line: text`.

    The pattern is matched line by line: `^` and `$` (also `\\A`, `\\Z`) are a line's start and end, and
    a match never spans lines. The syntax is RE2's, which is Python's `re` syntax without
    backreferences (`\\1`), lookahead/lookbehind (`(?=`, `(?<=`), possessive quantifiers (`a++`)
    and atomic groups; any pattern runs in linear time. Binary files and version-control
    directories are skipped; a search stops after 30 s with what it found.

    Args:
        pattern: a regular expression (RE2 syntax, like Python's re), searched line by line.
        path: a file or directory to search, relative to the workspace root.
        glob: only search files matching this glob, e.g. `*.py` or `src/**/*.{ts,tsx}`; a glob
            without `/` matches file names, one with `/` the path relative to `path`.
    """
    s = grepping.Search(compile_line_regex(pattern))
    ws = ctx.workspace
    total = 1
    try:
        fd, base = ws.open_dir(path)
    except FileNotFoundError:
        raise ToolError(f"path {path!r} does not exist; pass an existing file or directory to search.") from None
    except NotADirectoryError:  # a single file
        try:
            file_fd, base, _ = ws.open_file(path)
        except FileNotFoundError:
            raise ToolError(f"path {path!r} does not exist; pass an existing file or directory to search.") from None
        except OSError as e:
            raise os_error(path, e, "search") from e
        s.searched = int(grepping.search_fd(file_fd, base, s))
        where = base
    except OSError as e:
        raise os_error(path, e, "search") from e
    else:
        try:
            total = s.search_tree(ws, fd, base, glob, SKIP_DIRS)
        finally:
            os.close(fd)
        where = base + (f" (files matching {glob!r})" if glob else "")
    note = s.note(total)
    if not s.hits:
        return f"No matches for {pattern!r} in {where}; {s.searched} files searched." + (f"\n{note}" if note else "")
    limit = grepping.GREP_LIMIT
    if len(s.hits) > limit:
        return "\n".join(s.hits[:limit]) + (
            f"\n[... stopped after {limit} matching lines; narrow the pattern, path or glob to see the rest ...]"
        ) + (f"\n{deep}" if (deep := grepping.deep_note(s.deep, "searched")) else "")
    return "\n".join(s.hits) + (f"\n{note}" if note else "")
