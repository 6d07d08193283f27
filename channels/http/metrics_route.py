"""GET /metrics: the Prometheus text format (bot/metrics.py), behind the API token unless TUSK_METRICS=open,
which answers requests from this machine (a loopback peer) without it."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what prometheus_client's CONTENT_TYPE_LATEST says


def metrics_routes(render: Callable[[], bytes]) -> list[web.RouteDef]:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=render(), headers={"Content-Type": CONTENT_TYPE})

    return [web.get("/metrics", metrics)]
