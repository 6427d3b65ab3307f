"""OpenAI Chat Completions answers mapped back to a :class:`ModelResponse` (see :mod:`.openai`).

Compatible servers' quirks are handled here: no ``usage``, tool calls without ids, ``content`` as a
string or parts, deltas without ``index``, and arguments that are not a JSON object (they become
``{INVALID_ARGUMENTS_KEY: <raw text>}``).  A ``refusal`` (the model declined; ``content`` is null) is the
answer's text, with the stop reason ``refusal``.  Streamed argument pieces are joined once, at the end
(joining them as they came was quadratic: 4 MB of arguments in 20-byte pieces took minutes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ModelError
from ..messages import Usage
from ._sanitize import clean, tokens, unique_ids
from .base import INVALID_ARGUMENTS_KEY, ModelResponse, ToolCall, new_call_id

__all__ = ["MAX_NAME", "StreamAssembler", "from_openai", "get", "parse_arguments"]

MAX_NAME = 1024
"""Characters of a streamed tool name kept (a real one has at most 64; the rest of a longer one is dropped)."""

# Our provider-neutral stop reasons (see models/anthropic.py).
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


# -- map the answer back --------------------------------------------------------------------------
def get(obj: Any, key: str) -> Any:
    """``obj.key`` or ``obj[key]``: compatible servers' extra shapes reach us as dicts."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _content_text(content: Any) -> str:
    """Message content as text: a string, or a list of parts whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(get(p, "text") or "") for p in content if get(p, "type") in (None, "text", "output_text"))
    return str(content)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; text that is not a JSON object becomes ``{INVALID_ARGUMENTS_KEY: raw}``."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return {INVALID_ARGUMENTS_KEY: clean(str(raw))}
    return clean(value) if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: clean(str(raw))}


def _usage(u: Any) -> Usage:
    if u is None:
        return Usage()
    details = get(u, "prompt_tokens_details")
    prompt = tokens(get(u, "prompt_tokens"))
    return Usage(
        input_tokens=prompt,
        output_tokens=tokens(get(u, "completion_tokens")),
        cache_read_tokens=min(tokens(get(details, "cached_tokens")), prompt),
    )


def _check_cut_off(finish: str | None, calls: list[ToolCall], max_output_tokens: int) -> None:
    if finish == "length" and any(INVALID_ARGUMENTS_KEY in c.arguments for c in calls):
        raise ModelError(
            f"The model was cut off at max_output_tokens={max_output_tokens} while writing the arguments of a "
            "tool call, so the call was not run; raise max_output_tokens in the model settings.",
            provider="openai",
        )


def _response(text: str, calls: list[ToolCall], usage: Any, finish: Any, model: Any,
              max_output_tokens: int, refusal: str = "") -> ModelResponse:
    finish = None if finish is None else str(finish)
    _check_cut_off(finish, calls, max_output_tokens)
    for c in calls:
        c.name = clean(c.name)
    if refusal and not calls:  # the model declined: its reason is the answer (``content`` is null then)
        text, finish = (text + "\n\n" if text else "") + refusal, "content_filter"
    return ModelResponse(
        text=clean(text),
        tool_calls=unique_ids(calls),
        usage=_usage(usage),
        stop_reason=None if finish is None else _STOP_REASONS.get(finish, finish),
        model=None if model is None else str(model),
    )


def from_openai(completion: Any, *, max_output_tokens: int = 0) -> ModelResponse:
    """A :class:`ModelResponse` from a (non-streamed) ``ChatCompletion``."""
    choices = get(completion, "choices") or []
    message = get(choices[0], "message") if choices else None
    calls = [
        ToolCall(str(get(get(tc, "function"), "name") or ""),
                 parse_arguments(get(get(tc, "function"), "arguments")),
                 str(get(tc, "id") or "") or new_call_id())
        for tc in (get(message, "tool_calls") or [])
    ]
    return _response(
        _content_text(get(message, "content")), calls, get(completion, "usage"),
        get(choices[0], "finish_reason") if choices else None, get(completion, "model"), max_output_tokens,
        _content_text(get(message, "refusal")),
    )


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    """The pieces, joined by :meth:`StreamAssembler.response`."""


@dataclass(slots=True)
class StreamAssembler:
    """Builds one answer from ``chat.completion.chunk`` s: text, tool calls by index, usage, finish."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    earlier: list[_PartialCall] = field(default_factory=list)
    """Calls ended by another call at their index (a server that sends every call at index 0, each with its id)."""
    usage: Any = None
    finish: str | None = None
    model: str | None = None

    def add(self, chunk: Any) -> str:
        """Take one chunk in; return its text delta ('' if none)."""
        self.model = get(chunk, "model") or self.model
        if get(chunk, "usage") is not None:
            self.usage = get(chunk, "usage")
        delta_text = ""
        for choice in get(chunk, "choices") or []:
            if (get(choice, "index") or 0) != 0:
                continue
            delta = get(choice, "delta")
            delta_text += _content_text(get(delta, "content"))
            refused = _content_text(get(delta, "refusal"))
            if refused:
                self.refusal.append(refused)
            for tc in get(delta, "tool_calls") or []:
                self._add_call(tc)
            self.finish = get(choice, "finish_reason") or self.finish
        if delta_text:
            delta_text = clean(delta_text)
            self.text.append(delta_text)
        return delta_text

    def _add_call(self, tc: Any) -> None:
        index = get(tc, "index")
        if index is None:  # a server that sends each call whole, without an index
            index = len(self.calls)
        key, call_id = int(index), str(get(tc, "id") or "")
        part = self.calls.get(key)
        if part is not None and call_id and part.id and call_id != part.id:  # another call at the same index
            self.earlier.append(part)
            part = None
        if part is None:
            part = self.calls[key] = _PartialCall()
        part.id = part.id or call_id
        fn = get(tc, "function")
        name = str(get(fn, "name") or "")
        # a piece of a name split across deltas is appended (as the SDK does); a server that repeats the whole
        # name, or sends it cumulatively, sends something that starts with what we have: taken as is
        if len(part.name) < MAX_NAME:
            part.name = (name if name.startswith(part.name) else part.name + name)[:MAX_NAME]
        args = get(fn, "arguments")
        if isinstance(args, dict):
            args = json.dumps(args)
        if args:
            part.arguments.append(str(args))

    def response(self, max_output_tokens: int) -> ModelResponse:
        calls = [
            ToolCall(p.name, parse_arguments("".join(p.arguments)), p.id or new_call_id())
            for p in [*self.earlier, *(p for _, p in sorted(self.calls.items()))]
        ]
        return _response("".join(self.text), calls, self.usage, self.finish, self.model, max_output_tokens,
                         clean("".join(self.refusal)))
