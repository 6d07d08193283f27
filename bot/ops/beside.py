"""CLI commands that change a chat, beside a Tusk running on the same home (bot/running.py).

A running Tusk keeps some of a chat in memory (its reminders, its session cache, the turn under
way) and writes it back, so a command must not change those files behind its back:

    tusk forget CHAT     `tusk run` serves the home: its own /forget, through its console API (the
                         console token, as the web console's Forget); nothing runs: the files' own
                         /forget, holding the home's lock meanwhile (no Tusk starts in the middle);
                         a `tusk chat` alone (no API) or a restore or import holds it: refused, naming it

`LocalApi` is the client of the running Tusk's API those commands use.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any
from urllib.parse import quote

import aiohttp

from bot import running
from bot.config import Settings
from bot.errors import HomeBusy, RemoteTuskError
from bot.events import ChatKey

TIMEOUT = aiohttp.ClientTimeout(total=300, sock_connect=10)  # a confirmed forget waits for the chat's turn
Forget = Callable[[ChatKey, bool], Coroutine[Any, Any, str]]  # (chat, confirm) -> /forget's report


class LocalApi:
    """The HTTP API of the Tusk running on this home, as its owner (the console token)."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.headers = {"Origin": url, **({"Authorization": f"Bearer {token}"} if token else {})}

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON answer; LookupError for a 404 (its message), RemoteTuskError for anything else amiss."""
        try:
            async with aiohttp.ClientSession(headers=self.headers, timeout=TIMEOUT) as client, \
                    client.request(method, self.url + path, json=body) as resp:
                answer = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise RemoteTuskError(f"the Tusk running on this home did not answer on {self.url} "
                                  f"({exc or type(exc).__name__})") from None
        reason = answer.get("error") if isinstance(answer, dict) else None
        if resp.status == 404:
            raise LookupError(reason or f"{path}: not found")
        if resp.status != 200 or not isinstance(answer, dict):
            raise RemoteTuskError(f"the Tusk running on this home refused: {reason or resp.status}")
        return answer

    async def forget(self, key: ChatKey, confirm: bool) -> str:
        path = f"/api/chats/{quote(key.channel, safe='')}/{quote(key.chat_id, safe='')}/forget"
        answer = await (self.call("POST", path, {"confirm": True}) if confirm else self.call("GET", path))
        return str(answer.get("report", ""))


@contextlib.contextmanager
def forgetting(settings: Settings) -> Iterator[Forget]:
    """The /forget to use for as long as the block runs: the running Tusk's, or the files' own under the lock."""
    from bot.ops import admin
    from store import opened

    async def here(key: ChatKey, confirm: bool) -> str:  # the store itself: its files, or the database
        async with opened(settings.home, settings.store_url()) as store:
            return await admin.forget(store.chats, settings.home, key, confirm, store=store)

    held = running.exclusive(settings.home, "tusk forget")
    if held is not None:
        try:
            yield here
        finally:
            held.release()
        return
    there = running.holder(settings.home) or running.Holder()
    if not (there.engine and there.url):
        raise HomeBusy(there.refusal(), there)
    from bot.ops.access import http_access

    api = LocalApi(there.url, http_access(settings, create=False).token)
    yield api.forget


def forget_command(args: argparse.Namespace, settings: Settings) -> int:
    """`tusk forget`: the running Tusk's own /forget when one serves the home, else the files' (bot/ops/beside.py)."""
    with forgetting(settings) as forget:
        print(asyncio.run(forget(args.chat, False)))
        if not args.yes and not _confirmed("Delete it all? [y/N] "):
            print("Nothing deleted.")
            return 1
        print(asyncio.run(forget(args.chat, True)))
    return 0


def _confirmed(question: str) -> bool:
    """A yes on stdin; no answer at all (no terminal, stdin closed) is an error that names `--yes`."""
    try:
        answer = input(question)
    except EOFError:
        raise ValueError("no answer to the question (stdin is not a terminal or is closed): "
                         "add --yes to delete without asking") from None
    return answer.strip().lower() in ("y", "yes")
