"""Front matter as its authors meant it: strict YAML first, then a lenient reading of plain ``key: value`` lines.

Agent files written for Claude Code often hold an unquoted ``: `` inside a one-line value
(``description: Use when: 'GDPR', ...``), which strict YAML rejects ("mapping values are not allowed
here").  When the whole block fails, :func:`load_front_matter` reads it key by key: each top-level
``key:`` line with the indented or ``- item`` lines below it is parsed as YAML on its own, and a key
whose plain value YAML still rejects keeps the raw text as a string (a broken ``[list`` or quoted
string stays an error).  Lists in ``[a, b]`` or ``- a`` form
stay lists.  The lines read leniently are returned so the caller can warn once, naming them.

>>> meta, lenient = load_front_matter("name: a\\ndescription: Use when: 'GDPR', audits\\ntools: [Read, Grep]")
>>> meta["description"], meta["tools"], lenient
("Use when: 'GDPR', audits", ['Read', 'Grep'], [2])
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FrontMatterError", "load_front_matter", "safe_load"]

_NOT_PLAIN = frozenset("[{\"'|>&*!%@`")  # a value starting so is not a plain scalar: no lenient reading
_KEY_LINE = re.compile(r"\A([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?\Z")
_UNBUILT = (ValueError, KeyError, AttributeError, TypeError, OverflowError)
"""What PyYAML's constructors raise besides ``YAMLError`` for a value they cannot build: ``2024-02-30`` (no such
date), ``!!float abc``, ``!!bool maybe``, ``!!timestamp x``, an integer of over 4,300 digits."""


def _loader() -> Any:
    """PyYAML's safe loader, libyaml's (C, ~10x faster on a crafted 64 KB block; nesting capped at 1,000) when
    PyYAML was built with it, as its wheels are."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with the fastest safe loader (:func:`_loader`)."""
    import yaml

    return yaml.load(text, Loader=_loader())  # a safe loader


class FrontMatterError(ValueError):
    """The front matter is neither valid YAML nor plain ``key: value`` lines (the message says where)."""


def load_front_matter(text: str, *, first_line: int = 1, lines: dict[str, int] | None = None
                      ) -> tuple[dict[str, Any], list[int]]:
    """The front matter's keys and the lines that only the lenient reading accepted (``text`` starts on the
    file's line ``first_line``; the numbers in errors count the same way).  ``lines``, when given, receives
    each top-level key's line.

    Raises :class:`FrontMatterError` when neither reading makes sense of it, it is not a mapping, or a key
    is given twice (YAML forbids it; Claude Code's parser refuses it too).
    """
    import yaml  # lazy: only when definition files are read

    found: dict[str, int] = {} if lines is None else lines
    loader = None
    try:
        loader = _loader()(text)  # (a reader that refuses control characters)
        node = loader.get_single_node()
        if isinstance(node, yaml.MappingNode):
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    _note_key(found, str(key.value), key.start_mark.line + first_line)
        meta = None if node is None else loader.construct_document(node)
    except FrontMatterError:  # a key given twice
        raise
    except yaml.reader.ReaderError as e:  # a control character: no lenient reading (its line splitting differs)
        line = first_line + text.count("\n", 0, e.position)
        raise FrontMatterError(f"invalid YAML front matter: line {line}: {_why(e)}") from None
    except (yaml.YAMLError, *_UNBUILT) as strict:
        if _too_deep(strict):
            raise FrontMatterError("the front matter is nested too deeply to read") from None
        found.clear()
        return _lenient(text, _why(strict), first_line, found)
    except RecursionError:  # brackets nested thousands deep: no definition, and no traceback
        raise FrontMatterError("the front matter is nested too deeply to read") from None
    finally:
        if loader is not None:
            loader.dispose()
    if meta is None:
        return {}, []
    if not isinstance(meta, dict):
        raise FrontMatterError("the front matter must be a mapping of keys to values (key: value lines)")
    return meta, []


def _why(e: Exception) -> str:
    """The first line of what YAML said (a constructor's own error says which value it could not build)."""
    import yaml

    if isinstance(e, yaml.YAMLError):
        return str(e).splitlines()[0]
    return f"a value YAML cannot build ({type(e).__name__}: {str(e)[:100]})"


def _too_deep(e: Exception) -> bool:
    """libyaml's refusal of flow collections nested over 1,000 deep (PyYAML's own loader: ``RecursionError``)."""
    return getattr(e, "problem", None) == "exceeded maximum nesting depth"


def _note_key(lines: dict[str, int], key: str, n: int) -> None:
    """Record ``key``'s line; a key given twice is an error naming both lines."""
    if key in lines:
        raise FrontMatterError(f"key {key[:80]!r} is given twice (lines {lines[key]} and {n}); keep one")
    lines[key] = n


def _blocks(text: str, strict: str, first_line: int) -> list[tuple[int, str, list[str]]]:
    """Top-level ``key:`` lines (line number, key, first value) with their continuation lines."""
    blocks: list[tuple[int, str, list[str]]] = []
    for n, raw in enumerate(text.splitlines(), first_line):
        line = raw.rstrip("\r")
        if line.startswith("#"):
            continue  # a comment line
        if not line.strip():
            if blocks:
                blocks[-1][2].append("")
            continue
        if line[0] in " \t" or line.startswith("- "):
            if not blocks:
                raise FrontMatterError(f"invalid YAML front matter: line {n}: {strict}")
            blocks[-1][2].append(line)
            continue
        m = _KEY_LINE.match(line)
        if m is None:
            raise FrontMatterError(f"invalid YAML front matter: line {n} is not a 'key: value' line "
                                   f"({line[:60]!r}); strict YAML said: {strict}")
        blocks.append((n, m.group(1), [m.group(2) or ""]))
    return blocks


def _lenient(text: str, strict: str, first_line: int, found: dict[str, int]) -> tuple[dict[str, Any], list[int]]:
    import yaml

    meta: dict[str, Any] = {}
    lenient: list[int] = []
    for n, key, lines in _blocks(text, strict, first_line):
        _note_key(found, key, n)
        while lines and not lines[-1].strip():
            lines.pop()
        try:
            value = safe_load(f"{key}: " + "\n".join(lines))
            if not isinstance(value, dict) or key not in value:
                raise yaml.YAMLError("not a single key")
            meta[key] = value[key]
        except RecursionError:
            raise FrontMatterError(f"the front matter is nested too deeply to read (line {n})") from None
        except (yaml.YAMLError, *_UNBUILT) as e:
            if _too_deep(e):
                raise FrontMatterError(f"the front matter is nested too deeply to read (line {n})") from None
            if lines[0].lstrip()[:1] in _NOT_PLAIN:  # a broken flow list, quoted string, block scalar...
                why = strict if isinstance(e, yaml.YAMLError) else _why(e)
                raise FrontMatterError(f"invalid YAML front matter: line {n}: {why}") from None
            lenient.append(n)
            meta[key] = _raw(lines)
    return meta, lenient


def _raw(lines: list[str]) -> Any:
    """A value strict YAML rejected: ``- a`` lines as a list, else the text (folded, outer quotes removed)."""
    rest = [ln.strip() for ln in lines[1:] if ln.strip()]
    if not lines[0].strip() and rest and all(ln.startswith("- ") for ln in rest):
        return [_unquote(ln[2:].strip()) for ln in rest]
    return _unquote(" ".join(ln.strip() for ln in lines if ln.strip()))


def _unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s
