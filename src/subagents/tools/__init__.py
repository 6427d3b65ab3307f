"""Tools: the protocol, ``@tool``, the per-agent registry, and the built-in tools."""

from .base import MAX_TOOL_OUTPUT, FunctionTool, Tool, ToolCategory, ToolContext, ToolRegistry, tool, truncate_output
from .paths import Workspace

__all__ = [
    "MAX_TOOL_OUTPUT",
    "FunctionTool",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolRegistry",
    "Workspace",
    "tool",
    "truncate_output",
]
