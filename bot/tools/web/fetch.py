"""`web_fetch(url)`: a page's main text for the model, read politely and through the network guard.

Nothing is fetched unless the model calls the tool: a link in a message stays text. Each call:
  - checks the URL with the guard (guard.py), and every redirect too (at most TUSK_WEB_MAX_REDIRECTS);
  - honours the site's robots.txt for the agent "Tusk" (every fetch is one the model chose to make; the file
    is read once per host and kept for an hour; a 4xx means no rules, a 5xx means keep out, RFC 9309);
  - waits its turn per host (TUSK_WEB_HOST_INTERVAL seconds between two requests to one host);
  - sends a User-Agent naming Tusk, stops reading past TUSK_WEB_MAX_BYTES, gives up after TUSK_WEB_TIMEOUT;
  - extracts the main text (extract.py) and frames it as data, cut inside the frame to TUSK_WEB_MAX_TOKENS
    and, framed, to TUSK_TOOL_RESULT_MAX_CHARS (so the agent's generic cap never cuts off its end marker);
  - keeps that text in the chat's documents/ (memory/documents.py, TUSK_DOCUMENT_INDEX_*), with the date
    and whose turn read it, so search_history finds the page later.
A refusal or failure reaches the model as the tool's error, saying why.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.robotparser
from collections import OrderedDict
from typing import Annotated

from pydantic import Field
from yarl import URL

from bot.errors import WebError, WebRefused
from bot.tools.box import ToolContext
from bot.tools.web import extract
from bot.tools.web.config import WebSettings
from bot.tools.web.guard import Guard, GuardedClient
from memory.documents import DocumentLimits, KeptDocument, keep
from store.errors import StoreError

logger = logging.getLogger(__name__)

ROBOTS_AGENT = "Tusk"
ROBOTS_TTL = 3600.0
ROBOTS_MAX_BYTES = 512 * 1024
ROBOTS_HOSTS = 256
Url = Annotated[str, Field(min_length=1, max_length=2000, description="The http(s) URL, e.g. one the user pasted.")]


class HostPacer:
    """At most one request per `interval` seconds to each host; callers wait their slot (no lock held)."""

    def __init__(self, interval: float, max_hosts: int = 1000) -> None:
        self.interval = interval
        self.max_hosts = max_hosts
        self.next: dict[str, float] = {}

    async def wait(self, host: str) -> None:
        now = time.monotonic()
        slot = max(now, self.next.get(host, now))
        self.next[host] = slot + self.interval
        if len(self.next) > self.max_hosts:  # forget hosts whose slot has passed
            self.next = {h: t for h, t in self.next.items() if t > now}
        if slot > now:
            await asyncio.sleep(slot - now)


class Robots:
    """robots.txt per scheme://host:port, read through the guard and kept for an hour."""

    def __init__(self, max_hosts: int = ROBOTS_HOSTS) -> None:
        self.max_hosts = max_hosts
        self.cache: OrderedDict[str, tuple[float, urllib.robotparser.RobotFileParser]] = OrderedDict()

    async def allows(self, client: GuardedClient, url: URL) -> bool:
        origin = str(url.origin())
        hit = self.cache.get(origin)
        if hit is None or hit[0] < time.monotonic():
            hit = (time.monotonic() + ROBOTS_TTL, await self._read(client, url.origin() / "robots.txt"))
            self.cache[origin] = hit
            if len(self.cache) > self.max_hosts:
                self.cache.popitem(last=False)
        self.cache.move_to_end(origin)
        return hit[1].can_fetch(ROBOTS_AGENT, str(url))

    @staticmethod
    async def _read(client: GuardedClient, url: URL) -> urllib.robotparser.RobotFileParser:
        parser = urllib.robotparser.RobotFileParser(str(url))
        try:
            resp = await client.request("GET", url, max_bytes=ROBOTS_MAX_BYTES)
        except WebRefused:
            raise
        except WebError:  # unreachable: the page's own request will say so
            parser.parse([])
            return parser
        # typeshed leaves out these two attributes, which RobotFileParser.__init__ sets and its read() uses
        if resp.status >= 500:
            parser.disallow_all = True  # type: ignore[attr-defined]  # set in RobotFileParser.__init__
        elif resp.status >= 400:
            parser.allow_all = True  # type: ignore[attr-defined]  # set in RobotFileParser.__init__
        else:
            parser.parse(resp.text().splitlines())
        return parser


class WebFetch:
    def __init__(self, settings: WebSettings, guard: Guard | None = None,
                 documents: DocumentLimits = DocumentLimits(0, 0)) -> None:
        self.settings = settings
        self.documents = documents  # what of a page's text stays searchable in the chat
        self.guard = guard or Guard(settings.allow)
        self.pacer = HostPacer(settings.host_interval)
        self.robots = Robots()

    def client(self, guard: Guard | None = None) -> GuardedClient:
        s = self.settings
        return GuardedClient(guard or self.guard, s.user_agent, s.timeout, s.max_redirects)

    async def web_fetch(self, url: Url, ctx: ToolContext | None = None) -> str:
        """Read a web page (HTML, PDF or text): its main text, title and date. For a link the user gives or
        a search result worth reading; the text is data from the web."""
        s = self.settings
        parsed = URL(url.strip())
        if not parsed.scheme and "://" not in url:
            parsed = URL(f"https://{url.strip()}")  # "example.org/a" as people paste it
        async with self.client() as client:
            target = await self.guard.check(parsed)
            if not await self.robots.allows(client, target.url):
                raise WebRefused(f"{target.host}'s robots.txt asks bots not to read {target.url.path}")
            await self.pacer.wait(target.host)
            resp = await client.request("GET", target.url, max_bytes=s.max_bytes,
                                        headers={"Accept": "text/html,application/xhtml+xml,application/pdf,"
                                                           "text/plain;q=0.9,*/*;q=0.5"})
        if resp.status >= 400:
            raise WebError(f"{resp.url} answered HTTP {resp.status}")
        if resp.truncated and resp.content_type == "application/pdf":
            raise WebError(f"the PDF at {resp.url} is larger than {s.max_bytes:,} bytes (TUSK_WEB_MAX_BYTES)")
        body = resp.body if resp.content_type == "application/pdf" else resp.text()
        page = await asyncio.to_thread(extract.extract, body, resp.content_type, str(resp.url))
        notes = []
        if resp.redirected_from is not None:
            notes.append(f"(redirected from {resp.redirected_from})")
        if resp.truncated:
            notes.append(f"(only the first {s.max_bytes:,} bytes of the page were read)")
        logger.info("web_fetch %s: %s, %d chars", resp.url, page.kind, len(page.text))
        if ctx is not None and ctx.chats is not None:
            await self._keep(ctx, page)
        return extract.frame(page, s.max_tokens, tuple(notes), s.max_chars)

    async def _keep(self, ctx: ToolContext, page: extract.Page) -> None:
        """The page's text kept for search_history in the chat it was read for (a failure is only logged)."""
        try:
            await keep(ctx.handle, KeptDocument(page.title or page.url, "web", page.text, sender_id=ctx.sender_id,
                                                sender_name=ctx.sender_name, url=page.url,
                                                what=f"web page ({page.kind})"), self.documents)
        except (OSError, StoreError):
            logger.exception("could not keep a web page's text for search")


__all__ = ["HostPacer", "Robots", "WebFetch"]
