"""JSON schemas for tools: derive them from type hints; validate model arguments against them.

Validation lives in :mod:`subagents.tools.validation` (re-exported here): each schema is checked and
compiled once, a bad one is a :class:`~subagents.exceptions.DefinitionError` naming the tool
(:func:`check_schema`), and bad arguments are a sentence for the model (:func:`validate`).

Numbers from a model are checked even where the schema says nothing about them: they must be
finite (Python's ``json`` reads ``NaN`` and ``Infinity``) and within ``±2**53`` (:data:`MAX_MAGNITUDE`,
the integers a JSON number holds exactly), plus the schema's own ``minimum``/``maximum``.  A
parameter gets bounds with ``Annotated[int, Range(1, 100)]``:

>>> def f(n: Annotated[int, Range(1, 100)] = 1) -> None: ...
>>> schema = schema_for_function(f)[1]
>>> schema["properties"]["n"]
{'type': 'integer', 'minimum': 1, 'maximum': 100, 'default': 1}
>>> validate({"n": 1000}, schema)
'arguments.n must be an integer from 1 to 100, got 1000'
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from .validation import MAX_MAGNITUDE, check_schema, show_number, validate

__all__ = ["MAX_MAGNITUDE", "Range", "check_schema", "parse_docstring", "schema_for_function", "schema_for_type",
           "show_number", "validate"]

@dataclass(frozen=True, slots=True)
class Range:
    """Bounds of a numeric parameter, as ``Annotated`` metadata: ``Annotated[float, Range(0.01, 3600)]``."""

    minimum: int | float | None = None
    maximum: int | float | None = None

_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}


def schema_for_type(tp: Any) -> dict[str, Any]:  # noqa: C901 - a flat dispatch on type shapes
    """The JSON schema of a Python type hint."""
    if tp in _SIMPLE:
        return dict(_SIMPLE[tp])
    if tp is Any or tp is object:
        return {}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Annotated:
        bounded = schema_for_type(args[0])
        for meta in tp.__metadata__:
            if isinstance(meta, Range):
                bounded.update({k: v for k, v in (("minimum", meta.minimum), ("maximum", meta.maximum))
                                if v is not None})
        return bounded
    if origin is Literal:
        values = list(args)
        kinds = {type(v) for v in values}
        out: dict[str, Any] = {"enum": values}
        if len(kinds) == 1 and next(iter(kinds)) in _SIMPLE:
            out["type"] = _SIMPLE[next(iter(kinds))]["type"]
        return out
    if origin in (Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1 and len(args) == 2:  # Optional[X]: null is accepted too
            inner = schema_for_type(non_none[0])
            if isinstance(inner.get("type"), str):
                inner["type"] = [inner["type"], "null"]
                return inner
            return {"anyOf": [inner, {"type": "null"}]}
        return {"anyOf": [schema_for_type(a) for a in args]}
    if origin in (list, Sequence, tuple, set, frozenset) or tp in (list, tuple, set):
        item = args[0] if args else Any
        return {"type": "array", "items": schema_for_type(item)} if item is not Any else {"type": "array"}
    if origin in (dict, Mapping) or tp is dict:
        val = args[1] if len(args) == 2 else Any
        out = {"type": "object"}
        if val is not Any:
            out["additionalProperties"] = schema_for_type(val)
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        required = sorted(getattr(tp, "__required_keys__", hints.keys()))
        return {
            "type": "object",
            "properties": {k: schema_for_type(v) for k, v in hints.items()},
            "required": required,
            "additionalProperties": False,
        }
    raise TypeError(f"cannot derive a JSON schema for type {tp!r}; use str, int, float, bool, list, dict, "
                    "Literal, a TypedDict or an Enum, or pass parameters= explicitly")


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_PARAM = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _ARGS_HEADER.match(lines[i]):
        if _SECTION.match(lines[i]):
            break
        desc.append(lines[i])
        i += 1
    if i < len(lines) and _ARGS_HEADER.match(lines[i]):
        i += 1
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if _SECTION.match(line) and not line.startswith((" ", "\t")):
                break
            m = _PARAM.match(line)
            if m and (line.startswith(("    ", "\t", "  ")) or current is None):
                current = m.group(1).lstrip("*")
                params[current] = m.group(3).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
            i += 1
    return "\n".join(desc).strip(), params


def schema_for_function(fn: Callable[..., Any], *, skip: Sequence[str] = ()) -> tuple[str, dict[str, Any]]:
    """(description, parameters schema) for a function, from its signature and docstring."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    desc, param_docs = parse_docstring(fn.__doc__)
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, p in sig.parameters.items():
        if name in skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if name not in hints:
            raise TypeError(f"tool parameter {name!r} of {fn.__qualname__} has no type hint; add one")
        s = schema_for_type(hints[name])
        if name in param_docs:
            s["description"] = param_docs[name]
        if p.default is p.empty:
            required.append(name)
        elif p.default is not None and isinstance(p.default, (str, int, float, bool)):
            s["default"] = p.default
        props[name] = s
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return desc, schema
