"""Loopback stand-ins for the web: pages of several shapes, and the search APIs Tusk speaks to.

    async with FakeWeb() as site:        # http://127.0.0.1:PORT, reached through TUSK_WEB_ALLOW_HOSTS=site.allow
        site.base + "/article"            # an article among nav, ads and footer
        site.requests                     # (method, path, headers) of every request, in order

Routes: /article, /doc.pdf (a tiny valid PDF), /notes.txt, /redirect/<n> (a chain ending at /article),
/to-loopback and /to-metadata (a redirect to 127.0.0.1 / 169.254.169.254 on the default port), /big (past any
small byte cap), /dense (text of long words: more characters a token than the caps' ratio), /slow (answers after 5 s), /private/... (disallowed by /robots.txt), /missing (404).
Search APIs, with the shapes their documentation gives: SearXNG `/search?format=json` and `/config`,
Brave `/res/v1/web/search` (X-Subscription-Token), Tavily `POST /search` (api_key in the body or a bearer
token). `site.key` is the good key; `site.searxng_json = False` plays a SearXNG without the JSON format; `site.search_status` forces an error status (429, 432, 500, ...).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.fakes.loopback import serve

NAV = "<nav><ul><li><a href='/'>Home</a></li><li><a href='/shop'>Shop</a></li><li>NAVMENU Subscribe</li></ul></nav>"
ADS = "<aside class='ad'>ADVERT: buy the Otter 3000 today</aside>"
FOOT = "<footer>FOOTERTEXT Copyright 2026 Example News. Privacy. Terms.</footer>"
ARTICLE = (
    "<!doctype html><html><head><title>Sea otters hold hands | Example News</title>"
    "<meta property='article:published_time' content='2026-11-30T08:00:00Z'></head><body>"
    f"{NAV}{ADS}<main><article><h1>Sea otters hold hands</h1>"
    "<p>Sea otters hold hands while they sleep so that they do not drift apart on the current. "
    "Researchers at the kelp station counted rafts of up to forty animals.</p>"
    "<p>The habit is called rafting, and young otters learn it from their mothers within weeks. "
    "Otters also wrap themselves in kelp fronds to stay anchored in one place overnight.</p>"
    "<p>The station's keeper said the otters' favourite stone is kept under the left armpit.</p>"
    f"</article></main>{ADS}{FOOT}</body></html>")


# Long words in common use: about 9 characters a token, so 4,000 tokens of it are ~36,000 characters
DENSE = ("Extraordinarily comprehensive international telecommunications infrastructure modernisation programmes "
         "necessitated considerable interdepartmental coordination, notwithstanding governmental reorganisation. ")


def tiny_pdf(text: str) -> bytes:
    """A small valid one-page PDF whose text layer is `text` (Helvetica), xref offsets computed."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def fixed(make):  # type: ignore[no-untyped-def]
    """An async handler answering `make()` (aiohttp takes only async handlers)."""
    async def handler(request: web.Request) -> web.StreamResponse:
        return make()
    return handler


def go(location: str):  # type: ignore[no-untyped-def]
    async def handler(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(location)
    return handler


class FakeWeb:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.key = "good-key"
        self.search_status: int | None = None
        self.searxng_json = True  # False: a SearXNG whose settings.yml lacks `json` in search.formats
        self.base = ""
        self.port = 0
        app = web.Application(middlewares=[self._record])
        get = app.router.add_get
        get("/article", fixed(lambda: web.Response(text=ARTICLE, content_type="text/html")))
        get("/doc.pdf", fixed(lambda: web.Response(body=tiny_pdf("Quarterly otter census: 41 animals"),
                                               content_type="application/pdf")))
        get("/notes.txt", fixed(lambda: web.Response(text="plain notes: bring kelp\n", content_type="text/plain")))
        get("/redirect/{n}", self._redirect)
        get("/to-loopback", go("http://127.0.0.1/admin"))
        get("/to-metadata", go("http://169.254.169.254/latest/meta-data/"))
        get("/big", fixed(lambda: web.Response(text="<html><body><p>" + "otter " * 200_000 + "</p></body></html>",
                                           content_type="text/html")))
        get("/dense", fixed(lambda: web.Response(text=DENSE * 400, content_type="text/plain")))
        get("/slow", self._slow)
        get("/private/secret", fixed(lambda: web.Response(text="secret", content_type="text/plain")))
        get("/robots.txt", fixed(lambda: web.Response(text="User-agent: *\nDisallow: /private/\n")))
        get("/search", self._searxng)
        get("/config", fixed(lambda: web.json_response({"instance_name": "SearXNG", "version": "2026.11.1"})))
        get("/res/v1/web/search", self._brave)
        app.router.add_post("/search", self._tavily)
        self.app = app

    async def __aenter__(self) -> FakeWeb:
        self.runner, self.base = await serve(self.app)
        self.port = int(self.base.rsplit(":", 1)[1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()

    @property
    def allow(self) -> str:
        return f"127.0.0.1:{self.port}"

    @web.middleware
    async def _record(self, request: web.Request, handler):  # type: ignore[no-untyped-def]
        self.requests.append((request.method, request.path_qs, dict(request.headers)))
        return await handler(request)

    async def _redirect(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        raise web.HTTPFound(f"/redirect/{n - 1}" if n > 1 else "/article")

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="late")

    async def _searxng(self, request: web.Request) -> web.Response:
        if request.query.get("format") != "json" or not self.searxng_json:
            return web.Response(status=403, text="403 Forbidden")  # json not enabled in settings.yml
        if self.search_status:
            return web.Response(status=self.search_status, text="Too Many Requests")
        q = request.query.get("q", "")
        return web.json_response({"query": q, "number_of_results": 2, "results": [
            {"url": "https://example.org/otters", "title": f"All about {q}", "content": "Otters hold hands.",
             "engine": "duckduckgo", "publishedDate": "2026-11-30T00:00:00"},
            {"url": "https://example.net/kelp", "title": "Kelp forests", "content": "Where otters sleep.",
             "engine": "bing", "publishedDate": None}], "answers": [], "suggestions": []})

    async def _brave(self, request: web.Request) -> web.Response:
        if request.headers.get("X-Subscription-Token") != self.key:
            return web.json_response({"type": "ErrorResponse", "error": {
                "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid.",
                "status": 422}}, status=422)
        if self.search_status:
            return web.json_response({"type": "ErrorResponse", "error": {
                "code": "RATE_LIMITED", "detail": "Request rate limit exceeded for plan.",
                "status": self.search_status}}, status=self.search_status)
        q = request.query.get("q", "")
        return web.json_response({"type": "search", "query": {"original": q}, "web": {"type": "search", "results": [
            {"title": f"{q} facts", "url": "https://example.org/otters", "description": "Otters <strong>hold</strong> hands.",
             "age": "November 30, 2026", "page_age": "2026-11-30T00:00:00"}]}})

    async def _tavily(self, request: web.Request) -> web.Response:
        body = await request.json()
        key = body.get("api_key") or request.headers.get("Authorization", "").removeprefix("Bearer ")
        if key != self.key:
            return web.json_response({"detail": {"error": "Unauthorized: missing or invalid API key."}}, status=401)
        if self.search_status:
            return web.json_response({"detail": {"error": "Usage limit exceeded"}}, status=self.search_status)
        return web.json_response({"query": body.get("query"), "answer": None, "images": [], "results": [
            {"title": "Otter facts", "url": "https://example.org/otters", "content": "Otters hold hands.",
             "score": 0.9, "published_date": "Sun, 30 Nov 2026 08:00:00 GMT"}], "response_time": 0.4})
