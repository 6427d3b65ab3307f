"""The values of a definition's front matter, checked: each wrong one is a :class:`DefinitionError` naming the
key and the value, at load time (a definition that loads can be spawned as written).

>>> mode("bypassPermissions", "permissionMode", "demo")
'yolo'
>>> number(float("nan"), "max_cost_usd", "demo", whole=False)
Traceback (most recent call last):
...
subagents.exceptions.DefinitionError: demo: 'max_cost_usd' must be a positive number, got nan
"""

from __future__ import annotations

import math
import os
import re
import reprlib
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..authority.names import MODES, canonical_mode
from ..exceptions import DefinitionError
from ..limits import MAX_TIMEOUT_S, MAX_TURNS

__all__ = ["MAX_FILE_BYTES", "MAX_FRONT_MATTER", "MAX_NAME", "MAX_TIMEOUT_S", "MAX_TURNS", "agent_name", "denials",
           "isolation", "mode", "model_name", "name_list", "number", "read_text", "shown", "small", "suggest", "text",
           "yaml_number"]

MAX_FILE_BYTES = 1024 * 1024
"""A definition file larger than this is skipped: it is a prompt, not a data set."""
MAX_FRONT_MATTER = 64 * 1024
"""The largest front matter (the keys between the ``---`` lines; the prompt below may fill the file): more is no
definition, and pure-Python YAML would take seconds to read it on every command."""
MAX_NAME = 64
"""The longest agent name (it is typed in permission rules and shown in every listing)."""
_SCIENTIFIC = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)[eE][-+]?\d+")
"""A float literal with an exponent, matching each digit one way only (``\\d+\\.?\\d*`` took seconds to refuse
a string of ten thousand digits, and hours for a megabyte)."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdict = 8
_REPR.maxlevel, _REPR.maxlong = 3, 40


def shown(value: Any) -> str:
    """``repr(value)`` cut short: a YAML alias bomb (lists of lists of aliases, 9**12 strings) or a megabyte of text
    in a message would take minutes and gigabytes to print in full."""
    try:
        out = _REPR.repr(value)
    except ValueError:  # an int past Python's digit limit
        return f"<a {type(value).__name__} too large to show>"
    return out if len(out) <= 200 else out[:196] + "...."


def small(value: Any, key: str, source: str, *, most: int = 10_000) -> Any:
    """``value`` if it holds at most ``most`` items counted through every list and mapping (a YAML alias counted
    each time it is used): a value that is read item by item, whose error message shows it, cannot be a bomb of
    aliases (``[*a, *a, ...]`` nine deep: 9**9 items from a few lines) or a list that holds itself."""
    todo, seen = [value], 0
    while todo:
        v = todo.pop()
        seen += 1
        if seen > most:
            raise DefinitionError(f"{source}: '{key}' holds over {most} items (YAML aliases repeated?); "
                                  "write it out plainly")
        if isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
    return value


def denials(names: list[str], key: str, source: str) -> list[str]:
    """``disallowed_tools`` names or patterns (``write_*``), none a permission rule: the fence denies whole tools, so
    Claude Code's ``Bash(rm:*)`` would deny nothing and leave the tool allowed."""
    for n in names:
        if not n.startswith("mcp__") and any(c in n for c in "()"):
            raise DefinitionError(f"{source}: '{key}' entry {shown(n)} is a permission rule, and a definition's "
                                  f"'{key}' denies whole tools (names or patterns such as write_*), so it would deny "
                                  "nothing; deny the tool by name, or put the rule in [permissions] deny of the "
                                  "config")
    return names


def agent_name(name: Any, source: str) -> str:
    """A name of letters, digits, ``-``, ``_`` and ``.`` (starting with a letter or digit), at most :data:`MAX_NAME`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise DefinitionError(f"{source}: agent name {shown(name)} is missing or invalid; "
                              "use letters, digits, '-', '_' or '.'")
    if len(name) > MAX_NAME:
        raise DefinitionError(f"{source}: agent name {name[:20]!r}... is longer than {MAX_NAME} characters")
    return name


def name_list(value: Any, key: str, source: str, *, optional: bool = False) -> list[str] | None:
    """A list (or tuple) of names made in Python; a string is refused (its letters would be the names:
    ``disallowed_tools="bash"`` would deny ``b``, ``a``, ``s`` and ``h``, and leave ``bash`` allowed)."""
    if value is None and optional:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise DefinitionError(f"{source}: '{key}' must be a list of names, got {shown(value)}")
    return list(value)


def text(value: Any, key: str, source: str) -> str:
    """A scalar as text; a mapping, a list or a YAML boolean (``yes``, ``on``) is refused."""
    if isinstance(value, bool):
        raise DefinitionError(f"{source}: '{key}' must be text, got {value!r} (quote it)")
    if isinstance(value, (dict, list, tuple, set)):
        raise DefinitionError(f"{source}: '{key}' must be text, got {shown(value)}")
    return str(value)


def model_name(value: Any, key: str, source: str) -> str:
    """A model string (or ``inherit``), not empty."""
    if not isinstance(value, str) or not value.strip():
        raise DefinitionError(f"{source}: '{key}' must be 'inherit' or a model string, got {shown(value)}")
    return value.strip()


def mode(value: Any, key: str, source: str) -> str:
    """Our name of a permission mode (Claude Code's are accepted); an unknown one is refused here, not at spawn."""
    try:
        if isinstance(value, str):
            return canonical_mode(value.strip())
    except ValueError:
        pass
    raise DefinitionError(f"{source}: '{key}' must be one of {', '.join(MODES)} "
                          f"(or Claude Code's acceptEdits, bypassPermissions), got {shown(value)}")


def isolation(value: Any, key: str, source: str) -> str | None:
    """``worktree``, or ``None`` for ``none``: anything else would run the agent unisolated without a word."""
    v = value.strip().lower() if isinstance(value, str) else value
    if v == "worktree":
        return "worktree"
    if v in ("none", ""):
        return None
    raise DefinitionError(f"{source}: '{key}' must be 'worktree' (or 'none'), got {shown(value)}")


def number(value: Any, key: str, source: str, *, whole: bool, most: float | None = None) -> float | int:
    """A positive (whole) number of at most ``most``; ``nan`` and ``inf`` are refused (a limit nothing reaches is
    no limit)."""
    ok = isinstance(value, int) if whole else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
        kind = "a positive whole number" if whole else "a positive number"
        hint = (" (write it without an exponent, e.g. 1000 for 1e3)"
                if isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()) else "")
        raise DefinitionError(f"{source}: '{key}' must be {kind}, got {shown(value)}{hint}")
    if most is not None and value > most:
        raise DefinitionError(f"{source}: '{key}' must be at most {most:.0f}, got {shown(value)}")
    return int(value) if whole else float(value)


def yaml_number(value: Any, whole: bool) -> Any:
    """``value``, or the number a YAML 1.1 reader left as text: PyYAML reads ``1e3`` (no dot, no exponent sign)
    as a string, where YAML 1.2 and every author mean 1000. Any other value is returned unchanged (and
    :func:`number` refuses what is no number); ``1.5e0`` for a whole number stays text, so the message shows it."""
    if isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
        try:
            n = float(value)
        except (ValueError, OverflowError):  # pragma: no cover - the pattern is a float literal
            return value
        if not whole:
            return n
        if math.isfinite(n) and n == int(n):
            return int(n)
    return value


def suggest(key: str, known: Iterable[str]) -> str | None:
    """The known key ``key`` looks like a misspelling of (compared without case, ``-`` and ``_``)."""
    import difflib  # lazy: only when a definition has a key of its own

    def norm(k: str) -> str:
        return k.replace("-", "").replace("_", "").lower()

    by_norm = {norm(k): k for k in known}
    close = difflib.get_close_matches(norm(key), list(by_norm), n=1, cutoff=0.8)
    return by_norm[close[0]] if close else None


def read_text(path: Path) -> str:
    """The file's text; a :class:`DefinitionError` naming it when it is no regular, readable, UTF-8 file of at
    most :data:`MAX_FILE_BYTES` (a FIFO is never opened: reading one would block the loader forever)."""
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise DefinitionError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise DefinitionError(f"{path}: is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise DefinitionError(f"{path}: is {st.st_size / 2**20:.1f} MB; an agent definition may be at most "
                                  f"{MAX_FILE_BYTES // 2**20} MB")
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise DefinitionError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) > MAX_FILE_BYTES:
        raise DefinitionError(f"{path}: is over {MAX_FILE_BYTES // 2**20} MB; an agent definition may be at most "
                              f"{MAX_FILE_BYTES // 2**20} MB")
    try:
        return data.decode("utf-8-sig")  # a byte order mark (Windows editors) is no part of the text
    except UnicodeDecodeError:
        raise DefinitionError(f"{path}: is not UTF-8 text; save it as UTF-8") from None
