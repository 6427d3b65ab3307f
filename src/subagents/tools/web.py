"""The ``web_fetch`` tool (Claude Code's ``WebFetch``): fetch a page over http(s) and return it as Markdown.

It is a network action: its category is ``execute``, so the permission rules apply
(``web_fetch(domain:example.com)`` once rules know the ``domain:`` form) and ``default`` mode asks.
Only ``http``/``https`` URLs; hosts that resolve to loopback, private, link-local or otherwise
non-public addresses are refused unless named in ``allow_private_hosts`` (see :func:`web_fetch_tool`; the
runtime's built-in tool takes ``[web] allow_private_hosts`` from the user's config file),
so an agent cannot reach the machine's own services or the local network by default.  The check runs
when the client connects, on the address it connects to (:mod:`subagents.tools.web_guard`), so a name
that resolves to a public address first and to a private one a moment later (DNS rebinding) is refused
too; proxies from the environment are ignored.  Redirects are followed on the same host (each hop
checked again); a redirect to another host is reported to the model, which calls again with that URL so
the rules see the new host.  The download stops at ``MAX_BYTES`` of decoded text (a gzip body is
inflated piece by piece, never past the cap) and the whole fetch at ``TOTAL_TIMEOUT_S``, conversion included;
HTML becomes Markdown (``markdownify``) in a worker thread, so the event loop never waits on it: only the
first ``MAX_TAGS`` tags are parsed, markup the parser would rescan the page for is defused first, elements
nested deeper than ``MAX_DEPTH`` become plain text, and a conversion past ``CONVERT_S`` gives way to the
page's plain text (a page built to make the conversion slow or recursive stays cheap); the text returned
is capped.
``prompt`` is returned with the page, for the calling model to apply: no second model runs here.
"""

from __future__ import annotations

import codecs
import re
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from .._threads import call_in_thread, cancelled
from ..exceptions import ToolError
from .base import FunctionTool, ToolCategory

if TYPE_CHECKING:
    from bs4 import Tag

__all__ = ["MAX_BYTES", "MAX_CHARS", "MAX_DEPTH", "MAX_TAGS", "web_fetch", "web_fetch_tool"]

MAX_BYTES = 2_000_000
"""The download stops here (the rest of the page is not fetched)."""
MAX_CHARS = 40_000
"""The Markdown returned is cut here."""
TIMEOUT_S = 30.0
"""The limit on each network step (connect, each read)."""
TOTAL_TIMEOUT_S = 90.0
"""The limit on the whole fetch, redirects included: a server that sends a byte now and then is cut off."""
MAX_REDIRECTS = 5
MAX_TAGS = 40_000
"""HTML past this many tags is not converted (parsing and conversion cost grows with the tags, and an
ordinary page fills ``MAX_CHARS`` long before)."""
MAX_DEPTH = 100
"""Elements nested deeper than this become their plain text (the converter recurses once per level)."""
CONVERT_S = 10.0
"""The time the HTML to Markdown conversion may take; past it, the page's plain text is returned instead."""
_TAG = re.compile(r"<[A-Za-z/!?]")
_COMMENT_END = re.compile(r"--\s*>")
_ODD_DOTS = ("\u3002", "\uff0e", "\uff61")  # IDNA reads these as ".", a URL parser (and so a rule) does not
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript")


def _check_url(url: str) -> tuple[str, str]:
    """``(url, host)`` for an http(s) URL with a host and a valid port; the host's addresses are checked when
    the client connects (:mod:`subagents.tools.web_guard`), on the address it connects to."""
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # a port out of range or not a number raises here
    except ValueError as e:
        raise ToolError(f"the URL {url!r} is not valid ({e}); pass a full URL such as https://example.com/page."
                        ) from None
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"only http:// and https:// URLs can be fetched, got {url!r}.")
    if not parts.hostname:
        raise ToolError(f"the URL {url!r} has no host; pass a full URL such as https://example.com/page.")
    if any(d in parts.hostname for d in _ODD_DOTS):  # the host connected to would not be the host the rules saw
        raise ToolError(f"the host of {url!r} is written with a non-ASCII dot; write it with '.' instead.")
    return parts.geturl(), parts.hostname.lower()


def _flatten_deep(root: Tag) -> None:
    """Replace the elements nested :data:`MAX_DEPTH` levels down by their text (iteratively: no recursion here;
    a parent's content is replaced at once: one child at a time costs a search of the parent's children each)."""
    from bs4 import Tag

    stack = [(root, 0)]
    while stack:
        tag, level = stack.pop()
        children = [c for c in tag.children if isinstance(c, Tag)]
        if level + 1 >= MAX_DEPTH and children:
            tag.string = tag.get_text()
        else:
            stack.extend((c, level + 1) for c in children)


class _Late(Exception):
    """The conversion ran past :data:`CONVERT_S`, or its caller stopped waiting."""


def _defuse(html: str) -> str:
    """``html`` without the markup Python's ``html.parser`` rescans to the end of the page for, once each (a page of
    them takes minutes): what can no longer close (``<`` after the last ``>``, ``<!--`` after the last ``-->``)
    is escaped, as the parser would read it as text anyway; ``<![`` becomes a bogus comment ending at the next
    ``>``, as in a browser (the parser would search for ``]]>``, or reject ``<![foo`` outright)."""
    last = html.rfind(">")
    html = html[: last + 1] + html[last + 1 :].replace("<", "&lt;")
    closed = max((m.end() for m in _COMMENT_END.finditer(html)), default=0)
    html = html[:closed] + html[closed:].replace("<!--", "&lt;!--")
    return html.replace("<![", "<! [")


def _to_markdown(body: str, content_type: str) -> tuple[str, bool, str]:
    """``(text, cut, note)``: the page as Markdown (HTML) or as is, whether its end was left out, and a note on
    how it was converted when not as usual."""
    if "html" not in content_type:
        return body, False, ""
    from bs4 import BeautifulSoup  # lazy: only when a page is fetched (markdownify's own dependency)
    from markdownify import MarkdownConverter

    deadline = time.monotonic() + CONVERT_S

    def check() -> None:
        if time.monotonic() > deadline or cancelled():
            raise _Late

    class Converter(MarkdownConverter):
        # The clock is checked per element and text, on the way in and out: markdownify's cost per element can
        # grow with the page (numbering an <ol>'s items, a <thead>'s rows, prefixing the lines of nested quotes),
        # so a page built for it would otherwise run for minutes.
        def process_tag(self, node: Any, *args: Any, **kwargs: Any) -> Any:
            check()
            parent: Any = super()
            out = parent.process_tag(node, *args, **kwargs)
            check()
            return out

        def process_text(self, node: Any, *args: Any, **kwargs: Any) -> Any:
            check()
            parent: Any = super()
            return parent.process_text(node, *args, **kwargs)

    cut = next((m.start() for i, m in enumerate(_TAG.finditer(body)) if i == MAX_TAGS), None)
    soup = BeautifulSoup(_defuse(body if cut is None else body[:cut]), "html.parser")
    for t in soup(["script", "style", "noscript", "template", "head"]):
        t.decompose()
    _flatten_deep(soup)
    note = f"only the first {MAX_TAGS:,} tags of the page were converted" if cut is not None else ""
    try:
        text: str = Converter(heading_style="ATX").convert_soup(soup)
    except _Late:
        text = soup.get_text("\n")
        note = f"converting the page to Markdown took over {CONVERT_S:g} s: its plain text is shown instead"
    lines = [ln.rstrip() for ln in text.splitlines()]
    out: list[str] = []
    for ln in lines:  # collapse the blank runs HTML layout leaves
        if ln or (out and out[-1]):
            out.append(ln)
    return "\n".join(out).strip(), cut is not None, note


_NOT_CHARSETS = frozenset({"punycode", "idna", "undefined", "unicode-escape", "raw-unicode-escape"})
"""Python codecs a page may name as its charset that are no character set: they rewrite text (or refuse it)."""


def _decode_text(data: bytes, encoding: str | None) -> str:
    name = "utf-8"
    if encoding:
        try:
            info = codecs.lookup(encoding)
        except LookupError:  # unknown
            info = None
        if info is not None and info._is_text_encoding and info.name not in _NOT_CHARSETS:  # (not base64, rot13)
            name = info.name
    try:
        return data.decode(name, errors="replace")
    except UnicodeError:  # one that cannot replace bad bytes
        return data.decode("utf-8", errors="replace")


async def _fetch(url: str, allowed: Collection[str]) -> tuple[str, str, str, int, bool]:
    """``(final url, content type, text, status, truncated)``; a cross-host redirect raises ToolError."""
    import httpx

    from .web_guard import BodyDecoder, guarded_transport

    current, host = _check_url(url)
    async with httpx.AsyncClient(transport=guarded_transport(allowed), follow_redirects=False, timeout=TIMEOUT_S,
                                 trust_env=False, headers={"User-Agent": "subagents-web-fetch/1",
                                                           "Accept-Encoding": "gzip, deflate"}) as client:
        for _ in range(MAX_REDIRECTS + 1):
            async with client.stream("GET", current) as resp:
                if resp.is_redirect and "location" in resp.headers:
                    target = urljoin(current, resp.headers["location"])
                    new_url, new_host = _check_url(target)
                    if new_host != host:
                        raise ToolError(f"{current} redirects to another host: {new_url}. Call web_fetch again "
                                        "with that URL if you want it.")
                    current = new_url
                    continue
                ctype = resp.headers.get("content-type", "").lower()
                if ctype and not ctype.startswith(_TEXT_TYPES):
                    raise ToolError(f"{current} is {ctype.split(';')[0]}, not text or HTML; web_fetch returns "
                                    "text only.")
                decoder = BodyDecoder(resp.headers.get("content-encoding", ""))
                chunks: list[bytes] = []
                size = 0
                async for raw in resp.aiter_raw():  # decoded here, a bounded piece at a time (no gzip bombs)
                    chunk = decoder.decode(raw, MAX_BYTES - size)
                    chunks.append(chunk)
                    size += len(chunk)
                    if size >= MAX_BYTES:
                        break
                return current, ctype, _decode_text(b"".join(chunks), resp.encoding), resp.status_code, \
                    size >= MAX_BYTES
    raise ToolError(f"{url} redirected more than {MAX_REDIRECTS} times; giving up.")


def web_fetch_tool(*, allow_private_hosts: Collection[str] = (), name: str = "web_fetch") -> FunctionTool:
    """A ``web_fetch`` tool; ``allow_private_hosts`` names hosts it may reach although they resolve to
    loopback or private addresses (e.g. ``["localhost", "127.0.0.1"]`` for a local documentation server)."""
    allowed = frozenset(h.strip().strip("[]").lower() for h in allow_private_hosts)

    async def web_fetch(url: str, prompt: str = "") -> str:
        """Fetch a web page (http or https) and return its content as Markdown.

        Args:
            url: the full URL to fetch, e.g. https://docs.python.org/3/library/ast.html.
            prompt: what you want from the page; it is shown above the content to guide your reading.
        """
        try:
            import anyio  # lazy: only when a page is fetched (httpx's own dependency)
            import httpx
            import markdownify  # noqa: F401
        except ImportError:
            raise ToolError("web_fetch needs the httpx and markdownify packages: pip install 'subagents[web]'"
                            ) from None
        try:
            with anyio.fail_after(TOTAL_TIMEOUT_S):
                final, ctype, body, status, truncated = await _fetch(url, allowed)
                text, cut, note = await call_in_thread(_to_markdown, body, ctype)
        except TimeoutError:
            raise ToolError(f"fetching {url} took longer than {TOTAL_TIMEOUT_S:g} s in all; giving up (a slow or "
                            "stalled server).") from None
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise ToolError(f"fetching {url} failed: {type(e).__name__}: {e}; check the URL or try later.") from None
        truncated = truncated or cut
        if len(text) > MAX_CHARS:
            text, truncated = text[:MAX_CHARS], True
        head = [f"URL: {final}", f"Status: {status}"]
        if prompt:
            head.append(f"Asked: {prompt}")
        if status >= 400:
            head.append(f"(the server answered with an error, HTTP {status})")
        notes = [f"[... page truncated: the first {len(text):,} characters shown ...]"] if truncated else []
        notes += [f"[{note}]"] if note else []
        tail = "\n\n" + "\n".join(notes) if notes else ""
        return "\n".join(head) + "\n\n" + (text or "(empty page)") + tail

    return FunctionTool(web_fetch, name=name, category=ToolCategory.EXECUTE)


web_fetch: FunctionTool = web_fetch_tool()
"""The default ``web_fetch``: public hosts only."""
