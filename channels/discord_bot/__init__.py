"""Discord, on discord.py 2.7's `Client`, run inside Tusk's own event loop.

    MESSAGE_CREATE -> to_inbound() (inbound.py, pure: message types, bots, empty messages, mentions as names,
                      replies quoted, chat key, admin flag); in guilds the reply quotes it (its ReplyRef)
                   -> the intake chain (channels/intake.py): allow-list -> attachments kept in media/
                      (channels/discord_bot/media.py; the channel's later messages wait for them) -> taken
                      before? (bot/dedupe.py: a MESSAGE_CREATE replayed after a RESUME is dropped) -> publish
                      -> typing until done; its ReplyRef names the message (its id: the replies' nonces),
                      quoted by the reply in guilds only
    INTERACTION    -> a chat command (/memory, /forget, ...: the app's menu as application commands, commands.py,
                      synced at start) -> command_to_inbound() -> allow-list
                   -> defer (ephemeral where it fits) -> publish "/memory undo" as if typed, answered through
                      the interaction: its followup webhook, rebuilt from the token in the ReplyRef alone
    STOP PRESSED   -> the Stop button under a draft (channels/discord_bot/stream.py) -> the presser through the
                      allow-list -> "/stop" published for that chat (the bus answers it at once, bot/stop.py)
                      -> the press answered, to the presser only
    reply          -> pieces(text) (text.py: split within 2,000) -> the interaction's followup, or the channel
                      (in guilds the first piece replies to the question); 429s wait in discord.py; every
                      message goes with a nonce Discord enforces, made from the message it answers (nonces.py),
                      so a send retried, or a reply sent again by another process, never posts twice;
                      Tusk's own words (`OutboundMessage.verbatim`) escaped first (text.py), so Discord's
                      Markdown shows them as written
    voice          -> a voice message, then the text (channels/discord_bot/voice.py)

Chat key: the channel id: a DM channel, a guild channel, or a thread (each thread keeps its
own memory). DMs: every message is a turn. Guild channels: only messages that mention the
bot or reply to it, the mention stripped, are turns; the others are handed over marked
`addressed=False` (kept as context if the channel listens, /listen). In guilds, /forget and /memory undo need the
Manage Messages permission (`sender_is_admin`). Intents: guilds, guild and DM messages,
message content (without it if the application's flags show it off: refusals.py); not the privileged
members intent. Discord's refusals (a channel the bot may not post in, 4014) are told once with the fix
(refusals.py); 429s are waited out by discord.py up to MAX_RATE_WAIT seconds, then the reply fails.

TUSK_DISCORD_SHARDS (0-3/8): this process receives only those shards' servers (and DMs if it has shard 0),
through discord.py's AutoShardedClient, each IDENTIFY paced by Discord's rule across processes (shards.py,
identify.py); a channel that only sends opens no gateway and ignores it.

DISCORD_API_BASE and DISCORD_GATEWAY_URL (REST proxies such as nirn-proxy, and the tests)
point discord.py elsewhere through the two class attributes it reads them from (gateway.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

with warnings.catch_warnings():  # discord.py imports audioop (deprecated since 3.11) for voice, which Tusk never uses
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord
from discord import app_commands

from bot.dedupe import Seen
from bot.errors import ConfigError, DeliveryError
from bot.events import ChatKey, InboundMessage, OutboundMessage, OutboundVoice, ReplyRef
from channels.discord_bot import media as discord_media
from channels.discord_bot import identify, nonces, refusals, shards
from channels.discord_bot.commands import PRIVATE, slash
from channels.discord_bot import voice as discord_voice
from channels.base import Access, Done, Publish
from channels.discord_bot.gateway import aim, api_root, connect_error  # noqa: F401 (api_root: API)
from channels.discord_bot.inbound import command_to_inbound, guild_id, to_inbound  # noqa: F401 (API)
from channels.discord_bot.presses import STOPPED_ALREADY, Presses  # noqa: F401 (STOPPED_ALREADY: API)
from channels.discord_bot.stream import DiscordDraft
from channels.discord_bot.text import pieces
from channels.intake import Arrival, Intake
from memory.media import MediaStore

logger = logging.getLogger(__name__)

TYPING_EVERY = 8.0  # Discord shows "typing" for 10 s
START_TIMEOUT = 60.0  # login, command sync and gateway READY
GUILD_READY_WAIT = 0.2  # discord.py waits this long after the last GUILD_CREATE before `ready`; nothing here needs more
INTENTS = discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)
NO_CONTENT_INTENTS = discord.Intents(guilds=True, guild_messages=True, dm_messages=True)
MAX_RATE_WAIT = 30.0  # a 429 asking for a longer wait (a global or Cloudflare limit) fails the reply instead
MENTIONS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True)
SEND_ERRORS = (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, OSError)


@dataclass(frozen=True, slots=True)
class DiscordSettings:
    token: str
    api_base: str | None = None  # e.g. http://nirn-proxy:8080 or http://127.0.0.1:9000/api/v10; None: discord.com
    gateway_url: str | None = None  # e.g. ws://127.0.0.1:9000/gateway; None: wss://gateway.discord.gg
    allow_from: frozenset[str] = frozenset()  # user ids (and guild ids); see channels/base.py AllowList
    guild_id: int | None = None  # sync the slash commands to this guild only (instant, for development)
    shard_ids: tuple[int, ...] | None = None  # this process's shards (TUSK_DISCORD_SHARDS); None: one connection
    shard_count: int | None = None  # the bot's total number of shards, with shard_ids
    database_url: str | None = field(default=None, repr=False)  # paces IDENTIFY across processes (identify.py)


def _group(guild: Any, guild_id: int | None) -> tuple[str | None, str]:
    """The guild's id and name for the allow-list (for a guild no longer in the cache its id alone); no
    group in a DM."""
    if guild is not None:
        return str(guild.id), guild.name or ""
    return (str(guild_id) if guild_id else None), ""


def reference(key: ChatKey, ref: ReplyRef | None) -> discord.MessageReference | None:
    """The message a reply quotes (guild messages: channels/discord_bot/inbound.py); None if it quotes none."""
    if ref is None or not ref.message or not ref.quote:
        return None
    return discord.MessageReference(message_id=int(ref.message), channel_id=int(key.chat_id), fail_if_not_exists=False)


class DiscordChannel:
    """With `receive=False` the channel only sends (a worker of a cluster): `start` logs discord.py's client in
    with the token (its HTTP client: the bot user and the application, for interaction answers) and nothing
    else: no gateway, no command sync. Replies, drafts and voice go by the chat key and the ReplyRef alone, as
    from a receiving channel; drafts carry no Stop button (a press reaches the process on the gateway, which
    does not know the reply)."""

    name = "discord"

    def __init__(self, settings: DiscordSettings, publish: Publish, menu: list[tuple[str, str]],
                 access: Access = Access(), media: MediaStore | None = None, seen: Seen | None = None,
                 receive: bool = True) -> None:
        self.settings = settings
        self.receive = receive
        self._menu = menu
        allow = access.allow_list(settings.allow_from, "DISCORD_ALLOW_FROM", self.name)
        self._intake = Intake("Discord", self, allow, publish, media, seen)  # the way in
        self._accepting = False
        self._undo_aim: Callable[[], None] | None = None
        self._connection: asyncio.Task[None] | None = None
        self._fallback: asyncio.Task[None] | None = None  # reconnecting without Message Content after a 4014
        self.client: discord.Client | None = None
        self._refusals = refusals.Refusals()
        self._presses = Presses(allow, self._take, lambda: self._accepting)  # the Stop buttons
        sharded = receive and settings.shard_ids is not None
        self._gate = identify.IdentifyGate(settings.database_url) if sharded else None  # paces their IDENTIFYs
        self.voice = self  # replies read out go as voice messages (send_voice)

    def _build(self, intents: discord.Intents) -> tuple[discord.Client, app_commands.CommandTree]:
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False  # no voice: no warnings about it
        client = shards.client(self.settings.shard_ids if self.receive else None, self.settings.shard_count,
                               self._gate, intents=intents, allowed_mentions=MENTIONS, max_messages=None,
                               guild_ready_timeout=GUILD_READY_WAIT, chunk_guilds_at_startup=False,
                               max_ratelimit_timeout=MAX_RATE_WAIT)
        client.event(self.on_message)
        client.add_dynamic_items(self._presses.item)  # the Stop button under drafts, on any message
        tree = app_commands.CommandTree(client)
        for name, summary in self._menu:
            tree.add_command(slash(name, summary, self.on_command))
        return client, tree

    async def start(self) -> None:
        # discord.py logs request bodies and gateway payloads (message text) at DEBUG; Tusk logs no message text
        self._undo_aim = aim(self.settings.api_base, self.settings.gateway_url)
        if not self.receive:
            try:
                await self._login(INTENTS)
            except BaseException:
                await self._close()
                raise
            assert self.client is not None and self.client.user is not None
            logger.info("Discord channel sending as %s (id %d; receiving elsewhere)", self.client.user.name,
                        self.client.user.id)
            return
        try:
            tree = await self._login(INTENTS)
            assert self.client is not None and self.client.application is not None
            if not refusals.content_intent_enabled(self.client.application.flags.value):
                logger.warning(refusals.NO_CONTENT)
                tree = await self._login(NO_CONTENT_INTENTS)
            await self._sync(tree)
            # from READY on, discord.py dispatches messages while it still waits for the guilds (GUILD_READY_WAIT):
            # they are taken (the bus queues them), not dropped because start() has not returned yet
            self._accepting = True
            try:
                await self._connect(self.client)
            except discord.PrivilegedIntentsRequired:  # the flags said yes, the gateway says no
                logger.error(refusals.DISALLOWED)
                await self._login(NO_CONTENT_INTENTS)
                await self._connect(self.client)
        except BaseException:
            await self._close()
            raise
        client = self.client
        assert client.user is not None
        ids, count = self.settings.shard_ids, self.settings.shard_count
        logger.info("Discord channel running as %s (id %d) in %d guilds%s", client.user.name, client.user.id,
                    len(client.guilds), f" ({shards.described(ids, count)})" if ids and count else "")

    async def _connect(self, client: discord.Client) -> None:
        """Open the gateway (discord.py reconnects and resumes from then on); returns once it is ready."""
        self._connection = connection = asyncio.create_task(client.connect(), name="discord gateway")
        ready = asyncio.create_task(client.wait_until_ready())
        # shards IDENTIFY one per bucket every 5 s across the bot's processes (identify.py): allow for a queue
        timeout = START_TIMEOUT + identify.HOLD * (self.settings.shard_count or 0)
        try:
            await asyncio.wait({connection, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if not client.is_ready():
            exc = connection.exception() if connection.done() and not connection.cancelled() else None
            if isinstance(exc, discord.PrivilegedIntentsRequired) and client.intents.message_content:
                raise exc  # start() tries again without the intent
            raise connect_error(connection)
        connection.add_done_callback(self._on_connection_end)

    def _on_connection_end(self, connection: asyncio.Task[None]) -> None:
        """The gateway connection ended for good: a 4014 (the intent switched off while running) connects again
        without Message Content; anything else is one error line (no traceback: the cause is in it)."""
        if connection.cancelled() or (exc := connection.exception()) is None:
            return
        if isinstance(exc, discord.PrivilegedIntentsRequired) and self.client is not None \
                and self.client.intents.message_content:
            logger.error(refusals.DISALLOWED)
            self._fallback = asyncio.create_task(self._without_content(), name="discord without message content")
            return
        logger.error("the Discord connection ended and will not come back: %s", connect_error(connection))

    async def _without_content(self) -> None:
        try:
            await self._login(NO_CONTENT_INTENTS)
            assert self.client is not None
            await self._connect(self.client)
        except (ConfigError, DeliveryError) as exc:
            logger.error("the Discord connection ended and will not come back: %s", exc)

    async def _login(self, intents: discord.Intents) -> app_commands.CommandTree:
        """A new client with these intents (the one before, if any, closed), logged in; its command tree."""
        if self.client is not None:
            await self.client.close()
        client, tree = self._build(intents)
        self.client = client
        try:
            await client.login(self.settings.token)
        except discord.LoginFailure as exc:
            raise ConfigError("Discord refused DISCORD_BOT_TOKEN: copy it again from the Developer Portal "
                              "(Applications -> your app -> Bot -> Reset Token)") from exc
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise DeliveryError(f"cannot reach the Discord API at {discord.http.Route.BASE}: {exc}") from exc
        return tree

    async def _sync(self, tree: app_commands.CommandTree) -> None:
        """Register the slash commands: to DISCORD_GUILD_ID at once if set, else globally."""
        guild = discord.Object(self.settings.guild_id) if self.settings.guild_id else None
        if guild is not None:
            tree.copy_global_to(guild=guild)
        try:
            await tree.sync(guild=guild)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:  # typed commands still work
            logger.warning("could not register the slash commands (%s); was the bot invited with the "
                           "applications.commands scope?", exc)

    async def pause(self) -> None:
        """Take no more messages (Discord does not hold them back for us); replies can still be sent."""
        self._accepting = False
        await self._intake.drain()  # messages still downloading their files are published

    async def stop(self) -> None:
        await self.pause()
        await self._intake.aclose()
        await self._close()

    async def _close(self) -> None:
        self._accepting = False
        if self._fallback is not None:
            self._fallback.cancel()
            await asyncio.gather(self._fallback, return_exceptions=True)
            self._fallback = None
        if self.client is not None:
            await self.client.close()
            self.client = None
        if self._connection is not None:
            await asyncio.gather(self._connection, return_exceptions=True)
            self._connection = None
        if self._gate is not None:
            await self._gate.close()
        if self._undo_aim is not None:
            self._undo_aim()
            self._undo_aim = None

    async def on_message(self, message: discord.Message) -> None:
        assert self.client is not None and self.client.user is not None
        msg = to_inbound(message, self.client.user.id) if self._accepting else None
        if msg is None:
            return
        # named for the replies' nonces; quoted in guilds only
        msg = dataclasses.replace(msg, ref=ReplyRef(message=str(message.id), quote=msg.is_group))
        group, name = _group(message.guild, guild_id(message))
        media = self._intake.media
        await self._intake.take(Arrival(msg, str(message.id), group, name,
                                        lambda: discord_media.files_of(message, media) if media else []))

    async def on_command(self, interaction: discord.Interaction, name: str, args: str) -> None:
        msg = command_to_inbound(interaction, name, args)
        if msg is None or not self._accepting:
            return
        group, group_name = _group(interaction.guild, interaction.guild_id)
        if not await self._intake.admit(Arrival(msg, group=group, group_name=group_name)):
            return
        ephemeral = msg.is_group and name in PRIVATE
        try:
            await interaction.response.defer(ephemeral=ephemeral, thinking=True)
        except SEND_ERRORS as exc:
            logger.warning("could not acknowledge /%s in %s: %s", name, msg.key, exc)
            return
        msg = dataclasses.replace(msg, ref=ReplyRef(interaction=interaction.token, ephemeral=ephemeral))
        if name != "stop":
            self._take(msg)
            return
        self._presses.expect(msg.id)  # a reply stopped is its own answer: the interaction still needs one
        await self._presses.close_slash(msg.id, self._take(msg), interaction, ephemeral)

    def _take(self, msg: InboundMessage) -> Done | None:
        """Publish a command or a press (no typing: it is answered at once)."""
        return self._intake.publish(msg, typing=False)

    def _followup(self, token: str) -> discord.Webhook:
        """The way back to a slash command from its token alone (what `Interaction.followup` builds: the
        application's webhook), so any process of this bot can answer it while the token lasts (15 min)."""
        assert self.client is not None and self.client.application_id is not None
        payload: Any = {"id": self.client.application_id, "type": 3, "token": token}  # 3: an application webhook
        return discord.Webhook.from_state(payload, state=self.client._connection)

    async def typing(self, msg: InboundMessage, done: Done) -> None:
        """Show "typing" until the turn is done."""
        assert self.client is not None
        channel_id = int(msg.key.chat_id)
        channel = self.client.get_partial_messageable(channel_id)
        while not done.done() and not self._refusals.quiet(channel_id):
            try:
                await channel.typing()
            except SEND_ERRORS as exc:
                if refusals.is_refusal(exc):  # the reply will meet the same refusal and say so: no more tries
                    return
                logger.debug("typing indicator not shown: %s", exc)
            await asyncio.wait([done], timeout=TYPING_EVERY)

    def draft(self, msg: InboundMessage) -> DiscordDraft | None:
        """The reply while it is written (channels/discord_bot/stream.py); slash commands answer at once."""
        key, ref = msg.key, msg.ref
        if self.client is None or ref is not None and ref.interaction or self._refusals.quiet(int(key.chat_id)):
            return None
        stop = self._presses if self.receive else None  # a worker's press would reach a process that knows nothing
        return DiscordDraft(self.client.get_partial_messageable(int(key.chat_id)), reference(key, ref), MENTIONS,
                            self._refusals, stop=stop.view if stop else None, buttons=stop.buttons if stop else None,
                            key=key, nonces=lambda i: nonces.nonce("draft", key, ref, i))

    def voice_caption(self, text: str) -> bool:
        return False  # a voice message holds nothing else: the text follows it

    async def send_voice(self, msg: OutboundVoice) -> None:
        """A reply read out, as a voice message; DeliveryError if Discord refused it (the text then goes alone)."""
        if self.client is None or msg.ref is not None and msg.ref.interaction:
            raise DeliveryError("no voice message: the Discord channel is not running, or this answers a command")
        try:
            await discord_voice.send(self.client, int(msg.key.chat_id), msg.audio, reference(msg.key, msg.ref),
                                     nonces.nonce("voice", msg.key, msg.ref) or nonces.random())
        except (*SEND_ERRORS, discord.InvalidData) as exc:
            raise DeliveryError(f"Discord did not take the voice message: {exc}") from exc

    async def send(self, msg: OutboundMessage) -> None:
        if self.client is None:
            raise DeliveryError("the Discord channel is not running")
        if await self._presses.answered(msg):  # the answer to a Stop button, to the presser only
            return
        ref = msg.ref
        slash = self._followup(ref.interaction) if ref is not None and ref.interaction else None
        quote = reference(msg.key, ref)
        try:
            for i, piece in enumerate(pieces(msg.text, msg.verbatim)):
                if slash is not None:
                    assert ref is not None
                    await slash.send(piece, ephemeral=ref.ephemeral, allowed_mentions=MENTIONS)
                else:
                    channel = self.client.get_partial_messageable(int(msg.key.chat_id))
                    await channel.send(piece, reference=quote if i == 0 else None,  # type: ignore[arg-type]
                                       nonce=nonces.nonce("reply", msg.key, ref, i, piece))  # type: ignore[arg-type]
        except discord.RateLimited as exc:
            raise DeliveryError(f"Discord asks for a {exc.retry_after:.0f} s wait before the bot posts again "
                                f"(a rate limit past MAX_RATE_WAIT): the reply was not sent") from exc
        except SEND_ERRORS as exc:
            if slash is None and refusals.is_refusal(exc):
                assert isinstance(exc, discord.HTTPException)
                if (error := self._refusals.refused(exc, int(msg.key.chat_id))) is None:
                    return  # told already (refusals.py): not again for every reply
                raise error from exc
            raise DeliveryError(f"Discord refused the reply: {exc}") from exc
        if slash is None:
            self._refusals.delivered(int(msg.key.chat_id))
