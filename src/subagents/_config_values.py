"""Value checking for :mod:`subagents.config`: the type names, conversion and the wording of errors."""

from __future__ import annotations

import difflib
import json
from typing import Any

__all__ = ["check_value", "hint", "quote", "show"]


def check_value(value: Any, expected: str) -> Any:
    """The value converted to its type, or raise ``ValueError`` (the caller words the message).

    Type names: ``string``, ``boolean``, ``list of strings``, ``one of 'a', 'b'``, and
    ``[non-negative|positive] [integer|number]``.
    """
    if expected == "string":
        if isinstance(value, str):
            return value
    elif expected == "boolean":
        if isinstance(value, bool):
            return value
    elif expected == "list of strings":
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    elif expected.startswith("one of"):
        if isinstance(value, str) and f"'{value}'" in expected:
            return value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        in_range = value > 0 or (value == 0 and expected.startswith("non-negative"))
        if in_range and "integer" not in expected:
            return float(value)
        if in_range and isinstance(value, int):
            return value
    raise ValueError(expected)


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array" if not value or not all(isinstance(v, str) for v in value) else json.dumps(value)
    return repr(value)


def quote(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else json.dumps(name)


def hint(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
