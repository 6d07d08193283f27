"""Files that come with platform messages, kept in the chat's `media/` before the message is published.

    channel: to_inbound() -> allow-list (channels/intake.py) -> the message's files as `Remote`s (platform
             id, name, declared size, how to fetch): channels/telegram/media.py, discord_bot/media.py, slack/media.py
          -> MediaIntake.attach(): each file streamed into memory/media.py's MediaStore in chunks (a declared
             size over the cap is refused before any byte is fetched; a platform file id seen before is
             never fetched again) -> ONE InboundMessage: the caption as text, the kept files as attachments
          -> a file not taken: one reply in the chat naming the reason; the caption is still a message

Group gating is the text's: a message not addressed to the bot has its files fetched only when its chat
listens (/listen); otherwise nothing is downloaded at all. `InOrder` keeps one chat's messages in arrival
order while one of them downloads (or waits for a platform lookup), and never makes another chat wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import aiohttp

from bot.errors import MediaRefused, MediaUnreachable
from bot.events import Attachment, ChatKey, InboundMessage, MediaKind
from bot.threads import Spawned
from memory.media import MediaStore
from memory.paths import UnsafePathError

logger = logging.getLogger(__name__)

CHUNK = 64 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=600, sock_connect=20, sock_read=60)
UNREACHABLE = "I could not download it from {platform}; please send it again."
NOT_SAVED = "I could not save it on my side; please send it again later."
DRAIN_TIMEOUT = 30.0  # seconds shutdown waits for downloads under way before cancelling them

Tell = Callable[[ChatKey, str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Remote:
    """A file a platform message carries, not downloaded yet. `fetch()` opens the download lazily, so a
    file already kept (same `source_id`) or refused by its declared `size` is never fetched."""

    source_id: str  # the platform's own id of the file (Telegram file_unique_id, Discord/Slack file id)
    name: str
    mime: str
    fetch: Callable[[], AsyncIterator[bytes]]
    kind: MediaKind | None = None  # None: from the MIME type and name (memory/media.py kind_of)
    size: int | None = None  # as the platform declares it
    duration: float | None = None


@dataclass(frozen=True, slots=True)
class Taken:
    attachments: tuple[Attachment, ...] = ()
    refusals: tuple[str, ...] = ()  # one line per file not taken, naming it and why

    def reply(self) -> str | None:
        return "\n".join(self.refusals) or None


class MediaIntake:
    """A channel's way in for files: the shared MediaStore, and one HTTP session for its downloads."""

    def __init__(self, store: MediaStore, platform: str) -> None:
        self.store = store
        self.platform = platform
        self._session: aiohttp.ClientSession | None = None

    @property
    def file_cap(self) -> int:
        return self.store.limits.file_bytes

    async def wanted(self, msg: InboundMessage) -> bool:
        """Are this message's files to be fetched? Addressed messages: yes; group chatter: only if the chat listens."""
        return msg.addressed or await self.store.listens(msg.key)

    def files_for(self, msg: InboundMessage, found: list[Remote]) -> list[Remote]:
        """The files of `msg` to fetch in its turn (`attach` leaves group chatter's out where the chat does not
        listen)."""
        return found

    async def stream(self, url: str, *, headers: dict[str, str] | None = None,
                     login_page: str | None = None) -> AsyncIterator[bytes]:
        """The body at `url` in chunks. `login_page`: the sentence to refuse with when an HTML page comes
        back instead of the file (how Slack answers a token without the files:read scope)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=TIMEOUT)
        failed = UNREACHABLE.format(platform=self.platform)
        try:
            async with self._session.get(url, headers=headers) as resp:
                if resp.status != 200:  # the URL may hold a token: it is never logged
                    logger.warning("%s answered HTTP %d to a file download", self.platform, resp.status)
                    raise MediaUnreachable(failed)
                if login_page is not None and resp.content_type == "text/html":
                    logger.warning("%s sent an HTML page instead of a file: %s", self.platform, login_page)
                    raise MediaUnreachable(login_page)
                async for chunk in resp.content.iter_chunked(CHUNK):
                    yield chunk
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            logger.warning("downloading a file from %s failed: %s", self.platform, type(exc).__name__)
            raise MediaUnreachable(failed) from exc

    async def take(self, key: ChatKey, files: Sequence[Remote]) -> Taken:
        """Keep each file under `key`'s media/ folder; those refused are named with the reason."""
        kept: list[Attachment] = []
        refused: list[str] = []
        for file in files:
            try:
                async with contextlib.aclosing(file.fetch()) as chunks:  # type: ignore[type-var]
                    kept.append(await self.store.keep(key, chunks, name=file.name, mime=file.mime, kind=file.kind,
                                                      source_id=file.source_id, size=file.size,
                                                      duration=file.duration))
            except MediaRefused as exc:
                logger.info("a file of a %s message was not taken: %s", self.platform, exc)
                refused.append(f"I could not take {file.name}: {exc}")
            except (OSError, UnsafePathError) as exc:  # the disk, not the file: said, and the text still goes
                logger.error("could not keep a file of a %s message in %s: %s", self.platform, key, exc)
                refused.append(f"I could not take {file.name}: {NOT_SAVED}")
        return Taken(tuple(kept), tuple(refused))

    async def attach(self, msg: InboundMessage, files: Sequence[Remote], tell: Tell) -> InboundMessage | None:
        """`msg` with its files kept as attachments; a refusal is told in the chat (not for group chatter,
        which gets no reply). None when nothing is left to publish (no caption, no file taken). Group chatter
        whose chat does not listen is published as it came, its files never fetched."""
        if not files or not await self.wanted(msg):
            return msg
        taken = await self.take(msg.key, files)
        if (reply := taken.reply()) and msg.addressed:
            await tell(msg.key, reply)
        if not taken.attachments and not msg.text.strip():
            return None
        return dataclasses.replace(msg, attachments=msg.attachments + taken.attachments)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class InOrder:
    """Per chat, messages are published in arrival order even while one of them waits for a download;
    other chats never wait. `run(key, job)` starts `job` once every earlier job of `key` has ended."""

    def __init__(self) -> None:
        self._tails: dict[ChatKey, asyncio.Future[None]] = {}
        self._tasks = Spawned()

    def busy(self, key: ChatKey) -> bool:
        return key in self._tails

    def run(self, key: ChatKey, job: Callable[[], Awaitable[None]]) -> None:
        previous = self._tails.get(key)
        tail: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = tail

        async def in_turn() -> None:
            try:
                if previous is not None:
                    await asyncio.wait([previous])
                await job()
            except Exception:  # one message's boundary: the chat's next messages still go through
                logger.exception("taking a message failed")
            finally:
                tail.set_result(None)
                if self._tails.get(key) is tail:
                    del self._tails[key]

        self._tasks.start(in_turn(), f"files {key}")

    async def drain(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """Wait until every job started so far has ended (shutdown: what was taken is published), at most
        `timeout` seconds; `cancel` ends the rest."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self._tasks and (left := deadline - asyncio.get_running_loop().time()) > 0:
            await self._tasks.wait(left)

    async def cancel(self) -> None:
        await self._tasks.cancel()
        for tail in self._tails.values():  # a job cancelled before it began never resolved its tail
            if not tail.done():
                tail.set_result(None)
        self._tails.clear()
