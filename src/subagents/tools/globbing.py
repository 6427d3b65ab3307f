"""Glob patterns as regular expressions over ``/``-separated relative paths (for ``glob`` and ``grep``).

``*`` and ``?`` stay within one directory, ``**`` spans any number of directories, ``[...]`` is a
character class (``[!...]`` negated), ``{a,b}`` gives alternatives.

>>> bool(glob_regex("src/**/*.{py,md}").match("src/a/b/c.md"))
True
"""

from __future__ import annotations

import re

__all__ = ["expand_braces", "glob_regex", "translate"]


def expand_braces(pattern: str) -> list[str]:
    """``*.{py,md}`` -> ``['*.py', '*.md']`` (one level, repeated left to right)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    return [e for alt in m.group(1).split(",") for e in expand_braces(head + alt + tail)]


def translate(pattern: str) -> str:
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


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The compiled regex matching whole relative paths against ``pattern``."""
    return re.compile("|".join(f"(?:{translate(p)})" for p in expand_braces(pattern)) + r"\Z")
