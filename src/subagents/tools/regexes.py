"""Regular expressions from models, compiled with RE2: linear time, whatever the pattern.

Python's ``re`` backtracks: ``(a+)+$`` on a long line of ``a`` runs for ages, holding the GIL (so
the event loop freezes with it).  RE2 (``google-re2``) matches in time linear in the text, and
releases the GIL while it does.  It does not support what needs backtracking — backreferences,
lookahead and lookbehind, possessive quantifiers, atomic groups — and :func:`compile_line_regex`
says so, with what to do instead.

Patterns are matched line by line (``grep``): ``^`` and ``$`` are a line's start and end, ``.``,
``\\s`` and negated classes never match a line break, and Python's ``\\A``, ``\\Z`` (and RE2's
``\\z``) are taken as the line's start and end too.

>>> rx = compile_line_regex(r"(a+)+$")
>>> rx.search(b"aaaa\\nxa\\n").span()
(0, 4)
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, Protocol

from ..exceptions import ToolError

__all__ = ["Regex", "compile_glob_regex", "compile_line_regex", "compile_source_regex"]


class Match(Protocol):
    def start(self) -> int: ...

    def groups(self) -> tuple[Any, ...]: ...

    def end(self) -> int: ...

    def span(self) -> tuple[int, int]: ...


class Regex(Protocol):
    """The part of a compiled RE2 pattern the tools use."""

    def search(self, text: Any, pos: int = ..., endpos: int = ...) -> Match | None: ...

    def fullmatch(self, text: Any, pos: int = ..., endpos: int = ...) -> Match | None: ...

    def finditer(self, text: Any, pos: int = ..., endpos: int = ...) -> Iterator[Match]: ...


@functools.cache
def _re2() -> Any:
    """The ``re2`` module (loaded with the first pattern: about 10 ms that ``import subagents`` does not pay)."""
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

    return re2


@functools.cache
def _options(*, never_nl: bool) -> Any:
    o = _re2().Options()
    o.log_errors = False  # RE2 would print every syntax error on stderr
    o.never_nl = never_nl
    return o

_UNSUPPORTED = (  # (what RE2's error starts with, the feature, what to do instead)
    ("invalid perl operator: (?=", "lookahead", "match the following text as part of the pattern"),
    ("invalid perl operator: (?!", "negative lookahead", "search for the text and filter out what must not follow"),
    ("invalid perl operator: (?<=", "lookbehind", "match the preceding text as part of the pattern"),
    ("invalid perl operator: (?<!", "lookbehind", "search for the text and filter out what must not precede"),
    ("invalid perl operator: (?>", "atomic groups", "use a plain group (?:...)"),
    ("invalid perl operator: (?P=", "backreferences", "match the repeated text explicitly"),
    ("invalid perl operator: (?P", "backreferences", "match the repeated text explicitly"),
    ("invalid perl operator: (?#", "comments", "remove the (?#...) comment"),
    ("invalid perl operator: (?x", "verbose mode (?x)", "write the pattern without spaces and comments"),
    ("bad repetition operator: ", "possessive quantifiers", "use the plain quantifier (a+ rather than a++)"),
    ("invalid repetition size", "a repetition count above 1000", "use a smaller count or +/*"),
    ("pattern too large", "more states than the engine allows", "use a shorter or simpler pattern"),
)


def _explain(pattern: str, error: str) -> str:
    if (error.startswith("invalid escape sequence: \\") and error[-1:].isdigit()) or error.endswith("\\k"):
        feature, instead = "backreferences", "match the repeated text explicitly"
    else:
        hit = next(((f, i) for start, f, i in _UNSUPPORTED if error.startswith(start)), None)
        if hit is None:
            return (f"pattern {pattern!r} is not a valid regular expression: {error}. Fix the pattern and call grep "
                    "again (grep uses RE2 syntax, which is Python's re syntax without backreferences and lookaround).")
        feature, instead = hit
    return (f"pattern {pattern!r} uses {feature}, which grep's regex engine (RE2) does not support ({error}); "
            f"{instead}, and call grep again.")


def _python_anchors(pattern: str) -> str:
    """``\\A`` -> ``^`` and ``\\Z``/``\\z`` -> ``$`` outside character classes (escaped backslashes kept)."""
    if "\\" not in pattern:
        return pattern
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            out.append({"A": "^", "Z": "$", "z": "$"}.get(nxt, c + nxt) if not in_class else c + nxt)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a ']' first in a class is a literal
                out.append("]")
                i += 1
            continue
        if c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def _message(e: Exception) -> str:
    raw = e.args[0] if e.args else ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def compile_line_regex(pattern: str) -> Regex:
    """``pattern`` compiled to search UTF-8 bytes line by line (multi-line mode, never across a line
    break); :class:`ToolError` with what to do instead when RE2 cannot compile it."""
    line_pattern = _python_anchors(pattern)
    try:
        rx: Regex = _re2().compile(("(?m)" + line_pattern).encode("utf-8", "surrogatepass"), _options(never_nl=True))
    except _re2().error as e:
        msg = _message(e).replace("(?m)" + line_pattern, line_pattern, 1)  # the prefix is ours, not the model's
        raise ToolError(_explain(pattern, msg)) from None
    return rx


def compile_glob_regex(regex: str) -> Regex:
    """A regex made from a glob (``..globbing``), for ``fullmatch`` on relative paths."""
    try:
        rx: Regex = _re2().compile(regex, _options(never_nl=False))
    except _re2().error as e:
        raise ToolError(f"the glob could not be used: {_message(e)}; simplify it (fewer alternatives or "
                        "wildcards).") from None
    return rx


def compile_source_regex(pattern: str) -> Regex:
    """One of the tools' own patterns (not a model's) in multi-line mode, e.g. ``repo_map``'s symbol patterns."""
    rx: Regex = _re2().compile("(?m)" + pattern, _options(never_nl=False))
    return rx
