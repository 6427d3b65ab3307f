"""Provider-neutral conversation messages.

A conversation is a list of :class:`Message`; each message has a ``role`` (``"user"`` or
``"assistant"``) and a list of content blocks, each a small dataclass with a ``kind``
discriminator: :class:`TextBlock`, :class:`ToolUseBlock`, :class:`ToolResultBlock`.
:func:`dumps_messages` / :func:`loads_messages` turn a whole history into JSON and back
(the store persists transcripts with them).

>>> m = Message.user("hello")
>>> loads_messages(dumps_messages([m])) == [m]
True
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Role: TypeAlias = Literal["user", "assistant"]

__all__ = [
    "Block",
    "Message",
    "Role",
    "TextBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "dumps_messages",
    "loads_messages",
    "message_from_dict",
    "message_to_dict",
]


@dataclass(slots=True)
class TextBlock:
    """Plain text from the user or the model."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(slots=True)
class ToolUseBlock:
    """A tool call requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any]
    kind: Literal["tool_use"] = "tool_use"


@dataclass(slots=True)
class ToolResultBlock:
    """The result of one tool call, paired with its call by ``tool_use_id``."""

    tool_use_id: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"


Block: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock


@dataclass(slots=True)
class Message:
    """One message of a conversation."""

    role: Role
    content: list[Block] = field(default_factory=list)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", [TextBlock(text)])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", [TextBlock(text)])

    @property
    def text(self) -> str:
        """The concatenated text blocks of this message."""
        return "".join(b.text for b in self.content if type(b) is TextBlock)

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if type(b) is ToolUseBlock]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if type(b) is ToolResultBlock]


@dataclass(slots=True)
class Usage:
    """Token counts of one or more model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (cache reads and writes are part of the input)."""
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        """Add ``other`` into this usage in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Usage:
        return cls(
            int(d.get("input_tokens", 0)),
            int(d.get("output_tokens", 0)),
            int(d.get("cache_read_tokens", 0)),
            int(d.get("cache_write_tokens", 0)),
        )


def _block_to_dict(b: Block) -> dict[str, Any]:
    if type(b) is TextBlock:
        return {"kind": "text", "text": b.text}
    if type(b) is ToolUseBlock:
        return {"kind": "tool_use", "id": b.id, "name": b.name, "arguments": b.arguments}
    assert type(b) is ToolResultBlock
    d: dict[str, Any] = {"kind": "tool_result", "tool_use_id": b.tool_use_id, "content": b.content}
    if b.is_error:
        d["is_error"] = True
    return d


def _block_from_dict(d: dict[str, Any]) -> Block:
    kind = d.get("kind")
    if kind == "text":
        return TextBlock(str(d["text"]))
    if kind == "tool_use":
        return ToolUseBlock(str(d["id"]), str(d["name"]), dict(d.get("arguments") or {}))
    if kind == "tool_result":
        return ToolResultBlock(str(d["tool_use_id"]), str(d["content"]), bool(d.get("is_error", False)))
    raise ValueError(f"unknown message block kind {kind!r}; expected 'text', 'tool_use' or 'tool_result'")


def message_to_dict(m: Message) -> dict[str, Any]:
    """One message as a JSON-ready dict."""
    return {"role": m.role, "content": [_block_to_dict(b) for b in m.content]}


def message_from_dict(d: dict[str, Any]) -> Message:
    """Inverse of :func:`message_to_dict`; raises ``ValueError`` on a malformed dict."""
    role = d.get("role")
    if role not in ("user", "assistant"):
        raise ValueError(f"unknown message role {role!r}; expected 'user' or 'assistant'")
    return Message(role, [_block_from_dict(b) for b in d.get("content", [])])


def dumps_messages(messages: Iterable[Message]) -> str:
    """Serialize a whole history to a JSON string."""
    return json.dumps([message_to_dict(m) for m in messages], ensure_ascii=False, separators=(",", ":"))


def loads_messages(data: str | bytes) -> list[Message]:
    """Parse a history written by :func:`dumps_messages`."""
    raw = json.loads(data)
    if not isinstance(raw, list):
        raise ValueError("a message history must be a JSON list of messages")
    return [message_from_dict(d) for d in raw]
