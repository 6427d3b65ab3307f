"""Tool names a definition lists that name no tool here: which they are, why, and whether any tool is left.

Agent files written for Claude Code list its tools (``WebSearch``, ``mcp__github__*``, ...).  The
loader maps the names the runtime has (``Read`` -> ``read_file``, ``WebFetch`` -> ``web_fetch``,
``WebSearch`` -> ``web_search``: a runtime has that tool only where its model's provider searches the web
server-side, e.g. Claude's ``web_search`` server tool, see :mod:`subagents.tools.web_search`);
the rest are reported by :func:`unknown_tools` so ``agents list``/``show`` and the run's start can
warn once per definition, and a definition left with no usable tool can be refused at spawn.

>>> from subagents.definitions.model import AgentDefinition
>>> d = AgentDefinition("seo", tools=["read_file", "WebSearch", "mcp__github__get_issue"])
>>> for name, why in unknown_tools(d, {"read_file"}, mcp_servers=set()):
...     print(f"{name}: {why}")
WebSearch: no provider-native web search here
mcp__github__get_issue: no MCP server 'github' is configured
"""

from __future__ import annotations

from collections.abc import Collection
from fnmatch import fnmatchcase
from typing import Any

from .model import AgentDefinition

__all__ = ["MISSING_TOOL_REASONS", "inert_denials", "no_usable_tool", "tool_warning", "unknown_tools"]

MISSING_TOOL_REASONS = {
    "WebSearch": "no provider-native web search here",
    "web_search": "no provider-native web search here",
    "NotebookEdit": "notebooks are not supported here",
    "NotebookRead": "notebooks are not supported here",
    "BashOutput": "background shells are not supported here",
    "KillBash": "background shells are not supported here",
    "KillShell": "background shells are not supported here",
    "ExitPlanMode": "plan mode ends with the agent's answer here",
    "SlashCommand": "slash commands are not supported here",
}
"""Claude Code tools the runtime has no counterpart for, and why."""


def _own_servers(extra: dict[str, Any]) -> set[str]:
    """The MCP server names a definition brings itself (``mcp_servers:`` names or inline entries)."""
    value = extra.get("mcp_servers") or extra.get("mcpServers") or ()
    if isinstance(value, dict):
        return {str(k) for k in value}
    if isinstance(value, (list, tuple)):
        out: set[str] = set()
        for item in value:
            if isinstance(item, str):
                out.add(item)
            elif isinstance(item, dict):
                out.update(str(k) for k in item)
        return out
    return {value} if isinstance(value, str) else set()


def unknown_tools(d: AgentDefinition, known: Collection[str], *, mcp_servers: Collection[str] | None = None
                  ) -> list[tuple[str, str]]:
    """``(name, why)`` for each name in ``d.tools`` and ``d.delegate_tools`` that is no tool in ``known``.

    ``mcp__SERVER__TOOL`` names are checked only when ``mcp_servers`` (the configured server names) is
    given: a name whose server is configured, or named by the definition itself, counts as known.
    """
    servers = None if mcp_servers is None else {*mcp_servers, *_own_servers(d.extra)}
    out: list[tuple[str, str]] = []
    for name in dict.fromkeys([*(d.tools or ()), *d.delegate_tools]):
        if name in known or (name == "*" and name in d.delegate_tools):  # delegate_tools "*": all the parent has
            continue
        if any(c in name for c in "*?[") and not name.startswith("mcp__"):  # the fence takes names, not globs
            out.append((name, "a pattern, and only mcp__ names may be patterns here; list the tools by name"
                        + (" (or remove 'tools' to give every tool)" if name == "*" else "")))
            continue
        if name.startswith("mcp__"):
            server = name[5:].split("__", 1)[0]
            if servers is None or server.rstrip("*") == "" or server in servers:
                continue
            out.append((name, f"no MCP server {server!r} is configured"))
            continue
        out.append((name, MISSING_TOOL_REASONS.get(name, "no such tool here")))
    return out


def inert_denials(d: AgentDefinition, known: Collection[str]) -> list[str]:
    """Names in ``d.disallowed_tools`` that deny nothing because no tool here has them, though one was likely meant:
    a misspelling (``write_fle``) or a pattern that matches no tool (``wirte_*``) leaves the tool allowed (the loader
    refuses rules, ``Bash(rm:*)``).  Claude Code tools this runtime lacks (``WebSearch``) and ``mcp__`` names are not
    reported."""
    return [n for n in d.disallowed_tools if n not in known and n not in MISSING_TOOL_REASONS
            and not n.startswith("mcp__") and not any(fnmatchcase(k, n) for k in known)]


def no_usable_tool(d: AgentDefinition, unknown: Collection[str]) -> bool:
    """Whether ``d`` names tools and every one of them is unknown (an empty ``tools:`` list is meant)."""
    return bool(d.tools) and all(n in unknown for n in d.tools or ())


def tool_warning(d: AgentDefinition, known: Collection[str], *, mcp_servers: Collection[str] | None = None
                 ) -> str | None:
    """One warning for ``d`` naming each unknown tool and why (``None`` when all are known)."""
    missing = unknown_tools(d, known, mcp_servers=mcp_servers)
    inert = inert_denials(d, known)
    if not missing and not inert:
        return None
    msg = f"agent type {d.name!r} ({d.source})"
    if missing:
        listed = "; ".join(f"{n}: {why}" for n, why in missing)
        msg += f" lists tools it cannot have: {listed}"
        if no_usable_tool(d, {n for n, _ in missing}):
            msg += " — it has no usable tool left, so spawning it fails; fix its 'tools:' line"
        else:
            msg += " (they are left out)"
    if inert:
        msg += (f"{';' if missing else ''} disallows {', '.join(inert)}, which "
                f"{'is no tool' if len(inert) == 1 else 'are no tools'} here, so nothing is denied by "
                f"{'it' if len(inert) == 1 else 'them'}; name the tools exactly as listed by 'subagents agents show' "
                "(read_file, bash, ...)")
    return msg
