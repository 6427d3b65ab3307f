"""JSON schemas for tools: derive them from type hints, validate model arguments against them.

Only the subset of JSON Schema that tool definitions use is supported (type, properties, required,
additionalProperties, items, enum, anyOf, minimum/maximum, default, description).  The validator
is a few dozen lines on purpose: it runs on every tool call and must cost microseconds.

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
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

__all__ = ["MAX_MAGNITUDE", "Range", "parse_docstring", "schema_for_function", "schema_for_type", "show_number",
           "validate"]

MAX_MAGNITUDE = 2**53
"""No number a model passes may be larger than this in magnitude (nor NaN or infinite)."""


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


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def validate(value: Any, schema: Mapping[str, Any], path: str = "arguments") -> str | None:  # noqa: C901
    """Return the first error in ``value`` against ``schema`` as a sentence, or ``None``."""
    t = schema.get("type")
    if t is not None:
        ok = any(_TYPES[x](value) for x in t) if isinstance(t, list) else _TYPES[t](value)
        if not ok:
            return f"{path} must be {t if isinstance(t, str) else ' or '.join(t)}, got {_kind(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} must be one of {', '.join(repr(e) for e in schema['enum'])}, got {value!r}"
    if "anyOf" in schema:
        errs = [validate(value, s, path) for s in schema["anyOf"]]
        if all(errs):
            return errs[0]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _check_number(value, schema, path)
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                return f"{path} is missing the required property {key!r}"
        extra = schema.get("additionalProperties", True)
        for key, v in value.items():
            if key in props:
                err = validate(v, props[key], f"{path}.{key}")
            elif extra is False:
                allowed = ", ".join(props) or "none"
                return f"{path} has an unexpected property {key!r} (allowed: {allowed})"
            elif isinstance(extra, dict):
                err = validate(v, extra, f"{path}.{key}")
            else:
                err = _scan(v, f"{path}.{key}")
            if err:
                return err
    elif isinstance(value, list):
        items = schema.get("items")
        for i, v in enumerate(value):
            err = validate(v, items, f"{path}[{i}]") if items is not None else _scan(v, f"{path}[{i}]")
            if err:
                return err
    return None


def _check_number(value: int | float, schema: Mapping[str, Any], path: str) -> str | None:
    """A number must be finite and within the schema's bounds and :data:`MAX_MAGNITUDE`."""
    lo, hi = schema.get("minimum", -MAX_MAGNITUDE), schema.get("maximum", MAX_MAGNITUDE)
    lo, hi = max(lo, -MAX_MAGNITUDE), min(hi, MAX_MAGNITUDE)
    finite = not isinstance(value, float) or math.isfinite(value)
    if finite and lo <= value <= hi:
        return None
    t = schema.get("type")
    kind = "an integer" if t == "integer" or (isinstance(t, list) and "integer" in t and "number" not in t) else (
        "a number" if finite else "a finite number")
    return f"{path} must be {kind} from {show_number(lo)} to {show_number(hi)}, got {show_number(value)}"


def _scan(value: Any, path: str) -> str | None:
    """The first number in a value the schema does not describe that :func:`_check_number` refuses."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _check_number(value, {}, path)
    if isinstance(value, dict):
        return next((e for k, v in value.items() if (e := _scan(v, f"{path}.{k}"))), None)
    if isinstance(value, list):
        return next((e for i, v in enumerate(value) if (e := _scan(v, f"{path}[{i}]"))), None)
    return None


def show_number(x: int | float) -> str:
    """A number for a message: JSON's spelling of NaN and infinities, and no 400-digit integers."""
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return f"{x:g}" if x != int(x) or abs(x) >= 1e16 else str(int(x))
    if x.bit_length() > 13_000:  # str() refuses beyond 4,300 digits
        return "an integer of more than 4,000 digits"
    text = str(abs(x))
    return str(x) if len(text) <= 40 else f"an integer of {len(text)} digits"


def _kind(v: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](v):
            return name
    return type(v).__name__
