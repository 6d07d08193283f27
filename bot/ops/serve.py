"""`tusk run`: Tusk serving every configured channel and the local HTTP API until a signal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from typing import TYPE_CHECKING, cast

from bot.config import Settings

if TYPE_CHECKING:
    from bot.cluster.roles import Role

logger = logging.getLogger("tusk")


def run(args: argparse.Namespace, settings: Settings) -> int:
    settings.llm_settings()  # fail fast, before the slow imports, on a missing model
    asyncio.run(_serve(settings, getattr(args, "role", "all")))
    return 0


async def _serve(settings: Settings, role: str = "all") -> None:
    from bot import running
    from bot.errors import HomeBusy

    if (there := running.holder(settings.home)) is not None:  # refused before anything is built or written
        raise HomeBusy(there.refusal(), there)
    from bot.app import TuskApp

    app = TuskApp(settings, role=cast("Role", role))  # argparse's choices are the roles
    http = app.add_http()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():  # second signal: leave now; appends are fsynced line by line, so files stay loadable
            os._exit(1)
        logger.info("stopping: finishing running turns (a second signal exits at once)")
        app.readiness.drain()  # /readyz says 503 from now on: a balancer sends no more work here
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    platforms = app.add_platforms()  # a worker's only send (each platform's API): they take no platform traffic
    for variable in settings.open_allow_lists():
        logger.warning("%s is empty: anyone who finds the bot can talk to it and spend your LLM credits. "
                       "Set it to the user ids allowed to use Tusk.", variable)
    if platforms and settings.dm_policy == "pairing":
        logger.info("strangers who write to the bot get a pairing code: `tusk pairing list` shows them, "
                    "`tusk pairing approve CODE` lets one in")
    async with app:
        from bot.places import settings_file  # said once started: a start that fails is one line, the error

        logger.info("settings file: %s; data dir: %s", settings_file().describe(), settings.home.absolute())
        names = ", ".join(c.name for c in platforms)
        where = _where(app, http)
        if platforms:
            print(f"Tusk is running on {names}; web console and HTTP API on {where}", flush=True)
        else:
            print(f"Tusk is running. No platform credentials are set, so only the HTTP channel is on: "
                  f"{where}  (open it in a browser for the web console: chat, and browse every chat's memory)",
                  flush=True)
        await stop.wait()


def _where(app, http) -> str:
    """The console URL: with its token the first time (when the token file is made), else a hint."""
    from bot.ops import access

    if app.http_access.created:
        return f"{access.console_url(http.settings.host, http.port, app.http_access.token)} (keep this link private)"
    hint = " (`tusk console-url` prints the link with its token)" if app.http_access.token else ""
    return http.url + hint
