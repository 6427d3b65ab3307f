"""Claude's streamed answer assembled from the raw Messages API events (see :mod:`.anthropic`).

The adapter reads ``messages.create(stream=True)`` — the SDK's raw events, not its accumulated
message: the SDK parses a tool's ``input_json_delta`` pieces as they come (partial JSON), so input
that is not valid JSON raised inside the SDK (the whole answer retried, then the run ended), and input
that stopped short (``{"key": "alpha"``) was taken as complete.  Here the pieces are only joined, and
parsed once the answer is whole: text that is not a JSON object becomes
``{INVALID_ARGUMENTS_KEY: <raw text>}`` (:func:`tool_arguments`), which the tool registry answers
with a tool error the model can act on.  Events out of order or missing fields raise ``ValueError``
(the adapter reports a malformed answer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ._sanitize import clean
from .base import INVALID_ARGUMENTS_KEY

__all__ = ["StreamedBlock", "StreamedMessage", "tool_arguments"]

_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def tool_arguments(block: Any) -> dict[str, Any]:
    """The arguments of a ``tool_use`` block (an SDK block or a :class:`StreamedBlock`) as a dict.

    Input that is no JSON object becomes ``{INVALID_ARGUMENTS_KEY: <its text>}``: the streamed text as sent,
    else the value as JSON.
    """
    raw = getattr(block, "input", None)
    if isinstance(raw, dict):
        return clean(raw)
    text = getattr(block, "raw_json", None) if isinstance(block, StreamedBlock) else None
    return {INVALID_ARGUMENTS_KEY: clean(text if text is not None else json.dumps(raw))}


@dataclass(slots=True)
class StreamedBlock:
    """One content block: ``text``, ``tool_use`` or another kind (kept, unused); ``text``, ``raw_json`` and
    ``input`` are set by :meth:`finish` (the deltas are kept as pieces: joining them as they come is quadratic)."""

    type: str
    text: str = ""
    id: str = ""
    name: str = ""
    input: Any = None
    """A tool's input: the start block's, else the parsed ``raw_json`` (``None`` if it does not parse)."""
    raw_json: str | None = None
    """A tool's ``input_json_delta`` pieces joined (``None`` if none came)."""
    pieces: list[str] = field(default_factory=list)

    def finish(self) -> None:
        if self.type == "text":
            self.text += "".join(self.pieces)
            self.pieces.clear()
        elif self.type == "tool_use" and self.pieces:
            self.raw_json = (self.raw_json or "") + "".join(self.pieces)
            self.pieces.clear()
            if self.raw_json.strip():
                try:
                    self.input = json.loads(self.raw_json)
                except (ValueError, RecursionError):
                    self.input = None


@dataclass(slots=True)
class StreamedMessage:
    """The answer so far; :meth:`add` takes the raw events in order (``message_start`` first)."""

    content: list[StreamedBlock] = field(default_factory=list)
    usage: SimpleNamespace = field(default_factory=SimpleNamespace)
    model: str | None = None
    stop_reason: str | None = None
    started: bool = False
    stopped: bool = False

    def add(self, event: Any) -> str:
        """Take one raw event in; return its text delta ('' if none).  ``ValueError`` if out of order or malformed."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            message = getattr(event, "message", None)
            self.started = True
            self.model = getattr(message, "model", None)
            self._usage(getattr(message, "usage", None), first=True)
            return ""
        if not self.started:
            raise ValueError(f"a {kind!r} event came before message_start")
        if kind == "content_block_start":
            block = getattr(event, "content_block", None)
            btype = str(getattr(block, "type", None) or "")
            self.content.append(StreamedBlock(
                btype, text=str(getattr(block, "text", None) or ""), id=str(getattr(block, "id", None) or ""),
                name=str(getattr(block, "name", None) or ""), input=getattr(block, "input", None)))
        elif kind == "content_block_delta":
            return self._delta(self._block(event), getattr(event, "delta", None))
        elif kind == "content_block_stop":
            self._block(event).finish()
        elif kind == "message_delta":
            self.stop_reason = getattr(getattr(event, "delta", None), "stop_reason", None)
            self._usage(getattr(event, "usage", None), first=False)
        elif kind == "message_stop":
            self.stopped = True
            for b in self.content:
                b.finish()
        return ""

    def _block(self, event: Any) -> StreamedBlock:
        index = getattr(event, "index", None)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.content):
            raise ValueError(f"a {event.type} event for content block {index!r}, which was not started")
        return self.content[index]

    @staticmethod
    def _delta(block: StreamedBlock, delta: Any) -> str:
        dtype = getattr(delta, "type", None)
        if dtype == "text_delta" and block.type == "text":
            text = clean(str(getattr(delta, "text", None) or ""))
            block.pieces.append(text)
            return text
        if dtype == "input_json_delta" and block.type == "tool_use":
            block.pieces.append(str(getattr(delta, "partial_json", None) or ""))
        return ""

    def _usage(self, usage: Any, *, first: bool) -> None:
        """Counts from ``message_start`` (``first``), then the totals a ``message_delta`` carries (others kept)."""
        if usage is None:
            raise ValueError("an event without its usage")
        for name in _USAGE_FIELDS:
            value = getattr(usage, name, None)
            if value is not None or first:
                setattr(self.usage, name, value)
