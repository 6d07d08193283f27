"""Telegram, on python-telegram-bot 22's `Application`, run inside Tusk's own event loop.

    update -> sieved (channels/telegram/sieve.py: one unreadable update never stalls polling or the webhook)
           -> not a new message (edit, channel post, button, a newer kind): skipped, logged once per kind
           -> a group upgraded to a supergroup (migrate_to/from_chat_id): replies go to the new id, and the
              chat's files move there (bot/chat_move.py) before the new chat's next message is published
           -> to_inbound() (channels/telegram/inbound.py, pure: service messages dropped, forwards, replies,
              stickers, places framed; gating, mention stripping, chat key, the message a group reply quotes)
           -> the intake chain (channels/intake.py): allow-list / pairing -> files kept in media/
              (channels/telegram/media.py; an album gathered into one message) -> admin check (groups;
              cached) -> taken before? (bot/dedupe.py: an update delivered again after a restart or a
              webhook retry is dropped) -> publish -> typing
    Stop   -> a draft's Stop button (channels/telegram/stream.py): a `callback_query` in a group, a
              `stopped_message_generation` in a private chat -> the presser through the allow-list -> "/stop"
              published for that chat (the bus answers it at once, bot/stop.py); the query is answered
    reply  -> split_message() on the Markdown source -> Telegram HTML per piece (channels/telegram/outbound.py)
           -> plain text if Telegram rejects the entities; 429s wait (AIORateLimiter), a request that
              never reached the Bot API (no connection, a 502 from its front) retries with backoff; one
              that may have been carried out (no answer came, a 504) is not sent again: Telegram has no
              idempotency key, and a reply must never show twice
           Tusk's own words (`OutboundMessage.verbatim`: a command's answer, a pairing code) go as plain
           text, no parse mode: nothing in them is read as markup, so `<persona>`, `*` and `_` show as written
    voice  -> sendVoice, the text as its caption where it fits (channels/telegram/voice.py)

Chat key: the chat id; in forum supergroups `<chat id>.<topic id>`, so every topic keeps
its own memory. DMs: every message is a turn. Groups: only messages that mention the bot,
reply to it, or are commands meant for it, are turns; the others are handed over marked
`addressed=False` (kept as context if the chat listens, /listen). Only new messages are asked for (`message`
updates), so edits never come back as second turns (an edit is not answered again: the first answer stands,
and a second one to a fixed typo would be noise). Being added to a group is not greeted: it is a service
message, and the group may not be allowed yet (TELEGRAM_ALLOW_FROM, pairing); /help and the command menu say
how to use the bot once someone mentions it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from telegram import BotCommand, Message, Update
from telegram.constants import ChatAction, ChatMemberStatus
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import AIORateLimiter, Application, ContextTypes, ExtBot, TypeHandler

from bot.dedupe import Seen
from bot.errors import ConfigError, DeliveryError
from bot.events import ChatKey, InboundMessage, OutboundMessage, OutboundVoice, ReplyRef
from channels.telegram import media as telegram_media
from channels.telegram import voice as telegram_voice
from channels.base import Access, Done, Publish
from channels.intake import Arrival, Intake
from channels.media_in import Remote
from channels.telegram.inbound import ALIASES, chat_id_of, to_inbound
from channels.telegram.sieve import SievingRequest, SievingServer
from channels.telegram.presses import STOPPED_ALREADY, Presses  # noqa: F401 (STOPPED_ALREADY: API)
from channels.telegram.outbound import send_text
from channels.telegram.stream import TelegramDraft
from memory.media import MediaStore

logger = logging.getLogger(__name__)

ADMINS = frozenset({ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER})
UPDATES = ["message", "callback_query", "stopped_message_generation"]  # the last two: Stop buttons (bot/stop.py);
# edits, reactions, channel posts, the bot's own membership: never asked for
Move = Callable[[ChatKey, ChatKey], Awaitable[None]]  # a chat's files follow its new id (bot/chat_move.py)
__all__ = ["TelegramChannel", "TelegramSettings", "chat_id_of", "target", "to_inbound"]
WEBHOOK_MAX_BODY = 256 * 1024  # an update is a few KiB (a 4,096-character message, escaped, with a quoted reply)
WEBHOOK_TIMEOUT = 15.0  # seconds a webhook connection may idle, or take to send its body


def bound_webhook_server() -> None:
    """Cap what PTB's webhook server accepts. It is tornado's HTTPServer, which PTB makes with tornado's
    defaults (100 MB bodies, no timeouts); tornado documents HTTPServer as `Configurable`, so these
    defaults hold for every HTTPServer made afterwards: a body declared (or streamed) over the cap
    is answered 400 and the connection closed before any of it is buffered. The server is `SievingServer`
    (channels/telegram/sieve.py): an update PTB cannot parse is taken and skipped, not refused."""
    from tornado.httpserver import HTTPServer

    HTTPServer.configure(SievingServer, max_body_size=WEBHOOK_MAX_BODY, body_timeout=WEBHOOK_TIMEOUT,
                         idle_connection_timeout=WEBHOOK_TIMEOUT)
TYPING_EVERY = 4.0  # Telegram shows "typing" for 5 s
ADMIN_TTL = 300.0  # seconds a getChatMember answer (admin or not) is trusted


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    token: str
    api_base: str = "https://api.telegram.org"
    allow_from: frozenset[str] = frozenset()  # user ids (and group ids); see channels/base.py AllowList
    webhook_url: str | None = None  # set: webhook mode, else long polling
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = 8443
    webhook_secret: str | None = None
    poll_timeout: int = 30  # seconds one long poll may wait
    backoff: float = 1.0  # first delay after a network error when sending


def target(key: ChatKey) -> tuple[int, int | None]:
    """The Telegram chat id and forum topic a chat key stands for (the inverse of `chat_id_of`)."""
    chat, _, thread = key.chat_id.partition(".")
    return int(chat), int(thread) if thread else None


def quoted(ref: ReplyRef | None) -> int | None:
    """The Telegram message a reply quotes (set for group messages: channels/telegram/inbound.py)."""
    return int(ref.message) if ref is not None and ref.message and ref.quote else None


class TelegramChannel:
    """With `receive=False` the channel only sends (a worker of a cluster): `start` initialises the Bot (getMe
    checks the token) and nothing else: no polling, no webhook, no command menu. Replies, drafts and voice
    go by the chat key and the ReplyRef alone, as from a receiving channel; drafts carry no Stop button (a
    press reaches the process that receives, which does not know the reply)."""

    name = "telegram"

    def __init__(self, settings: TelegramSettings, publish: Publish, menu: list[tuple[str, str]],
                 access: Access = Access(), media: MediaStore | None = None, move: Move | None = None,
                 seen: Seen | None = None, receive: bool = True) -> None:
        self.settings = settings
        self.receive = receive
        self._menu = menu
        self._commands = frozenset(name for name, _ in menu) | frozenset(ALIASES)
        allow = access.allow_list(settings.allow_from, "TELEGRAM_ALLOW_FROM", self.name)
        self._intake = Intake("Telegram", self, allow, publish, media, seen)  # the way in
        self._admins: dict[tuple[int, int], tuple[float, bool]] = {}  # (chat, user) -> (valid until, is admin)
        self.app: Application | None = None  # receiving: PTB's Application, whose bot is `bot`
        self.bot: ExtBot | None = None  # the Bot API client every send goes through, once started
        self._move = move
        self._moved: dict[int, int] = {}  # old group id -> its supergroup's id, once Telegram said so
        self._skipped: set[str] = set()  # kinds of update already logged as skipped
        files = self._intake.media  # None: files are not taken
        self._albums = telegram_media.Albums(self._intake.order, self._land_album, self._album_files,
                                             files.wanted) if files is not None else None
        self._presses = Presses(allow, publish, lambda: self.bot)  # Stop buttons
        self.voice = self  # replies read out go as voice messages (send_voice)

    def _build(self) -> Application:
        base = self.settings.api_base.rstrip("/")
        app = (Application.builder().token(self.settings.token).base_url(f"{base}/bot")
               .base_file_url(f"{base}/file/bot").rate_limiter(AIORateLimiter(max_retries=3))
               .get_updates_request(SievingRequest(connection_pool_size=1,
                                                   read_timeout=self.settings.poll_timeout + 10)).build())
        app.add_handler(TypeHandler(Update, self._on_update))
        app.add_error_handler(self._on_error)
        return app

    def _sender(self) -> ExtBot:
        """The Bot alone, as the Application makes it (the same API root, the same rate limiter), for sending."""
        base = self.settings.api_base.rstrip("/")
        return ExtBot(self.settings.token, base_url=f"{base}/bot", base_file_url=f"{base}/file/bot",
                      rate_limiter=AIORateLimiter(max_retries=3))

    async def _initialized(self, initialize: Callable[[], Awaitable[None]]) -> None:
        try:
            await initialize()  # getMe: the token is checked here
        except InvalidToken as exc:
            raise ConfigError("Telegram refused TELEGRAM_BOT_TOKEN: copy it again from @BotFather") from exc
        except NetworkError as exc:
            raise DeliveryError(f"cannot reach the Telegram Bot API at {self.settings.api_base}: {exc}") from exc

    async def start(self) -> None:
        if not self.receive:
            bot = self._sender()
            try:
                await self._initialized(bot.initialize)
            except BaseException:
                await bot.shutdown()  # its connections, opened before getMe
                raise
            self.bot = bot
            logger.info("Telegram channel sending as @%s (receiving elsewhere)", bot.username)
            return
        self.app = app = self._build()
        await self._initialized(app.initialize)
        self.bot = app.bot
        await app.bot.set_my_commands([BotCommand(name, summary[:256]) for name, summary in self._menu])
        await app.start()
        s = self.settings
        if s.webhook_url:
            path = s.webhook_url.split("://", 1)[-1].partition("/")[2]
            secret = s.webhook_secret or secrets.token_urlsafe(32)  # given to Telegram anew at every start
            bound_webhook_server()
            assert app.updater is not None  # ApplicationBuilder makes one unless told not to
            await app.updater.start_webhook(listen=s.webhook_listen, port=s.webhook_port, url_path=path,
                                            webhook_url=s.webhook_url, secret_token=secret,
                                            allowed_updates=UPDATES)
        else:
            assert app.updater is not None
            await app.updater.start_polling(timeout=s.poll_timeout, allowed_updates=UPDATES,
                                            error_callback=self._on_poll_error)
        logger.info("Telegram channel running as @%s (%s)", app.bot.username, "webhook" if s.webhook_url else "polling")

    async def pause(self) -> None:
        """Stop fetching updates; those already fetched are published. Replies can still be sent."""
        if self.app is None:  # not started, or sending only: nothing is fetched
            return
        if self.app.updater and self.app.updater.running:
            await self.app.updater.stop()  # confirms the fetched updates to Telegram
        if self.app.running:
            await self.app.stop()  # hands every fetched update to the bus
        await self._intake.drain()  # messages still downloading their files are published too

    async def stop(self) -> None:
        if self.app is None and self.bot is None:  # never started, or stopped already
            return
        await self.pause()
        await self._intake.aclose()
        if self.app is not None:
            await self.app.shutdown()  # the bot's too
        elif self.bot is not None:
            await self.bot.shutdown()
        self.app = self.bot = None

    def _on_poll_error(self, exc: TelegramError) -> None:
        logger.warning("polling Telegram failed, retrying: %s", exc)

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        logger.error("handling a Telegram update failed", exc_info=context.error)

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert self.app is not None
        if update.callback_query is not None:
            await self._presses.on_query(update.callback_query)
            return
        if isinstance(stopped := update.api_kwargs.get("stopped_message_generation"), dict):
            await self._presses.on_draft_stopped(stopped)
            return
        if update.message is None:
            self._skip(update)
            return
        if update.message.migrate_to_chat_id or update.message.migrate_from_chat_id:
            self._migrated(update.message)
            return
        msg = to_inbound(update.message, self.app.bot.bot, self._commands)
        if msg is None:  # service messages, other bots, a kind Tusk does not read
            if update.message.from_user is None and update.message.sender_chat is None:
                self._skip_once("messages without a sender")
            return
        message = update.message
        arrival = self._arrival(message, msg)
        if not message.media_group_id or self._albums is None:
            await self._intake.take(arrival)
        elif await self._intake.admit(arrival):  # an open album gathers its items at once, into one message
            self._albums.add(message, msg)

    def _arrival(self, message: Message, msg: InboundMessage) -> Arrival:
        """What the intake chain needs to know of `message` besides `msg`."""
        assert self.app is not None
        bot, files = self.app.bot, self._intake.media
        return Arrival(msg, f"{message.chat_id}:{message.message_id}", str(message.chat.id) if msg.is_group else None,
                       message.chat.title or "", lambda: telegram_media.files_of(message, bot, files) if files else [],
                       functools.partial(self._with_admin_rights, message))

    def _album_files(self, message: Message) -> list[Remote]:
        assert self.app is not None and self._intake.media is not None
        return telegram_media.files_of(message, self.app.bot, self._intake.media)

    async def _land_album(self, message: Message, msg: InboundMessage, files: list[Remote]) -> None:
        await self._intake.land(self._arrival(message, msg), files)

    def _skip(self, update: Update) -> None:
        """An update that is not a new message (an edit, a channel post, a button press, a kind from a newer Bot
        API): never asked for, so only a webhook or an old subscription brings it; logged once per kind."""
        kind = next((k for k in update.to_dict() if k != "update_id"), None)
        if kind is not None:  # None: an update the sieve emptied (and logged)
            self._skip_once(f"{kind} updates")

    def _skip_once(self, what: str) -> None:
        if what not in self._skipped:
            self._skipped.add(what)
            logger.info("skipping Telegram %s: Tusk answers new messages with a sender only", what)

    def _migrated(self, message: Message) -> None:
        """The service message of a group upgraded to a supergroup (one in each chat): its memory follows."""
        if message.migrate_to_chat_id:
            self._migrate(message.chat.id, message.migrate_to_chat_id)
        elif message.migrate_from_chat_id:
            self._migrate(message.migrate_from_chat_id, message.chat.id)

    def _migrate(self, old: int, new: int) -> None:
        """Send to `new` from now on; move the chat's files before the new chat's next message is published."""
        if self._moved.get(old) != new:
            logger.info("Telegram group %s became supergroup %s", old, new)
            if str(old) in self.settings.allow_from and str(new) not in self.settings.allow_from:
                logger.warning("TELEGRAM_ALLOW_FROM lists the group %s, which Telegram upgraded to %s: add %s to it",
                               old, new, new)
        self._moved[old] = new
        if self._move is not None:  # again for a second notice: it finds the files moved (and re-keys what is left)
            move, old_key, new_key = self._move, ChatKey(self.name, str(old)), ChatKey(self.name, str(new))
            self._intake.order.run(new_key, lambda: move(old_key, new_key))

    async def _with_admin_rights(self, message: Message, msg: InboundMessage) -> InboundMessage:
        """`sender_is_admin` of a group's sender (for commands: /forget, /memory undo) from getChatMember,
        trusted for ADMIN_TTL seconds per group and user."""
        assert self.app is not None
        user = message.from_user
        if not msg.addressed or not msg.is_group or msg.sender_is_admin or user is None \
                or message.sender_chat is not None:  # an anonymous admin, a channel: said by to_inbound
            return msg
        chat_id, user_id = message.chat_id, user.id
        now = time.monotonic()
        cached = self._admins.get((chat_id, user_id))
        if cached is not None and cached[0] > now:
            return dataclasses.replace(msg, sender_is_admin=cached[1])
        try:
            member = await self.app.bot.get_chat_member(chat_id, user_id)
        except TelegramError as exc:
            logger.warning("could not check the sender's rights in this group: %s", exc)
            return msg
        if len(self._admins) > 1000:
            self._admins = {k: v for k, v in self._admins.items() if v[0] > now}
        self._admins[(chat_id, user_id)] = (now + ADMIN_TTL, member.status in ADMINS)
        return dataclasses.replace(msg, sender_is_admin=member.status in ADMINS)

    async def typing(self, msg: InboundMessage, done: Done) -> None:
        """Show "typing" until the turn is done (the reply is out)."""
        assert self.bot is not None
        chat_id, thread = target(msg.key)
        while not done.done():
            try:
                await self.bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread)
            except TelegramError as exc:
                logger.debug("typing indicator not shown: %s", exc)
            await asyncio.wait([done], timeout=TYPING_EVERY)

    def draft(self, msg: InboundMessage) -> TelegramDraft | None:
        """The reply to `msg` while it is written (channels/telegram/stream.py): a draft in a private
        chat (user ids are positive, group ids negative), a message edited in place in a group."""
        if self.bot is None:
            return None
        chat_id, thread = self._target(msg.key)

        async def send_final(text: str, verbatim: bool = False) -> None:
            await self.send(OutboundMessage.answer(msg, text, verbatim))

        return TelegramDraft(self.bot, chat_id, thread, quoted(msg.ref), chat_id > 0, send_final,
                             buttons=self._presses.buttons if self.receive else None, key=msg.key)

    async def send(self, msg: OutboundMessage) -> None:
        assert self.bot is not None
        if await self._presses.answered(msg):  # the answer to a Stop button: a notice to the presser
            return
        chat_id, thread = self._target(msg.key)
        await send_text(self.bot, chat_id, thread, msg.text, quoted(msg.ref), msg.verbatim, self.settings.backoff,
                        self._migrate)

    def voice_caption(self, text: str) -> bool:
        return telegram_voice.fits_caption(text)

    async def send_voice(self, msg: OutboundVoice) -> None:
        """A reply read out, as a voice message (the caption on it if set); DeliveryError if refused."""
        assert self.bot is not None
        chat_id, thread = self._target(msg.key)
        await telegram_voice.send(self.bot, chat_id, thread, msg.audio, msg.caption, quoted(msg.ref))

    def _target(self, key: ChatKey) -> tuple[int, int | None]:
        """The chat and topic to send to: the key's, or the supergroup its group became."""
        chat_id, thread = target(key)
        return self._moved.get(chat_id, chat_id), thread
