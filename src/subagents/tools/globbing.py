"""Glob patterns as regular expressions over ``/``-separated relative paths (for ``glob`` and ``grep``).

``*`` and ``?`` stay within one directory, ``**`` spans any number of directories, ``[...]`` is a
character class (``[!...]`` negated), ``{a,b}`` gives alternatives (nested too).

The regex is compiled with RE2 (:mod:`.regexes`), and braces become alternations rather than being
expanded: a model's ``*a*a*a*a*a*a*a*b`` or ``{a,b}{a,b}...`` costs time linear in the path, where
Python's ``re`` backtracked for minutes and brace expansion grew exponentially.

>>> bool(glob_regex("src/**/*.{py,md}").fullmatch("src/a/b/c.md"))
True
"""

from __future__ import annotations

import re

from .regexes import Regex, compile_glob_regex

__all__ = ["expand_braces", "glob_regex", "translate"]

MAX_ALTERNATIVES = 1000
""":func:`expand_braces` refuses to produce more patterns than this."""


def expand_braces(pattern: str) -> list[str]:
    """``*.{py,md}`` -> ``['*.py', '*.md']`` (one level, repeated left to right).

    ``ValueError`` beyond :data:`MAX_ALTERNATIVES` patterns (``{a,b}`` repeated 20 times is a
    million); :func:`glob_regex` does not expand, it uses alternations.
    """
    out: list[str] = []
    todo = [pattern]
    while todo:
        p = todo.pop()
        m = re.search(r"\{([^{}]*,[^{}]*)\}", p)
        if m is None:
            out.append(p)
        else:
            head, tail = p[: m.start()], p[m.end() :]
            todo.extend(head + alt + tail for alt in reversed(m.group(1).split(",")))
        if len(out) + len(todo) > MAX_ALTERNATIVES:
            raise ValueError(f"{pattern!r} expands to more than {MAX_ALTERNATIVES} patterns")
    return out


def _braces(pattern: str) -> tuple[dict[int, int], set[int]]:
    """The brace pairs that hold a comma at their own level (``{open: close}``), and those commas."""
    pairs: dict[int, int] = {}
    commas: set[int] = set()
    stack: list[tuple[int, list[int]]] = []  # (open index, commas at its level)
    for i, c in enumerate(pattern):
        if c == "{":
            stack.append((i, []))
        elif c == "," and stack:
            stack[-1][1].append(i)
        elif c == "}" and stack:
            start, level = stack.pop()
            if level:
                pairs[start] = i
                commas.update(level)
    return pairs, commas


def translate(pattern: str) -> str:
    """One glob as a regex over ``/``-separated paths: ``**`` spans directories, ``{a,b}`` alternates."""
    pairs, commas = _braces(pattern)
    closes = set(pairs.values())
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
        if i in pairs:
            out.append("(?:")
        elif i in closes:
            out.append(")")
        elif i in commas:
            out.append("|")
        elif c == "*":
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


def glob_regex(pattern: str) -> Regex:
    """The compiled regex for ``fullmatch`` of whole relative paths against ``pattern``.

    :class:`~subagents.exceptions.ToolError` if the engine cannot take it (a glob far too large).
    """
    return compile_glob_regex(translate(pattern))
