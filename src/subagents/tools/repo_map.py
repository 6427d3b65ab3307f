"""The ``repo_map`` tool: a ranked outline of the workspace's files and their top-level symbols.

Python files are read with :mod:`ast` (classes with their methods, functions, module constants);
JavaScript/TypeScript, Go, Rust, Java/Kotlin/C#, Ruby and C/C++ by simple line patterns; other files
are listed by name only.  Files rank by how often other files mention their symbols (a file many
others use comes first), then by depth.  The outline stops at a token budget (about 4 characters a
token).  What is read from each file is cached by its path, size and modification time, so a second
call re-reads only what changed.  Files are opened through the workspace like every file tool:
hidden and outside paths are never read.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import threading
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Annotated

from .._threads import cancelled
from ..exceptions import ToolError
from ..sandbox import tree
from .base import ToolCategory, ToolContext, tool
from .regexes import Regex, compile_source_regex
from .schema import Range
from .textio import os_error

__all__ = ["repo_map"]

MAX_FILE_BYTES = 256_000
"""Larger files are listed without symbols."""
MAX_FILES = 5000
"""Files considered at most (the walk stops there and says so)."""
MAX_WALK = 200_000
"""Entries (folders included) the walk visits at most: a tree of folders without files is not walked forever."""
MAX_SYMBOLS = 300
"""Outline lines (and defined names) kept per file."""
MAX_MENTIONS = 2000
"""Distinct identifiers kept per file for the ranking (its most frequent ones, plus the names it defines), as
64-bit hashes: the cache holds every file read, and a full ``Counter`` of a 256 kB file of distinct identifiers
took 3 MB (5,000 such files: 15 GB, kept between calls)."""
SKIP = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache",
                  ".ruff_cache", ".pytest_cache", ".tox", "dist", "build", "target", ".idea", ".vscode"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
# Matched with RE2 (linear time, the GIL released), not Python's re: `^\s*` and `[\w\s\*]*?` cross line ends, and re
# backtracked through the rest of the file from every line start (minutes for a 256 kB file of blank lines or plain
# words, with the GIL held: the event loop frozen).
_PATTERNS: dict[str, str] = {
    "js": r"^(?:export\s+(?:default\s+)?)?(?:async\s+)?(?:function\*?|class|interface|type|enum|"
          r"const|let)\s+([A-Za-z_$][\w$]*)",
    "go": r"^(?:func(?:\s*\([^)]*\))?|type)\s+([A-Za-z_]\w*)",
    "rs": r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:fn|struct|enum|trait|type|mod|const)\s+([A-Za-z_]\w*)",
    "java": r"^(?:(?:public|private|protected|internal|abstract|final|static|sealed|data|open)\s+)*"
            r"(?:class|interface|enum|record|object|fun)\s+([A-Za-z_]\w*)",
    "rb": r"^\s*(?:class|module|def)\s+([A-Za-z_][\w.:]*[?!]?)",
    "c": r"^(?:struct|enum|union|class|typedef\s+struct)\s+([A-Za-z_]\w*)|"
         r"^[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\([^;]*\)\s*\{?\s*$",
}
_LANG = {".js": "js", ".jsx": "js", ".mjs": "js", ".ts": "js", ".tsx": "js", ".go": "go", ".rs": "rs",
         ".java": "java", ".kt": "java", ".cs": "java", ".scala": "java", ".rb": "rb", ".c": "c", ".h": "c",
         ".cc": "c", ".cpp": "c", ".hpp": "c"}


@dataclass(frozen=True, slots=True)
class _Entry:
    symbols: tuple[str, ...]  # outline lines
    defines: tuple[str, ...]  # the names others may mention
    mentions: array[int]  # hash() of the identifiers it mentions (at most MAX_MENTIONS + its own defines)


_EMPTY = _Entry((), (), array("q"))


_cache: dict[tuple[str, str], tuple[int, int, _Entry]] = {}
_cache_lock = threading.Lock()


def _python(text: str) -> tuple[list[str], list[str]]:
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: the parser's stack overflowed
        return [], []  # (200,000 nested unary minus), not the process's memory
    lines: list[str] = []
    names: list[str] = []
    for node in module.body:
        if isinstance(node, ast.ClassDef):
            methods = [n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and (not n.name.startswith("_") or n.name == "__init__")]
            lines.append(f"class {node.name}" + (f": {', '.join(methods)}" if methods else ""))
            names.append(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = ", ".join(a.arg for a in node.args.args)
            lines.append(f"def {node.name}({args})")
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id.isupper() and len(t.id) > 2:
                    lines.append(t.id)
                    names.append(t.id)
    return lines, names


@functools.cache
def _pattern(lang: str) -> Regex:
    return compile_source_regex(_PATTERNS[lang])


def _other(text: str, lang: str) -> tuple[list[str], list[str]]:
    data = text.encode("utf-8", "surrogatepass")  # RE2 searches UTF-8; a str would be encoded again per match
    names = [next(g for g in m.groups() if g).decode("utf-8", "replace") for m in _pattern(lang).finditer(data)]
    names = [n for n in dict.fromkeys(names) if n not in ("if", "for", "while", "switch", "return", "main")]
    return names, names


def _entry(ws_root_fd_path: str, text: str) -> _Entry:
    ext = os.path.splitext(ws_root_fd_path)[1].lower()
    if ext == ".py":
        lines, names = _python(text)
    elif ext in _LANG:
        lines, names = _other(text, _LANG[ext])
    else:
        lines, names = [], []
    if len(lines) > MAX_SYMBOLS:
        lines = [*lines[:MAX_SYMBOLS], f"[... {len(lines) - MAX_SYMBOLS:,} more symbols]"]
    defines = tuple(n for n in names[:MAX_SYMBOLS] if len(n) > 2)
    common = (n for n, _ in Counter(_IDENT.findall(text)).most_common(MAX_MENTIONS))
    return _Entry(tuple(lines), defines, array("q", {hash(n) for n in (*common, *defines)}))


def _read(ctx: ToolContext, rel: str) -> _Entry | None:
    ws = ctx.workspace
    try:
        fd, _, st = ws.open_file(rel)
    except (OSError, ToolError):  # gone, or refused (a hard link to a hidden file): left out, like grep does
        return None
    key = (str(ws.root), rel)
    with os.fdopen(fd, "rb") as f:
        hit = _cache.get(key)
        if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            return hit[2]
        if st.st_size > MAX_FILE_BYTES:
            entry = _EMPTY
        else:
            data = f.read(MAX_FILE_BYTES + 1)
            entry = _EMPTY if b"\x00" in data[:8192] else _entry(rel, data.decode("utf-8", errors="replace"))
    with _cache_lock:
        if len(_cache) > 20_000:
            _cache.clear()
        _cache[key] = (st.st_mtime_ns, st.st_size, entry)
    return entry


def _files(ctx: ToolContext, path: str) -> tuple[str, list[str], str]:
    """``(base, files, why the walk stopped early or "")``."""
    ws = ctx.workspace
    try:
        fd, base = ws.open_dir(path)
    except FileNotFoundError:
        raise ToolError(f"path {path!r} does not exist; pass a directory of the workspace ('.' for all).") from None
    except NotADirectoryError:
        raise ToolError(f"{path!r} is a file; pass a directory (read_file shows a file).") from None
    except OSError as e:
        raise os_error(path, e, "map") from e
    files: list[str] = []
    try:
        for n, (p, kind) in enumerate(ws.walk(fd, base, skip=SKIP), 1):
            if n % 1024 == 0 and cancelled():
                raise ToolError("repo_map was cancelled before it finished.")
            if n > MAX_WALK:
                return base, files, f"the walk stopped after visiting {MAX_WALK:,} entries"
            if kind == tree.FILE and not any(part.startswith(".") for part in p.split("/")):
                files.append(p if base == "." else f"{base}/{p}")
                if len(files) >= MAX_FILES:
                    return base, files, f"the walk stopped at {MAX_FILES:,} files"
    finally:
        os.close(fd)
    return base, files, ""


@tool(category=ToolCategory.READ)
def repo_map(ctx: ToolContext, path: str = ".", max_tokens: Annotated[int, Range(200, 20_000)] = 2000) -> str:
    """A ranked outline of the code base: files and their top-level symbols, most-used files first.

    Use it first to find your way around an unfamiliar repository, then read_file/grep what matters.

    Args:
        path: the directory to map, relative to the workspace root ('.' for the whole workspace).
        max_tokens: how long the outline may be, in tokens (about 4 characters each).
    """
    base, files, stopped = _files(ctx, path)
    entries: dict[str, _Entry] = {}
    for n, f in enumerate(files, 1):
        if n % 64 == 0 and cancelled():  # the caller stopped waiting (the run's timeout, Ctrl-C): stop reading
            raise ToolError("repo_map was cancelled before it finished.")
        if (e := _read(ctx, f)) is not None:
            entries[f] = e
    if not entries:
        return f"No files under {base}." + (f" ({stopped}: map a subdirectory, path=...)" if stopped else "")
    defined = {hash(n) for e in entries.values() for n in e.defines}
    mentions: Counter[int] = Counter()
    for e in entries.values():
        mentions.update(defined.intersection(e.mentions))  # in how many files each defined name appears
    score = {f: sum(mentions[hash(n)] - 1 for n in e.defines) + len(e.symbols) * 0.1 - f.count("/") * 0.5
             for f, e in entries.items()}
    ranked = sorted(entries, key=lambda f: (-score[f], f))
    budget = max_tokens * 4
    out: list[str] = []
    used = 0
    shown = 0
    for f in ranked:
        e = entries[f]
        block = "\n".join([f"{f}:", *(f"  {s}" for s in e.symbols)]) if e.symbols else f
        if used + len(block) + 1 > budget:
            if e.symbols and used + len(f) + 1 <= budget:
                block = f  # the name at least
            else:
                break
        out.append(block)
        used += len(block) + 1
        shown += 1
    rest = len(ranked) - shown
    if rest or stopped:
        more = f"{rest:,} more files not shown" + (f"; {stopped}" if stopped else "")
        out.append(f"[... {more}; raise max_tokens or map a subdirectory (path=...) ...]")
    return "\n".join(out)
