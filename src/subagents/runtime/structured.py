"""Structured results: a run that must end with a value that validates against a schema.

``rt.run(..., output_type=Model)`` (any class with pydantic's ``model_json_schema`` and
``model_validate``, so pydantic stays optional) and ``spawn_agent(..., output_schema={...})`` (a
JSON schema, checked and compiled by :mod:`subagents.tools.validation`) give the agent one more
tool, ``final_result``, whose parameters are that schema.  The loop (:mod:`.loop`) then ends the
run only when ``final_result`` is called with arguments that validate:

- invalid arguments: a tool error saying why; the model tries again (each try is a turn, so
  ``max_turns`` bounds the retries);
- plain text with no tool call: a user message tells it to call ``final_result`` (a turn too);
- valid: the run ends; its ``text`` is the result as JSON (what a parent receives) and
  ``RunResult.output`` the validated value (the model object, or the JSON value).

A schema may be at most :data:`MAX_SCHEMA_DEPTH` levels deep and :data:`MAX_SCHEMA_CHARS` characters of JSON
(compiling one costs time on the event loop; a model's ``output_schema`` is untrusted), and must be plain JSON
(string keys, finite numbers); else :class:`UserError`.  A ``final_result`` call whose checking fails in an
unexpected way (a bug in an ``output_type``'s validator) is a tool error for the model, not a crashed run.

A schema that is not an object schema (``{"type": "array", ...}``) is wrapped as the property
``result`` of an object (tool arguments are always an object) and unwrapped again; its references to its own
root (``"#"``, ``"#/items"``) are moved under ``result`` with it.

The schema is kept with the run (:func:`stored`: in its record's ``limits``, under ``output_schema``), so a
run resumed after a restart, or after its finished tree left memory, must still end with a valid
``final_result`` (:func:`restore`).  A resumed ``output_type`` run is checked against the model's JSON
schema: its ``RunResult.output`` is then the JSON value, not a model object (the class is not stored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..exceptions import DefinitionError, UserError
from ..messages import ToolResultBlock, ToolUseBlock
from ..models.base import INVALID_ARGUMENTS_KEY, ToolSpec
from ..tools.validation import check_schema, validate

__all__ = ["FINAL_RESULT", "MAX_SCHEMA_CHARS", "MAX_SCHEMA_DEPTH", "STORED_KEY", "Expectation", "OutputSpec", "attach",
           "output_spec", "restore", "stored"]

FINAL_RESULT = "final_result"
"""The name of the tool a structured run ends with."""
STORED_KEY = "output_schema"
"""The key of a run record's ``limits`` that keeps its output schema (see :func:`stored`)."""

MAX_SCHEMA_DEPTH = 64
"""How deeply an output schema may nest (objects and arrays); pydantic models nest through ``$defs``, not depth."""
MAX_SCHEMA_CHARS = 64_000
"""How long an output schema may be, as compact JSON (compiling 64 KB of schema takes about a second)."""

_DESCRIPTION = ("Give your final result. Call this exactly once, when your work is done, with the result as the "
                "arguments; it ends your run and the caller receives the arguments as JSON. If it reports an "
                "error, fix the arguments and call it again.")
INSTRUCTION = ("\n\nThis task needs a structured result: when you are done, call the `final_result` tool with your "
               "result as its arguments (they must match its schema). Do not end with plain text; only a valid "
               "`final_result` call ends your run.")
"""Appended to the system prompt of an agent that must end with ``final_result``."""
REMINDER = ("You ended without calling `final_result`. Your run ends only with a `final_result` call whose arguments "
            "match its schema: call `final_result` now with your result.")
"""The user message an agent gets when it answers with plain text instead of calling ``final_result``."""


class OutputSpec:
    """What a structured run must end with: the ``final_result`` tool's schema and how to check a call.

    Build one with :meth:`from_type` (a pydantic-like model class) or :meth:`from_schema` (a JSON
    schema); :meth:`check` validates a call's arguments.
    """

    __slots__ = ("model_type", "schema", "source", "tool_spec", "wrapped")

    def __init__(self, schema: Mapping[str, Any], *, model_type: Any = None) -> None:
        _check_size(schema)
        self.source = dict(schema)  # as given (the record keeps this; from_schema makes the same spec again)
        wrapped = schema.get("type") != "object"
        params = dict(schema)
        if wrapped:  # its definitions stay at the top, where its "#/$defs/..." references point
            params = _rebased(params)  # "#" (its root) is now "#/properties/result"
            defs: dict[str, Any] = {k: params.pop(k) for k in ("$defs", "definitions") if k in params}
            params = {"type": "object", "properties": {"result": params}, "required": ["result"],
                      "additionalProperties": False, **defs}
        try:
            check_schema(params, tool=FINAL_RESULT)
            err = validate({}, params)  # compiles it now: a schema fastjsonschema refuses is refused here
        except DefinitionError as e:
            raise UserError(f"the output schema is not a usable JSON schema: {e}") from None
        if err is not None and err.startswith("the tool cannot be called"):
            raise UserError(f"the output schema is not a usable JSON schema: {err.split(': ', 2)[-1]}")
        self.schema = params
        self.wrapped = wrapped
        self.model_type = model_type
        self.tool_spec = ToolSpec(FINAL_RESULT, _DESCRIPTION, params)

    @classmethod
    def from_type(cls, output_type: Any) -> OutputSpec:
        """The spec of a model class: pydantic's ``BaseModel``, or any class with ``model_json_schema`` and
        ``model_validate``."""
        make = getattr(output_type, "model_json_schema", None)
        if not callable(make) or not callable(getattr(output_type, "model_validate", None)):
            raise UserError(f"output_type must be a pydantic model class (with model_json_schema and model_validate), "
                            f"got {output_type!r}; or pass a JSON schema with output_schema")
        try:
            schema = make()
        except Exception as e:  # pydantic's PydanticInvalidForJsonSchema (a field with no JSON schema), a bug
            raise UserError(f"output_type {output_type!r} has no JSON schema: {type(e).__name__}: {e}") from None
        if not isinstance(schema, Mapping):
            raise UserError(f"{output_type!r}.model_json_schema() did not return a JSON schema (a dict)")
        return cls(schema, model_type=output_type)

    @classmethod
    def from_schema(cls, schema: Any) -> OutputSpec:
        """The spec of a JSON schema (a dict); a bad schema is a :class:`UserError` saying what is wrong."""
        if not isinstance(schema, Mapping) or not schema:
            raise UserError(f"output_schema must be a JSON schema object such as {{\"type\": \"object\", "
                            f"\"properties\": {{...}}}}, got {schema!r}")
        return cls(schema)

    def check(self, arguments: Any) -> tuple[Any, str] | str:
        """``(value, value as JSON)`` when ``arguments`` validate, else what is wrong, as a sentence for the model."""
        if not isinstance(arguments, dict):
            return "the arguments of final_result must be a JSON object; call it again with your result"
        if INVALID_ARGUMENTS_KEY in arguments:
            raw = str(arguments[INVALID_ARGUMENTS_KEY])[:500]
            return f"the arguments of final_result were not valid JSON: {raw!r}; resend them as one JSON object"
        if self.model_type is not None:
            return self._check_model(arguments)
        err = validate(arguments, self.schema)
        if err is not None:
            return f"the result does not match the schema: {err}. Fix it and call final_result again."
        value = arguments["result"] if self.wrapped else arguments
        return value, json.dumps(value, ensure_ascii=False)

    def _check_model(self, arguments: dict[str, Any]) -> tuple[Any, str] | str:
        try:
            obj = self.model_type.model_validate(arguments["result"] if self.wrapped else arguments)
        except (ValueError, TypeError) as e:  # pydantic's ValidationError is a ValueError
            return f"the result does not match the schema: {_errors(e)}. Fix it and call final_result again."
        dump = getattr(obj, "model_dump_json", None)
        text = dump() if callable(dump) else json.dumps(arguments, ensure_ascii=False)
        return obj, str(text)


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # their values are data, not schemas


def _rebased(node: Any) -> Any:
    """A copy of ``node`` (a schema being wrapped as ``result``) whose references to its root (``"#"``,
    ``"#/items"``...) point under ``#/properties/result``; those into ``$defs`` / ``definitions`` stay (the
    definitions move to the top).  Recursive: :func:`_check_size` bounded the depth already."""
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and (v == "#" or (
                    v.startswith("#/") and not v.startswith(("#/$defs/", "#/definitions/")))):
                out[k] = "#/properties/result" + v[1:]
            else:
                out[k] = v if k in _DATA_KEYWORDS else _rebased(v)
        return out
    if isinstance(node, list):
        return [_rebased(v) for v in node]
    return node


def _check_size(schema: Mapping[str, Any]) -> None:
    """Refuse a schema deeper than :data:`MAX_SCHEMA_DEPTH`, longer than :data:`MAX_SCHEMA_CHARS` or not plain JSON.

    Depth and node count are measured first, without recursion, so a schema nested 100,000 deep is refused, not a
    ``RecursionError`` (and a dict shared over and over is refused before ``json.dumps`` would expand it)."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_SCHEMA_CHARS:  # each value is at least one character of JSON
            raise UserError(f"the output schema is too large (more than {MAX_SCHEMA_CHARS:,} values); shorten it")
        if depth > MAX_SCHEMA_DEPTH:
            raise UserError(f"the output schema is nested more than {MAX_SCHEMA_DEPTH} levels deep; flatten it "
                            "(use $defs and $ref for recursive shapes)")
        if isinstance(node, Mapping):
            if not all(isinstance(k, str) for k in node):
                raise UserError("the output schema is not plain JSON: its object keys must be strings")
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, depth + 1) for v in node)
    try:
        size = len(json.dumps(schema, allow_nan=False, separators=(",", ":")))
    except (TypeError, ValueError) as e:
        raise UserError(f"the output schema is not plain JSON: {e}") from None
    if size > MAX_SCHEMA_CHARS:
        raise UserError(f"the output schema is too large ({size:,} characters of JSON; at most "
                        f"{MAX_SCHEMA_CHARS:,}); shorten it (fewer enum values or properties)")


def _errors(e: Exception) -> str:
    """Pydantic's errors as ``path: message`` (without its links); any other exception as its text."""
    errors = getattr(e, "errors", None)
    try:
        items = errors() if callable(errors) else None
    except (TypeError, ValueError):
        items = None
    if not isinstance(items, list) or not items:
        return str(e)
    parts = []
    for d in items[:10]:
        loc = ".".join(str(x) for x in d.get("loc", ())) or "result"
        parts.append(f"{loc}: {d.get('msg', 'invalid')}")
    more = f" (and {len(items) - 10} more)" if len(items) > 10 else ""
    return "; ".join(parts) + more


def output_spec(output_type: Any = None, output_schema: Any = None) -> OutputSpec | None:
    """The spec for ``output_type`` or ``output_schema`` (at most one), ``None`` for neither.

    A bad one raises :class:`UserError` saying what is wrong (before any run is created)."""
    if output_type is not None and output_schema is not None:
        raise UserError("give output_type or output_schema, not both")
    if output_type is not None:
        return OutputSpec.from_type(output_type)
    if output_schema is not None:
        return OutputSpec.from_schema(output_schema)
    return None


class Expectation:
    """One agent's structured-result state: its spec and the value accepted so far (``None``: not yet)."""

    __slots__ = ("accepted", "spec", "text")

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.accepted: Any = None
        self.text: str | None = None

    def reset(self) -> None:
        """Forget an accepted value (a new run, or a Stop hook sent the agent back to work)."""
        self.accepted, self.text = None, None

    def call(self, b: ToolUseBlock) -> ToolResultBlock:
        """Run a ``final_result`` call: accept a valid result, or return the tool error the model sees."""
        try:
            verdict = self.spec.check(b.arguments)
        except Exception as e:  # a validator's bug or a value too deep to check: the model's news
            verdict = (f"final_result could not check the result ({type(e).__name__}: {str(e)[:500]}); call it "
                       "again with a simpler result")
        if isinstance(verdict, str):
            return ToolResultBlock(b.id, verdict, is_error=True)
        self.accepted, self.text = verdict
        return ToolResultBlock(b.id, "Result accepted; your run ends here.")


def stored(core: Any) -> dict[str, Any]:
    """What a run record keeps of ``core``'s structured result (merged into its ``limits``): its output schema,
    or nothing for a run without one."""
    out = getattr(core, "output", None)
    return {STORED_KEY: out.spec.source} if isinstance(out, Expectation) else {}


def restore(core: Any, limits: Mapping[str, Any]) -> None:
    """Re-attach the output schema a run record kept (``limits[STORED_KEY]``, see :func:`stored`) to ``core``, the
    agent re-created from that record; a record without one, or with one no longer usable, attaches nothing."""
    schema = limits.get(STORED_KEY)
    if not isinstance(schema, Mapping) or not schema:
        return
    try:
        spec = OutputSpec.from_schema(schema)
    except UserError:
        return
    attach(core, spec)


def attach(core: Any, spec: OutputSpec | None) -> None:
    """Make ``core`` (an :class:`~.loop.AgentCore` not yet started) end with a valid ``final_result`` call."""
    if spec is None:
        return
    core.output = Expectation(spec)
    if INSTRUCTION not in core.system:
        core.system = core.system + INSTRUCTION
