"""The network side of ``web_fetch``: the address checked is the address connected to, and a body is decoded
within the size cap.

Imported lazily by :mod:`subagents.tools.web` (it needs the optional ``httpx``).  The host check runs in the
HTTP client's own connect step (:class:`GuardedBackend`), on the host the client is about to reach: it
resolves the name once, refuses it if any address is loopback, private, link-local or otherwise
non-public, and connects to an address it checked.  A name that resolves to a public address when looked
at and to ``127.0.0.1`` a moment later (DNS rebinding), or a URL two parsers read differently, therefore
cannot reach the machine's own services.  :class:`BodyDecoder` inflates ``gzip``/``deflate`` bodies a
bounded piece at a time, so a small compressed body cannot expand to gigabytes in memory.
"""

from __future__ import annotations

import ipaddress
import socket
import zlib
from collections.abc import Collection, Iterable
from typing import Any

import anyio
import httpcore
import httpx

from ..exceptions import ToolError

__all__ = ["BodyDecoder", "GuardedBackend", "guarded_transport", "is_public"]

_EMBEDS_V4 = (ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated)
              ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))  # NAT64
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # deprecated, still routed on some internal networks


def is_public(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``addr`` is a globally reachable address, looking through IPv6 forms that carry an IPv4 one."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return addr.ipv4_mapped.is_global
        if addr.sixtofour is not None and not addr.sixtofour.is_global:
            return False
        if any(addr in net for net in _EMBEDS_V4):
            return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF).is_global
        if addr in _SITE_LOCAL:
            return False
    return addr.is_global


def refusal(host: str, addr: object) -> ToolError:
    return ToolError(
        f"refused: {host!r} resolves to {addr}, a loopback, private or otherwise non-public address; "
        "web_fetch reaches public hosts only. To allow this host, add it to [web] allow_private_hosts in "
        "your user config file (subagents config show names it), or build the tool with "
        f"web_fetch_tool(allow_private_hosts=[{host!r}]).")


async def public_addresses(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, all of them public, or a :class:`ToolError`."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise ToolError(f"cannot resolve the host {host!r} ({e}); check the URL.") from None
    out: list[str] = []
    for info in infos:
        ip = str(info[4][0]).split("%", 1)[0]
        if not is_public(ipaddress.ip_address(ip)):
            raise refusal(host, ipaddress.ip_address(ip))
        if ip not in out:
            out.append(ip)
    if not out:
        raise ToolError(f"cannot resolve the host {host!r}; check the URL.")
    return out


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to checked public addresses, or to a host the user's config allows by name."""

    def __init__(self, allowed: Collection[str]) -> None:
        self._allowed = allowed
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        name = host.strip("[]").lower()
        if name in self._allowed:
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        error: Exception | None = None
        for ip in await public_addresses(name, port):  # connect to the address checked, not a new lookup
            try:
                return await self._inner.connect_tcp(ip, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                error = e
        assert error is not None
        raise error

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("web_fetch does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_transport(allowed: Collection[str]) -> httpx.AsyncHTTPTransport:
    """An httpx transport (no proxy, no environment) whose every connection goes through :class:`GuardedBackend`."""
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    if not isinstance(getattr(transport, "_pool", None), httpcore.AsyncConnectionPool):  # pragma: no cover
        raise RuntimeError("this httpx version builds its transport differently; web_fetch cannot guard it")
    transport._pool = httpcore.AsyncConnectionPool(ssl_context=httpx.create_ssl_context(),
                                                   network_backend=GuardedBackend(allowed))
    return transport


class BodyDecoder:
    """Undo a ``Content-Encoding`` (none, ``gzip`` or ``deflate``) without producing more than asked for."""

    def __init__(self, header: str) -> None:
        codings = [c.strip().lower() for c in header.split(",") if c.strip().lower() not in ("", "identity")]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise ToolError(f"the page is sent with Content-Encoding {header!r}; web_fetch reads identity, gzip "
                            "or deflate only.")
        self._coding = codings[0] if codings else ""
        self._inflater = zlib.decompressobj(31 if self._coding in ("gzip", "x-gzip") else 15)
        self._started = False

    def decode(self, chunk: bytes, limit: int) -> bytes:
        """At most ``limit`` (> 0) bytes of the decoded body for the next raw ``chunk``."""
        if not self._coding:
            return chunk[:limit]
        try:
            try:
                return self._inflater.decompress(chunk, limit)
            except zlib.error:
                if self._coding != "deflate" or self._started:
                    raise
                self._inflater = zlib.decompressobj(-15)  # "deflate" sent raw, without the zlib header
                return self._inflater.decompress(chunk, limit)
            finally:
                self._started = True
        except zlib.error as e:
            raise ToolError(f"the page's {self._coding} data is corrupt ({e}).") from None
