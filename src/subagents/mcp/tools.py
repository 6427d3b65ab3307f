"""``McpTool``: one tool of an MCP server, as the model sees it (``mcp__<server>__<tool>``).

An ordinary :class:`~subagents.tools.base.Tool`: its schema is the server's ``inputSchema``, it is fenced
and permission-checked like every other tool (rules such as ``mcp__github__*`` match it), and it is of
category ``execute`` whatever the server's annotations claim (a server's hints are not trusted), so
it never runs in parallel with other calls and plan mode asks before it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

import mcp_types

from ..exceptions import ToolError
from ..tools.base import ToolCategory, ToolContext
from .client import McpConnection

__all__ = ["MAX_TOOL_NAME", "McpTool", "render_result", "tool_name", "tool_names"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOL_NAME = 64  # the model APIs' limit (OpenAI, Anthropic): a longer name fails every request that offers it


def tool_name(server: str, tool: str) -> str:
    """Claude Code's name of an MCP tool: ``mcp__<server>__<tool>`` (characters outside ``[A-Za-z0-9_-]`` -> ``_``)."""
    return f"mcp__{server}__{_UNSAFE.sub('_', tool)}"


def tool_names(server: str, tools: Iterable[str]) -> list[str | None]:
    """The model's name of each of a server's tools, unique and at most :data:`MAX_TOOL_NAME` characters.

    A tool keeps :func:`tool_name` unless that name is too long or another tool of the server has it (``a.b``
    and ``a_b``; the tool whose own name needs no change keeps it): then the name is cut and ends with ``_``
    and 8 hex digits of a hash of the tool's own name, the same from one run to the next.  ``None``: a tool
    without a name, which cannot be offered.

    >>> tool_names("s", ["a.b", "a_b", ""])
    ['mcp__s__a_b_2e7336dc', 'mcp__s__a_b', None]
    >>> [len(n or "") for n in tool_names("s", ["x" * 70])]
    [64]
    """
    tools = list(tools)
    out: list[str | None] = [None] * len(tools)
    taken: set[str] = set()
    clean_first = sorted(range(len(tools)), key=lambda i: _UNSAFE.search(tools[i]) is not None)
    for i in clean_first:
        if not tools[i].strip():
            continue
        name = tool_name(server, tools[i])
        if len(name) > MAX_TOOL_NAME or name in taken:
            digest = hashlib.sha256(tools[i].encode("utf-8", "surrogatepass")).hexdigest()
            name = next((c for n in (8, 12, 16) if (c := f"{name[:MAX_TOOL_NAME - n - 1]}_{digest[:n]}") not in taken),
                        "")
        if name:
            out[i] = name
            taken.add(name)
    return out


def _schema(raw: dict[str, Any] | None) -> dict[str, Any]:
    schema = dict(raw or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.pop("$schema", None)
    return schema


def render_result(result: mcp_types.CallToolResult) -> str:
    """The text the model gets: text blocks as they are, other blocks described in one line each."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            parts.append(f"[image {block.mime_type}, {len(block.data) * 3 // 4:,} bytes, not shown]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {res.uri}, binary, not shown]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} block, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


class McpTool:
    """A tool of an MCP server; calls go through the server's shared :class:`McpConnection`."""

    __slots__ = ("category", "connection", "description", "name", "parameters", "remote_name")

    def __init__(self, connection: McpConnection, spec: mcp_types.Tool, name: str | None = None) -> None:
        self.connection = connection
        self.remote_name = spec.name
        self.name = name or tool_name(connection.cfg.name, spec.name)
        renamed = f", where it is named {spec.name!r}" if self.name != tool_name(connection.cfg.name, spec.name) else ""
        self.description = (spec.description or spec.title or spec.name) + (
            f" (from the MCP server {connection.cfg.name!r}{renamed})")
        self.parameters = _schema(spec.input_schema)
        self.category = ToolCategory.EXECUTE

    @property
    def parallel_safe(self) -> bool:
        return False

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        """Run the tool on its server; an error the server reports comes back as a tool error."""
        result = await self.connection.call(self.remote_name, arguments, shown_as=self.name)
        text = render_result(result)
        if result.is_error:
            raise ToolError(text or f"{self.name} failed (the MCP server gave no reason)")
        return text

    def __repr__(self) -> str:
        return f"<mcp tool {self.name}>"
