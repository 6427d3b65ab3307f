"""``McpTool``: one tool of an MCP server, as the model sees it (``mcp__<server>__<tool>``).

An ordinary :class:`~subagents.tools.base.Tool`: its schema is the server's ``inputSchema``, it is fenced
and permission-checked like every other tool (rules such as ``mcp__github__*`` match it), and it is of
category ``execute`` whatever the server's annotations claim (a server's hints are not trusted), so
it never runs in parallel with other calls and plan mode asks before it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types

from ..exceptions import ToolError
from ..tools.base import ToolCategory, ToolContext
from .client import McpConnection

__all__ = ["McpTool", "render_result", "tool_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """Claude Code's name of an MCP tool: ``mcp__<server>__<tool>`` (characters outside ``[A-Za-z0-9_-]`` -> ``_``)."""
    return f"mcp__{server}__{_UNSAFE.sub('_', tool)}"


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

    def __init__(self, connection: McpConnection, spec: mcp_types.Tool) -> None:
        self.connection = connection
        self.remote_name = spec.name
        self.name = tool_name(connection.cfg.name, spec.name)
        self.description = (spec.description or spec.title or spec.name) + (
            f" (from the MCP server {connection.cfg.name!r})")
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
