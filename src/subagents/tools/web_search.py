"""The ``web_search`` tool (Claude Code's ``WebSearch``): a web search run by the model provider's native search.

The agent's model calls ``web_search(query, ...)`` like any tool, so the call passes the permission rules
first (``WebSearch`` / ``web_search`` rules; ``web_search(domain:example.com)`` is not a thing — the
query is the subject, ``web_search(python *)`` matches it) and ``default`` mode asks, as for
``web_fetch``: its category is ``execute``, a network action.  Only then does the tool ask a
:class:`WebSearcher` — a model whose provider searches the web server-side (the Anthropic adapter's
``web_search_20250305`` server tool) — for the results, and returns the answer with its sources.
This is how Claude Code runs its own ``WebSearch``; a server tool offered directly to the agent's model
would search before any rule could be checked.

A runtime offers the tool only when its model can search (:func:`supports_web_search`); elsewhere an
agent file listing ``WebSearch`` is told it is missing (:mod:`subagents.definitions.toolcheck`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..exceptions import ModelError, ToolError
from .base import FunctionTool, ToolCategory

__all__ = ["WebSearcher", "supports_web_search", "web_search_tool"]

MAX_USES = 5
"""Searches the provider may run for one ``web_search`` call."""


@runtime_checkable
class WebSearcher(Protocol):
    """A model whose provider can search the web server-side."""

    @property
    def name(self) -> str: ...

    async def web_search(self, query: str, *, allowed_domains: list[str] | None = None,
                         blocked_domains: list[str] | None = None, max_uses: int = MAX_USES) -> str: ...


def supports_web_search(model: Any) -> bool:
    """Whether ``model`` can back the ``web_search`` tool (its provider has a native web search)."""
    return callable(getattr(model, "web_search", None))


def web_search_tool(searcher: WebSearcher, *, max_uses: int = MAX_USES, name: str = "web_search") -> FunctionTool:
    """A ``web_search`` tool whose searches ``searcher`` runs (at most ``max_uses`` per call)."""

    async def web_search(query: str, allowed_domains: list[str] | None = None,
                         blocked_domains: list[str] | None = None) -> str:
        """Search the web and return an answer drawn from the results, with the URLs of its sources.

        Args:
            query: what to search for, e.g. "python 3.13 release date".
            allowed_domains: search only these domains (e.g. ["docs.python.org"]).
            blocked_domains: never use results from these domains.
        """
        if not query.strip():
            raise ToolError("the query is empty; say what to search for.")
        if allowed_domains and blocked_domains:
            raise ToolError("give allowed_domains or blocked_domains, not both.")
        try:
            return await searcher.web_search(query, allowed_domains=allowed_domains or None,
                                             blocked_domains=blocked_domains or None, max_uses=max_uses)
        except ModelError as e:
            raise ToolError(f"the web search failed: {e}") from None

    return FunctionTool(web_search, name=name, category=ToolCategory.EXECUTE)
