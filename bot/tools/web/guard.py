"""The network guard: no web request of Tusk's reaches the owner's own network unless the owner said so.

    guard = Guard(parse_allow("localhost:8888, wiki.lan"))
    async with GuardedClient(guard, user_agent, timeout) as client:
        resp = await client.request("GET", url, max_bytes=...)   # raises WebRefused, saying why

Before any connection, `Guard.check(url)`:
  1. parses the URL: http or https only, no user:password@, port 80/443 unless the owner allowed host:port;
  2. resolves the host once (getaddrinfo in a thread: decimal, octal and hex IPv4 spellings such as
     2130706433, 0177.0.0.1 or 0x7f.1 come back as the address they mean);
  3. refuses if any address is loopback, private, link-local (169.254/16 with cloud metadata, fe80::/10),
     multicast, reserved, unspecified, shared (100.64/10) or otherwise not global, or an IPv6 form of such an
     IPv4 address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, 6to4 2002::/16, NAT64 64:ff9b::/96).

The connection then goes to the checked addresses only: the client's connector has a resolver
(`PinnedResolver`) that answers from the check's result and never asks DNS again, while the Host header and
the TLS server name stay the URL's host. Redirects are followed by hand (at most `max_redirects`), each one
checked the same way. `TUSK_WEB_ALLOW_HOSTS` names hosts (`host`: on ports 80/443; `host:port`: that port)
that may be reached even when they resolve inside: the owner's intranet wiki, their SearXNG on localhost.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from bot.errors import WebError, WebRefused

logger = logging.getLogger(__name__)

DEFAULT_PORTS = {"http": 80, "https": 443}
IP = ipaddress.IPv4Address | ipaddress.IPv6Address
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not "private" to Python, not public either
NAT64 = ipaddress.ip_network("64:ff9b::/96")
REDIRECTS = frozenset({301, 302, 303, 307, 308})

Allow = frozenset[tuple[str, int | None]]


def parse_allow(text: str) -> Allow:
    """`TUSK_WEB_ALLOW_HOSTS`: comma-separated `host` or `host:port` (IPv6 as `[::1]:8080`)."""
    allowed: set[tuple[str, int | None]] = set()
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        url = URL(f"http://{item}")
        if not url.host or url.path not in ("", "/") or url.user:
            raise ValueError(f"{item!r} is not a host or host:port")
        allowed.add((url.host.lower().rstrip("."), url.explicit_port))
    return frozenset(allowed)


def why_inside(ip: IP) -> str | None:
    """Why `ip` is no address for the open web (None: it is a public one)."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = None
        if ip.ipv4_mapped is not None:
            embedded, form = ip.ipv4_mapped, "IPv4-mapped"
        elif ip.sixtofour is not None:
            embedded, form = ip.sixtofour, "6to4"
        elif ip in NAT64:
            embedded, form = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
        elif int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d, deprecated IPv4-compatible form
            embedded, form = ipaddress.IPv4Address(int(ip)), "IPv4-compatible"
        if embedded is not None and (why := why_inside(embedded)):
            return f"the {form} form of {why}"
    for why, inside in (("an unspecified address", ip.is_unspecified), ("a loopback address", ip.is_loopback),
                        ("a link-local address (where cloud metadata lives)", ip.is_link_local),
                        ("a multicast address", ip.is_multicast), ("a shared (CGNAT) address", ip in SHARED),
                        ("a private address", ip.is_private), ("a reserved address", ip.is_reserved),
                        ("a non-public address", not ip.is_global)):
        if inside:
            return why
    return None


@dataclass(frozen=True, slots=True)
class Target:
    url: URL
    host: str  # lower case, no trailing dot
    port: int
    addresses: tuple[str, ...]  # what the connection may reach


class Guard:
    def __init__(self, allow: Allow = frozenset()) -> None:
        self.allow = allow

    def allowing(self, url: str) -> Guard:
        """This guard with `url`'s host:port allowed too (a search backend the owner configured)."""
        parsed = URL(url)
        host = (parsed.host or "").lower().rstrip(".")
        return Guard(self.allow | {(host, parsed.port)}) if host else self

    def _allowed(self, host: str, port: int, default_port: bool) -> bool:
        return (host, port) in self.allow or (default_port and (host, None) in self.allow)

    async def check(self, url: str | URL) -> Target:
        """The URL parsed, resolved and checked; WebRefused (logged) saying why otherwise."""
        try:
            return await self._check(URL(url) if isinstance(url, str) else url)
        except WebRefused as exc:
            logger.warning("web request refused: %s", exc)
            raise

    async def _check(self, url: URL) -> Target:
        if url.scheme not in DEFAULT_PORTS:
            raise WebRefused(f"{str(url)[:200]!r}: only http and https URLs can be read, "
                             f"not {url.scheme or 'a relative URL'!r}")
        if url.user is not None or url.password is not None:
            raise WebRefused("URLs with a user name or password in them are not fetched")
        host = (url.host or "").lower().rstrip(".")
        if not host:
            raise WebRefused(f"{str(url)[:200]!r} has no host")
        port = url.port or DEFAULT_PORTS[url.scheme]
        default_port = port in (80, 443)
        allowed = self._allowed(host, port, default_port)
        if not default_port and not allowed:
            raise WebRefused(f"port {port} of {host} is not open to Tusk: only 80 and 443, unless the owner "
                             f"adds {host}:{port} to TUSK_WEB_ALLOW_HOSTS")
        addresses = await resolve(host, port)
        if not allowed:
            for address in addresses:
                if why := why_inside(ipaddress.ip_address(address)):
                    raise WebRefused(f"{host} resolves to {address}, {why}: Tusk does not reach into "
                                     f"the owner's network unless the owner adds {host} to TUSK_WEB_ALLOW_HOSTS")
        return Target(url, host, port, addresses)


async def resolve(host: str, port: int) -> tuple[str, ...]:
    """Every address of `host`, asked once (in a thread, as getaddrinfo blocks)."""
    try:
        infos = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebError(f"cannot resolve {host}: {exc}") from exc
    found = [info[4][0] for info in infos]  # an IPv4 or IPv6 socket address: the address first, as a string
    addresses = tuple(dict.fromkeys(str(ipaddress.ip_address(a.split("%")[0])) for a in found if isinstance(a, str)))
    if not addresses:
        raise WebError(f"{host} has no address")
    return addresses


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver that answers only with addresses the guard checked: no second DNS lookup."""

    def __init__(self) -> None:
        self.pins: dict[str, tuple[str, ...]] = {}

    def pin(self, target: Target) -> None:
        self.pins[target.host] = target.addresses

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        addresses = self.pins.get(host.lower().rstrip("."))
        if not addresses:
            raise OSError(f"{host} was not checked by the network guard")
        return [ResolveResult(hostname=host, host=a, port=port,
                              family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST) for a in addresses]

    async def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    url: URL  # the final one, after redirects
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool  # the body went past max_bytes and was cut there
    redirected_from: URL | None = None

    def text(self) -> str:
        return self.body.decode(self.charset or "utf-8", errors="replace")


class GuardedClient:
    """An aiohttp session whose every request and redirect passes the guard and connects where it checked."""

    def __init__(self, guard: Guard, user_agent: str, timeout: float, max_redirects: int = 5) -> None:
        self.guard = guard
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.resolver = PinnedResolver()
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(resolver=self.resolver, use_dns_cache=False, force_close=True),
            headers={"User-Agent": user_agent}, auto_decompress=True, trust_env=False)

    async def __aenter__(self) -> GuardedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    async def request(self, method: str, url: str | URL, *, max_bytes: int, **kw: Any) -> Response:
        """One request with its redirects, each hop checked; the body read up to `max_bytes`."""
        first = URL(url) if isinstance(url, str) else url
        current = first
        try:
            async with asyncio.timeout(self.timeout):
                for _ in range(self.max_redirects + 1):
                    target = await self.guard.check(current)
                    self.resolver.pin(target)
                    async with self.session.request(method, current, allow_redirects=False, **kw) as resp:
                        location = resp.headers.get("Location")
                        if resp.status in REDIRECTS and location:
                            current = current.join(URL(location))
                            if resp.status == 303 or (resp.status in (301, 302) and method == "POST"):
                                method, kw = "GET", {k: v for k, v in kw.items() if k not in ("json", "data")}
                            continue
                        body, truncated = await _read(resp, max_bytes)
                        return Response(resp.status, current, resp.content_type, resp.charset, body, truncated,
                                        first if current != first else None)
        except TimeoutError as exc:
            raise WebError(f"{first.host} did not answer within {self.timeout:g} s") from exc
        except aiohttp.ClientError as exc:
            raise WebError(f"cannot reach {current.host}: {exc}") from exc
        raise WebError(f"more than {self.max_redirects} redirects from {first}")


async def _read(resp: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """The body, streamed, stopping once past `max_bytes` (no more is read from the network)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


__all__ = ["Guard", "GuardedClient", "PinnedResolver", "Response", "Target", "parse_allow", "resolve", "why_inside"]
