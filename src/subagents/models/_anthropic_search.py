"""A web search through Claude's server-side ``web_search`` tool (what backs the ``web_search`` agent tool).

One Messages API call carries only the server tool ``{"type": "web_search_20250305", "name": "web_search",
"max_uses": N}`` (and the domain filters); the provider runs the searches and answers from them in the
same response: ``server_tool_use`` blocks (the queries), ``web_search_tool_result`` blocks (the pages
found, their content encrypted) and the text.  A response that stops with ``pause_turn`` (a long search
the provider paused) is continued by sending its content back verbatim as the assistant turn — the
server blocks replayed, as the API requires — until the answer ends.  The result is the answer's text
and the sources' titles and URLs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["MAX_CONTINUATIONS", "SEARCH_TOOL", "render_search", "run_search", "search_request"]

SEARCH_TOOL = "web_search_20250305"
MAX_CONTINUATIONS = 3
"""``pause_turn`` continuations of one search before its partial answer is returned."""
_PROMPT = ("Search the web for: {query}\n\nAnswer from what the search finds: the relevant facts, briefly, "
           "each with the URL of its source. Say so if the search finds nothing relevant.")


def search_request(query: str, *, max_uses: int, allowed_domains: list[str] | None,
                   blocked_domains: list[str] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``messages`` and ``tools`` of the search call."""
    tool: dict[str, Any] = {"type": SEARCH_TOOL, "name": "web_search", "max_uses": max_uses}
    if allowed_domains:
        tool["allowed_domains"] = list(allowed_domains)
    if blocked_domains:
        tool["blocked_domains"] = list(blocked_domains)
    return [{"role": "user", "content": _PROMPT.format(query=query)}], [tool]


def replay(message: Any) -> dict[str, Any]:
    """``message``'s content as the assistant turn of the next request (server blocks included, verbatim)."""
    return {"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True) for b in message.content]}


def render_search(messages: list[Any], *, paused: bool = False) -> str:
    """The answer's text, then each source once (title and URL), then what the search cost."""
    text: list[str] = []
    sources: dict[str, str] = {}
    errors: list[str] = []
    searches = 0
    tokens_in = tokens_out = 0
    for m in messages:
        for b in m.content:
            if b.type == "text":
                text.append(b.text)
            elif b.type == "server_tool_use":
                searches += 1
            elif b.type == "web_search_tool_result":
                content = b.content
                if isinstance(content, list):
                    for r in content:
                        sources.setdefault(str(r.url), str(getattr(r, "title", "") or r.url))
                else:
                    errors.append(str(getattr(content, "error_code", "error")))
        usage = getattr(m, "usage", None)
        tokens_in += int(getattr(usage, "input_tokens", 0) or 0) + int(getattr(usage, "cache_read_input_tokens", 0)
                                                                       or 0)
        tokens_out += int(getattr(usage, "output_tokens", 0) or 0)
    out = "".join(text).strip() or "(the search returned no answer)"
    if paused:
        out += f"\n\n[the provider paused the search {MAX_CONTINUATIONS + 1} times; the answer above is partial]"
    if sources:
        out += "\n\nSources:\n" + "\n".join(f"- {title} — {url}" for url, title in sources.items())
    if errors:
        out += "\n\n[search errors reported by the provider: " + ", ".join(errors) + "]"
    return out + f"\n\n[web search: {searches} search{'' if searches == 1 else 'es'}, {tokens_in} input / " \
                 f"{tokens_out} output tokens]"


async def run_search(send: Callable[[dict[str, Any]], Awaitable[Any]], query: str, *, max_uses: int,
                     allowed_domains: list[str] | None, blocked_domains: list[str] | None) -> str:
    """Search for ``query``: ``send(params)`` makes one Messages API call (``messages`` and ``tools`` given;
    the model, its limits and retries are the caller's) and returns the SDK ``Message``."""
    messages, tools = search_request(query, max_uses=max_uses, allowed_domains=allowed_domains,
                                     blocked_domains=blocked_domains)
    answers: list[Any] = []
    for _ in range(MAX_CONTINUATIONS + 1):
        message = await send({"messages": messages, "tools": tools})
        answers.append(message)
        if message.stop_reason != "pause_turn":
            return render_search(answers)
        messages = [*messages, replay(message)]
    return render_search(answers, paused=True)
