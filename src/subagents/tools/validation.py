"""Checking a model's tool arguments against the tool's JSON schema.

Each schema is checked against the JSON-schema vocabulary and compiled once (``fastjsonschema``
turns it into Python code; compiled validators are cached per schema object), so a call costs about
a microsecond.  A bad schema is a :class:`~subagents.exceptions.DefinitionError` naming the tool
and what is wrong (:func:`check_schema`, at registration); bad arguments are a sentence for the
model, never an exception (:func:`validate`).

On top of the schema, numbers from a model must be finite (Python's ``json`` reads ``NaN`` and
``Infinity``) and within ``±2**53`` (:data:`MAX_MAGNITUDE`, the integers a JSON number holds
exactly), and an ``integer`` is an ``int`` (``1.0`` is refused: a tool slicing with it would fail).
The messages come from a small reader of the common keywords (type, enum, anyOf, properties,
required, additionalProperties, items, minimum/maximum); other keywords (pattern, minLength, ...)
are enforced by the compiled validator and worded by it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

from ..exceptions import DefinitionError

__all__ = ["MAX_MAGNITUDE", "Check", "check_schema", "compiled", "show_number", "validate"]

MAX_MAGNITUDE = 2**53
"""No number a model passes may be larger than this in magnitude (nor NaN or infinite)."""

_TYPE_NAMES = ("array", "boolean", "integer", "null", "number", "object", "string")
_SCHEMA: dict[str, Any] = {"$ref": "#"}
_SCHEMAS: dict[str, Any] = {"type": "array", "items": {"$ref": "#"}, "minItems": 1}
_NUMBER: dict[str, Any] = {"type": "number"}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
_SCHEMA_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"$ref": "#"}}
_META: dict[str, Any] = {
    "type": ["object", "boolean"],
    "properties": {
        "type": {"anyOf": [{"enum": list(_TYPE_NAMES)},
                           {"type": "array", "items": {"enum": list(_TYPE_NAMES)}, "minItems": 1}]},
        "properties": _SCHEMA_MAP, "patternProperties": _SCHEMA_MAP, "definitions": _SCHEMA_MAP,
        "$defs": _SCHEMA_MAP,
        "additionalProperties": _SCHEMA, "additionalItems": _SCHEMA, "contains": _SCHEMA, "not": _SCHEMA,
        "propertyNames": _SCHEMA, "if": _SCHEMA, "then": _SCHEMA, "else": _SCHEMA,
        "items": {"anyOf": [{"$ref": "#"}, {"type": "array", "items": {"$ref": "#"}}]},
        "anyOf": _SCHEMAS, "allOf": _SCHEMAS, "oneOf": _SCHEMAS,
        "required": {"type": "array", "items": {"type": "string"}},
        "enum": {"type": "array"},
        "minimum": _NUMBER, "maximum": _NUMBER, "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "exclusiveMinimum": {"type": ["number", "boolean"]}, "exclusiveMaximum": {"type": ["number", "boolean"]},
        "minLength": _COUNT, "maxLength": _COUNT, "minItems": _COUNT, "maxItems": _COUNT,
        "minProperties": _COUNT, "maxProperties": _COUNT,
        "uniqueItems": {"type": "boolean"}, "pattern": {"type": "string"}, "format": {"type": "string"},
        "title": {"type": "string"}, "description": {"type": "string"},
        "$ref": {"type": "string", "pattern": "^#"},  # local references only: compiling never fetches a URL
    },
}
"""The JSON-schema vocabulary (draft 7, as far as tool schemas use it): what :func:`check_schema` accepts."""
_meta_check: Callable[[Any], Any] | None = None


Check = Callable[..., "str | None"]
"""A compiled validator: ``check(value, path="arguments")`` is ``None`` or the first error, as a sentence."""


def _checker(schema: Mapping[str, Any]) -> tuple[Check, str | None]:
    """The validator of ``schema`` and what is wrong with the schema itself (then every call says so)."""
    try:
        fn = _compile(schema)
    except DefinitionError as e:
        refusal = f"the tool cannot be called: its parameters schema is invalid: {e}"

        def refuse(value: Any, path: str = "arguments") -> str | None:
            return refusal

        return refuse, str(e)
    value_error = fastjsonschema.JsonSchemaValueException
    floats = "integer" not in repr(schema)  # a float can only be wrong where an integer is wanted (1.0)

    def check(value: Any, path: str = "arguments") -> str | None:
        try:
            fn(value)
        except value_error as e:
            return _explain(value, schema, path) or _reworded(e.message, path)
        except (TypeError, ValueError, RecursionError) as e:  # a value no JSON document holds
            return _explain(value, schema, path) or f"{path} could not be checked ({type(e).__name__}: {e})"
        try:
            plain = _plain(value, floats)
        except RecursionError:
            return f"{path} is nested too deeply to check; send flatter arguments"
        return None if plain else _explain(value, schema, path)

    return check, None


_CACHE: dict[int, tuple[Mapping[str, Any], Check, str | None]] = {}
"""id(schema) -> (schema, its validator, its fault); the schema is held, so its id is not reused."""


def _entry(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], Check, str | None]:
    e = _CACHE.get(id(schema))
    if e is None or e[0] is not schema:
        if len(_CACHE) >= 4096:
            _CACHE.clear()
        e = _CACHE[id(schema)] = (schema, *_checker(schema))
    return e


def compiled(schema: Mapping[str, Any]) -> Check:
    """The validator of ``schema``, compiled on first use and then cached for this schema object.

    Schemas are compiled once: change a tool's schema by giving it a new dict, never by editing it.
    """
    return _entry(schema)[1]


_VOUCHED: dict[int, Mapping[str, Any]] = {}
"""id(schema) -> schema: the package's own tool schemas (see :func:`vouch`); held, so an id is not reused."""


def vouch(*schemas: Mapping[str, Any]) -> None:
    """Mark schemas this package ships (its built-in tools'; ``tests/tools/test_vouched_schemas.py`` compiles every
    one): :func:`check_schema` lets them through without compiling them, and each is compiled at its tool's first
    call.  A process's first Runtime compiled all ~30 as it opened (~35 ms of its ~70, for a command line run)."""
    for s in schemas:
        _VOUCHED[id(s)] = s


def check_schema(schema: Any, *, tool: str) -> None:
    """Raise :class:`DefinitionError` naming ``tool`` and the fault if ``schema`` is not a usable JSON schema."""
    if _VOUCHED.get(id(schema)) is schema:
        return
    if not isinstance(schema, Mapping):
        raise DefinitionError(f"tool {tool!r}: its parameters must be a JSON schema (a dict), "
                              f"got {type(schema).__name__}")
    fault = _entry(schema)[2]
    if fault is not None:
        raise DefinitionError(f"tool {tool!r} has an invalid parameters schema: {fault}")


def validate(value: Any, schema: Mapping[str, Any], path: str = "arguments") -> str | None:
    """Return the first error in ``value`` against ``schema`` as a sentence, or ``None``.  Never raises."""
    e = _CACHE.get(id(schema))
    if e is None or e[0] is not schema:
        e = _entry(schema)
    return e[1](value, path)


# -- compiling ------------------------------------------------------------------------------------
def _compile(schema: Mapping[str, Any]) -> Callable[[Any], Any]:
    global _meta_check
    _lint(schema, "parameters")
    if _meta_check is None:
        _meta_check = fastjsonschema.compile(_META, use_default=False, use_formats=False)
    try:
        _meta_check(schema)
    except fastjsonschema.JsonSchemaValueException as e:
        raise DefinitionError(_reworded(e.message, "parameters")) from None
    try:
        fn = fastjsonschema.compile(dict(schema), use_default=False, use_formats=False)
        _on_re2(fn)
        return fn
    except fastjsonschema.JsonSchemaDefinitionException as e:
        raise DefinitionError(str(e)) from None
    except re.error as e:
        raise DefinitionError(f"a pattern is not a valid regular expression ({e})") from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:
        raise DefinitionError(f"{type(e).__name__}: {e}") from None


def _on_re2(fn: Callable[[Any], Any]) -> None:
    """The schema's ``pattern`` / ``patternProperties`` matched by RE2 (linear time) rather than Python's ``re``:
    a schema may come from a model (``output_schema``) or an MCP server, and ``^(a+)+$`` froze the event loop.
    (The generated code only calls ``.search`` on them, from the compiled function's own global state.)"""
    pats = getattr(fn, "__globals__", {}).get("REGEX_PATTERNS")
    if not pats:
        return
    from .regexes import _options, _re2

    for p in list(pats):
        try:
            pats[p] = _re2().compile(p, _options(never_nl=False))
        except _re2().error as e:
            raise DefinitionError(f"pattern {p!r} cannot be used: {e} (patterns run on RE2: no lookaround or "
                                  "backreferences)") from None


def _lint(schema: Any, where: str) -> None:
    """The usual slip, said plainly: an unknown type name (``"str"``, ``"int"``, ``"strnig"``)."""
    if not isinstance(schema, Mapping):
        return
    types = schema.get("type")
    for t in types if isinstance(types, list) else [types]:
        if isinstance(t, str) and t not in _TYPE_NAMES:
            close = difflib.get_close_matches({"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                                               "dict": "object", "list": "array"}.get(t, t), _TYPE_NAMES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise DefinitionError(f"{where}.type: unknown type {t!r}{hint}; the JSON types are "
                                  f"{', '.join(_TYPE_NAMES)}")
    for key in ("properties", "patternProperties", "definitions", "$defs"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            for name, s in sub.items():
                _lint(s, f"{where}.{key}.{name}")
    for key in ("items", "additionalProperties", "not"):
        _lint(schema.get(key), f"{where}.{key}")
    for key in ("anyOf", "allOf", "oneOf"):
        subs = schema.get(key)
        if isinstance(subs, list):
            for i, s in enumerate(subs):
                _lint(s, f"{where}.{key}[{i}]")


def _reworded(message: str, path: str) -> str:
    """fastjsonschema says ``data.x must ...``; we say ``arguments.x must ...``."""
    return path + message[4:] if message.startswith("data") else message


# -- numbers and messages -------------------------------------------------------------------------
def _plain(value: Any, floats: bool) -> bool:
    """Whether every number in ``value`` is within ±MAX_MAGNITUDE and an ``int`` (or any finite number when
    ``floats``): the common case, nothing to explain.  NaN fails both comparisons, infinities one."""
    t = type(value)
    if t is dict:
        items: Any = value.values()
    elif t is list:
        items = value
    elif t is int or (floats and t is float):
        return bool(-MAX_MAGNITUDE <= value <= MAX_MAGNITUDE)
    else:
        return t is not float
    for v in items:
        t = type(v)
        if t is str or t is bool or v is None:
            continue
        if t is int or (floats and t is float):
            if -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE:
                continue
            return False
        if (t is dict or t is list) and _plain(v, floats):
            continue
        return False
    return True


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _explain(value: Any, schema: Any, path: str) -> str | None:
    """The first error the common keywords find, as a sentence (``None``: none they can word)."""
    try:
        return _walk(value, schema, path)
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
        return None


def _walk(value: Any, schema: Any, path: str) -> str | None:  # noqa: C901 - one branch per keyword
    if not isinstance(schema, Mapping):
        return f"{path} is not allowed here" if schema is False else _scan(value, path)
    t = schema.get("type")
    if t is not None:
        ok = any(_TYPES[x](value) for x in t) if isinstance(t, list) else _TYPES[t](value)
        if not ok:
            return f"{path} must be {t if isinstance(t, str) else ' or '.join(t)}, got {_kind(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} must be one of {', '.join(repr(e) for e in schema['enum'])}, got {value!r}"
    if "anyOf" in schema:
        errs = [_walk(value, s, path) for s in schema["anyOf"]]
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
                err = _walk(v, props[key], f"{path}.{key}")
            elif extra is False:
                allowed = ", ".join(props) or "none"
                return f"{path} has an unexpected property {key!r} (allowed: {allowed})"
            elif isinstance(extra, Mapping):
                err = _walk(v, extra, f"{path}.{key}")
            else:
                err = _scan(v, f"{path}.{key}")
            if err:
                return err
    elif isinstance(value, list):
        if isinstance(most := schema.get("maxItems"), int) and len(value) > most:
            return None  # not walked (a million items took seconds): the compiled check's own message says it
        items = schema.get("items")
        for i, v in enumerate(value):
            err = _walk(v, items, f"{path}[{i}]") if isinstance(items, Mapping) else _scan(v, f"{path}[{i}]")
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
