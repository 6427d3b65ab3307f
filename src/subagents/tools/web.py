"""The ``web_fetch`` tool (Claude Code's ``WebFetch``): fetch a page over http(s) and return it as Markdown.

It is a network action: its category is ``execute``, so the permission rules apply
(``web_fetch(domain:example.com)`` once rules know the ``domain:`` form) and ``default`` mode asks.
Only ``http``/``https`` URLs; hosts that resolve to loopback, private, link-local or otherwise
non-public addresses are refused unless named in ``allow_private_hosts`` (see :func:`web_fetch_tool`; the
runtime's built-in tool takes ``[web] allow_private_hosts`` from the user's config file),
so an agent cannot reach the machine's own services or the local network by default.  Redirects are
followed on the same host (each hop checked again); a redirect to another host is reported to the
model, which calls again with that URL so the rules see the new host.  The download stops at
``MAX_BYTES``; HTML becomes Markdown (``markdownify``), and the text returned is capped.
``prompt`` is returned with the page, for the calling model to apply: no second model runs here.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection
from urllib.parse import urljoin, urlsplit

from ..exceptions import ToolError
from .base import FunctionTool, ToolCategory

__all__ = ["MAX_BYTES", "MAX_CHARS", "web_fetch", "web_fetch_tool"]

MAX_BYTES = 2_000_000
"""The download stops here (the rest of the page is not fetched)."""
MAX_CHARS = 40_000
"""The Markdown returned is cut here."""
TIMEOUT_S = 30.0
MAX_REDIRECTS = 5
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript")


def _check_host(host: str, port: int, allowed: Collection[str]) -> None:
    if host.lower() in allowed:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise ToolError(f"cannot resolve the host {host!r} ({e}); check the URL.") from None
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not addr.is_global:
            raise ToolError(
                f"refused: {host!r} resolves to {addr}, a loopback, private or otherwise non-public address; "
                "web_fetch reaches public hosts only. To allow this host, add it to [web] allow_private_hosts in "
                "your user config file (subagents config show names it), or build the tool with "
                f"web_fetch_tool(allow_private_hosts=[{host!r}]).")


def _check_url(url: str, allowed: Collection[str]) -> tuple[str, str]:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"only http:// and https:// URLs can be fetched, got {url!r}.")
    if not parts.hostname:
        raise ToolError(f"the URL {url!r} has no host; pass a full URL such as https://example.com/page.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ToolError(f"the URL {url!r} has an invalid port.") from None
    _check_host(parts.hostname, port, allowed)
    return parts.geturl(), parts.hostname.lower()


def _to_markdown(body: str, content_type: str) -> str:
    if "html" not in content_type:
        return body
    from bs4 import BeautifulSoup  # lazy: only when a page is fetched (markdownify's own dependency)
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(body, "html.parser")
    for t in soup(["script", "style", "noscript", "template", "head"]):
        t.decompose()
    text: str = MarkdownConverter(heading_style="ATX").convert_soup(soup)
    lines = [ln.rstrip() for ln in text.splitlines()]
    out: list[str] = []
    for ln in lines:  # collapse the blank runs HTML layout leaves
        if ln or (out and out[-1]):
            out.append(ln)
    return "\n".join(out).strip()


async def _fetch(url: str, allowed: Collection[str]) -> tuple[str, str, str, int, bool]:
    """``(final url, content type, text, status, truncated)``; a cross-host redirect raises ToolError."""
    import httpx

    current, host = _check_url(url, allowed)
    async with httpx.AsyncClient(follow_redirects=False, timeout=TIMEOUT_S, trust_env=False,
                                 headers={"User-Agent": "subagents-web-fetch/1"}) as client:
        for _ in range(MAX_REDIRECTS + 1):
            async with client.stream("GET", current) as resp:
                if resp.is_redirect and "location" in resp.headers:
                    target = urljoin(current, resp.headers["location"])
                    new_url, new_host = _check_url(target, allowed)
                    if new_host != host:
                        raise ToolError(f"{current} redirects to another host: {new_url}. Call web_fetch again "
                                        "with that URL if you want it.")
                    current = new_url
                    continue
                chunks: list[bytes] = []
                size = 0
                truncated = False
                async for chunk in resp.aiter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size >= MAX_BYTES:
                        truncated = True
                        break
                ctype = resp.headers.get("content-type", "").lower()
                data = b"".join(chunks)[:MAX_BYTES]
                if ctype and not ctype.startswith(_TEXT_TYPES):
                    raise ToolError(f"{current} is {ctype.split(';')[0]}, not text or HTML; web_fetch returns "
                                    "text only.")
                return current, ctype, data.decode(resp.encoding or "utf-8", errors="replace"), resp.status_code, \
                    truncated
    raise ToolError(f"{url} redirected more than {MAX_REDIRECTS} times; giving up.")


def web_fetch_tool(*, allow_private_hosts: Collection[str] = (), name: str = "web_fetch") -> FunctionTool:
    """A ``web_fetch`` tool; ``allow_private_hosts`` names hosts it may reach although they resolve to
    loopback or private addresses (e.g. ``["localhost", "127.0.0.1"]`` for a local documentation server)."""
    allowed = frozenset(h.lower() for h in allow_private_hosts)

    async def web_fetch(url: str, prompt: str = "") -> str:
        """Fetch a web page (http or https) and return its content as Markdown.

        Args:
            url: the full URL to fetch, e.g. https://docs.python.org/3/library/ast.html.
            prompt: what you want from the page; it is shown above the content to guide your reading.
        """
        try:
            import httpx  # lazy: only when a page is fetched
            import markdownify  # noqa: F401
        except ImportError:
            raise ToolError("web_fetch needs the httpx and markdownify packages: pip install 'subagents[web]'"
                            ) from None
        try:
            final, ctype, body, status, truncated = await _fetch(url, allowed)
        except httpx.HTTPError as e:
            raise ToolError(f"fetching {url} failed: {type(e).__name__}: {e}; check the URL or try later.") from None
        text = _to_markdown(body, ctype)
        if len(text) > MAX_CHARS:
            text, truncated = text[:MAX_CHARS], True
        head = [f"URL: {final}", f"Status: {status}"]
        if prompt:
            head.append(f"Asked: {prompt}")
        if status >= 400:
            head.append(f"(the server answered with an error, HTTP {status})")
        tail = (f"\n\n[... page truncated: the first {MAX_CHARS:,} characters shown ...]" if truncated else "")
        return "\n".join(head) + "\n\n" + (text or "(empty page)") + tail

    return FunctionTool(web_fetch, name=name, category=ToolCategory.EXECUTE)


web_fetch: FunctionTool = web_fetch_tool()
"""The default ``web_fetch``: public hosts only."""
