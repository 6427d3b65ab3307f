"""The file tools: ``read_file``, ``write_file``, ``edit_file``, ``list_dir``, ``glob`` and ``grep``.

Every path a model passes goes through :meth:`Workspace.resolve`, so ``..``, absolute paths outside
the root and symlinks that lead outside are refused before anything is opened.  The tools are plain
sync functions: :class:`~subagents.tools.base.FunctionTool` runs them in a worker thread, so their
blocking I/O never blocks the event loop.  Paths in results are relative to the workspace root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from ..exceptions import ToolError
from .base import ToolCategory, ToolContext, tool
from .paths import Workspace

__all__ = ["edit_file", "glob", "grep", "list_dir", "read_file", "write_file"]

READ_LIMIT = 2000
"""Lines ``read_file`` returns when no ``limit`` is given."""
READ_MAX_CHARS = 45_000
"""``read_file`` stops early rather than produce more than this (the registry caps at 50,000)."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut in ``read_file`` output."""
LIST_LIMIT = 1000
GLOB_LIMIT = 1000
GREP_LIMIT = 500
GREP_LINE_CHARS = 500
SKIP_DIRS = frozenset({".git", ".hg", ".svn"})
"""Version-control directories that ``glob`` and ``grep`` never descend into."""
_SNIFF_BYTES = 8192

# ``tool(...)`` is typed ``Any``; name the decorators' real type so the tools stay typed.
_read_tool = tool(category=ToolCategory.READ)
_edit_tool = tool(category=ToolCategory.EDIT)


# --- helpers ------------------------------------------------------------------------------------


def _is_binary(p: Path) -> bool:
    """A file whose first 8 KiB contain a NUL byte is treated as binary."""
    with p.open("rb") as f:
        return b"\x00" in f.read(_SNIFF_BYTES)


def _existing_file(ws: Workspace, path: str) -> Path:
    """Resolve ``path`` and require a readable text file, with a sentence for the model otherwise."""
    p = ws.resolve(path)
    if p.is_dir():
        raise ToolError(f"{path!r} is a directory, not a file; use list_dir to see what it contains.")
    if not p.exists():
        raise ToolError(f"File {path!r} does not exist; check the path (list_dir or glob can find it).")
    if not p.is_file():
        raise ToolError(f"{path!r} is not a regular file, so it cannot be read as text.")
    if _is_binary(p):
        raise ToolError(
            f"{path!r} looks like a binary file (it contains NUL bytes), so it was not read; the file tools "
            "handle text only (use bash, e.g. `file` or `xxd | head`, to inspect it)."
        )
    return p


def _count_lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _number(lines: list[str], first: int) -> str:
    """Lines numbered like ``cat -n``, starting at ``first``."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


def _expand_braces(pattern: str) -> list[str]:
    """``*.{py,md}`` -> ``['*.py', '*.md']`` (one level, repeated left to right)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    return [e for alt in m.group(1).split(",") for e in _expand_braces(head + alt + tail)]


def _translate(pattern: str) -> str:
    """One glob (no braces) as a regex over ``/``-separated paths: ``**`` spans directories."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (j := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : j]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{_translate(p)})" for p in _expand_braces(pattern)) + r"\Z")


def _inside(ws: Workspace, p: Path) -> bool:
    """False for a symlink that leads outside the workspace (other entries are inside by construction)."""
    if not p.is_symlink():
        return True
    try:
        ws.resolve(p)
    except ToolError:
        return False
    return True


def _walk(base: Path, *, skip: frozenset[str] = SKIP_DIRS) -> Iterator[tuple[Path, bool]]:
    """Every entry under ``base`` as ``(path, is_dir)``, sorted, not following directory symlinks."""
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        top = Path(root)
        for d in dirs:
            yield top / d, True
        for f in sorted(files):
            yield top / f, False


def _capped(lines: list[str], limit: int, what: str, hint: str) -> str:
    if len(lines) <= limit:
        return "\n".join(lines)
    more = len(lines) - limit
    return "\n".join(lines[:limit]) + f"\n[... {more:,} more {what} not shown; {hint} ...]"


# --- tools --------------------------------------------------------------------------------------


@_read_tool
def read_file(ctx: ToolContext, path: str, offset: int = 1, limit: int = READ_LIMIT) -> str:
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
    p = _existing_file(ctx.workspace, path)
    shown: list[str] = []
    size = 0
    total = 0
    stopped_at: int | None = None  # first line not shown because of the size budget
    with p.open(encoding="utf-8", errors="replace") as f:
        for total, raw in enumerate(f, 1):
            if total < offset or total >= offset + limit or stopped_at is not None:
                continue
            line = raw.rstrip("\r\n")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS:,} characters]"
            size += len(line) + 8
            if size > READ_MAX_CHARS and shown:
                stopped_at = total
                continue
            shown.append(line)
    rel = ctx.workspace.relative(p)
    if total == 0:
        return f"{rel} is empty (0 lines)."
    if offset > total:
        raise ToolError(
            f"offset {offset} is past the end of {rel}, which has {total:,} lines; use an offset from 1 to {total}."
        )
    last = offset + len(shown) - 1
    text = _number(shown, offset)
    if last < total:
        why = " (stopped early to keep the output small)" if stopped_at is not None else ""
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
    p = ctx.workspace.resolve(path)
    if p.is_dir():
        raise ToolError(f"{path!r} is a directory; pass the path of a file to write.")
    existed = p.exists()
    data = content.encode("utf-8")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    except OSError as e:
        raise ToolError(f"Could not write {path!r}: {e.strerror or e}. Check that the path is a writable file.") from e
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {ctx.workspace.relative(p)}: wrote {len(data):,} bytes ({_count_lines(content):,} lines)."


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
    p = _existing_file(ctx.workspace, path)
    with p.open(encoding="utf-8", errors="surrogateescape", newline="") as f:
        text = f.read()
    rel = ctx.workspace.relative(p)
    count = text.count(old_string)
    if count == 0 and "\r\n" in text and "\n" in old_string and "\r\n" not in old_string:
        old_string, new_string = old_string.replace("\n", "\r\n"), new_string.replace("\n", "\r\n")
        count = text.count(old_string)  # the file uses CRLF line endings; the model wrote LF
    if count == 0:
        raise ToolError(
            f"old_string was not found in {rel}; read the file and copy the exact text to replace, "
            "including whitespace and indentation."
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {rel}; add surrounding lines to old_string so it matches "
            "exactly one place, or set replace_all=true to replace every occurrence."
        )
    start = text.index(old_string)
    new_text = text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1)
    with p.open("w", encoding="utf-8", errors="surrogateescape", newline="") as f:
        f.write(new_text)
    first = text.count("\n", 0, start) + 1
    lines = new_text.splitlines()
    if not lines:
        return f"Edited {rel}: replaced {count} occurrence(s); the file is now empty."
    lo, hi = max(first - 3, 1), min(first + new_string.count("\n") + 3, len(lines))
    done = f"replaced {count} occurrences" if count > 1 else "replaced 1 occurrence"
    return f"Edited {rel}: {done}. Lines {lo}-{hi} now read:\n{_number(lines[lo - 1 : hi], lo)}"


@_read_tool
def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a directory: one entry per line, sorted, directories marked with a trailing `/`.

    Args:
        path: the directory, relative to the workspace root (or absolute inside it).
    """
    p = ctx.workspace.resolve(path)
    if not p.exists():
        raise ToolError(f"Directory {path!r} does not exist; check the path (list the parent directory).")
    if not p.is_dir():
        raise ToolError(f"{path!r} is a file, not a directory; use read_file to read it.")
    with os.scandir(p) as it:
        entries = sorted(e.name + "/" if e.is_dir() else e.name for e in it)
    if not entries:
        return f"{ctx.workspace.relative(p)} is empty."
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
    base = ctx.workspace.resolve(path)
    if not base.is_dir():
        raise ToolError(f"path {path!r} is not a directory; pass the directory to search from.")
    # Walk from the longest literal prefix of the pattern ("src/pkg/**/*.py" walks src/pkg only).
    parts = pattern.split("/")
    literal: list[str] = []
    while len(parts) > 1 and not re.search(r"[*?\[{]", parts[0]):
        literal.append(parts.pop(0))
    start = base.joinpath(*literal)
    if not start.is_dir():
        return f"No paths match {pattern!r} in {ctx.workspace.relative(base)}."
    ctx.workspace.resolve(start)  # the literal prefix may pass through a symlink that leads outside
    rx = _glob_regex("/".join(parts))
    matches: list[str] = []
    for p, is_dir in _walk(start):
        if rx.match(p.relative_to(start).as_posix()) and _inside(ctx.workspace, p):
            matches.append(p.relative_to(ctx.workspace.root).as_posix() + ("/" if is_dir else ""))
    if not matches:
        return f"No paths match {pattern!r} in {ctx.workspace.relative(base)}."
    matches.sort()
    return _capped(matches, GLOB_LIMIT, "matches", "narrow the pattern or the path")


def _grep_files(base: Path, glob: str | None) -> Iterator[Path]:
    """The files ``grep`` searches: ``base`` if it is a file, else the files under it matching ``glob``, sorted."""
    if base.is_file():
        yield base
        return
    file_rx = _glob_regex(glob) if glob else None
    by_name = glob is not None and "/" not in glob
    found: list[tuple[str, Path]] = []
    for p, is_dir in _walk(base):
        rel = p.relative_to(base).as_posix()
        if not is_dir and (file_rx is None or file_rx.match(p.name if by_name else rel)):
            found.append((rel, p))
    found.sort()  # by path, like glob's output
    yield from (p for _, p in found)


def _grep_file(p: Path, rx: re.Pattern[str], rel: str, hits: list[str]) -> None:
    """Append ``rel:line: text`` for each matching line of ``p``, stopping once past the cap."""
    with p.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if rx.search(line):
                text = line.rstrip("\r\n")
                if len(text) > GREP_LINE_CHARS:
                    text = text[:GREP_LINE_CHARS] + " [...]"
                hits.append(f"{rel}:{n}: {text}")
                if len(hits) > GREP_LIMIT:
                    return


@_read_tool
def grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None) -> str:
    """Search file contents for a Python regular expression; each hit is printed as `path:line: text`.

    Binary files and version-control directories are skipped.

    Args:
        pattern: a Python regular expression (re module syntax), searched line by line.
        path: a file or directory to search, relative to the workspace root.
        glob: only search files matching this glob, e.g. `*.py` or `src/**/*.{ts,tsx}`; a glob
            without `/` matches file names, one with `/` the path relative to `path`.
    """
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ToolError(
            f"pattern {pattern!r} is not a valid Python regular expression: {e}. Fix the pattern and call grep again."
        ) from e
    base = ctx.workspace.resolve(path)
    if not base.exists():
        raise ToolError(f"path {path!r} does not exist; pass an existing file or directory to search.")
    hits: list[str] = []
    searched = 0
    for p in _grep_files(base, glob):
        if len(hits) > GREP_LIMIT:
            break
        if not p.is_file() or not _inside(ctx.workspace, p) or _is_binary(p):
            continue
        searched += 1
        _grep_file(p, rx, p.relative_to(ctx.workspace.root).as_posix(), hits)
    where = ctx.workspace.relative(base) + (f" (files matching {glob!r})" if glob and not base.is_file() else "")
    if not hits:
        return f"No matches for {pattern!r} in {where}; {searched} files searched."
    if len(hits) > GREP_LIMIT:
        return "\n".join(hits[:GREP_LIMIT]) + (
            f"\n[... stopped after {GREP_LIMIT} matching lines; narrow the pattern, path or glob to see the rest ...]"
        )
    return "\n".join(hits)
