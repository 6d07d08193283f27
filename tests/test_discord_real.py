"""Discord as real servers send it: payloads beyond the plain message, through real discord.py and the fake."""

import asyncio
import json
import logging
from datetime import datetime, timezone
from types import SimpleNamespace

import aiohttp
import pytest

from bot.errors import DeliveryError
from bot.events import ChatKey, OutboundMessage
from bot.ops.doctor import _discord
from channels.discord_bot import MAX_RATE_WAIT, DiscordChannel, discord
from channels.discord_bot.inbound import QUOTE, to_inbound
from channels.discord_bot.refusals import GATEWAY_MESSAGE_CONTENT_LIMITED, QUIET, Refusals
from tests.fakes.fake_discord import MESSAGE_CONTENT, snowflake
from tests.fakes.fake_llm import Reply, last_user_text
from tests.test_discord import dc, sent_to, start_tusk, tusk_dc  # noqa: F401 (fixtures)


def user_texts(fake_llm):
    return [last_user_text(r) for r in fake_llm.requests]


def session_lines(tmp_path, chat):
    path = tmp_path / f"data/chats/discord/{chat}/session.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def discord_channel(app) -> DiscordChannel:
    return next(c for c in app.channels if isinstance(c, DiscordChannel))


ME = 1000


def hand_built(content, *, guild_id=9, cached=True, replied=None, kind=discord.MessageType.default):
    """The attributes `to_inbound` reads of a discord.Message; `replied`: (author name, text) of a replied-to one."""
    resolved = None
    if replied is not None:
        resolved = SimpleNamespace(author=SimpleNamespace(id=5, display_name=replied[0]), content=replied[1],
                                   guild=None, mentions=[])
    guild = SimpleNamespace(id=guild_id) if guild_id and cached else None
    channel = SimpleNamespace(id=55, guild_id=guild_id, permissions_for=lambda member: discord.Permissions.none())
    return SimpleNamespace(
        author=SimpleNamespace(id=7, bot=False, display_name="Alice", guild_permissions=None), webhook_id=None,
        type=kind, guild=guild, mentions=[], attachments=[], content=content, channel=channel,
        reference=SimpleNamespace(resolved=resolved) if replied else None,
        created_at=datetime(2025, 1, 2, tzinfo=timezone.utc))


def test_a_reply_that_is_a_command_stays_a_command():
    """"@bot /forget" sent as a reply is the command, not a quote followed by it."""
    msg = to_inbound(hand_built(f"<@{ME}> /forget", replied=("Bob", "hi"), kind=discord.MessageType.reply), ME)
    assert msg.text == "/forget"


def test_a_long_replied_to_text_is_cut():
    """The replied-to text reaches the model cut to QUOTE characters, on one line."""
    msg = to_inbound(hand_built("and?", guild_id=None, replied=("Bob", "a\nb " + "x" * 1000),
                                kind=discord.MessageType.reply), ME)
    quote = msg.text.split("\n")[0]
    assert quote.startswith('(replying to Bob: "a b xxx') and len(quote) <= QUOTE + 30 and msg.text.endswith("\nand?")


def test_a_guild_not_in_the_cache_is_still_a_group():
    """A message whose guild is unknown (removed, unavailable) is group chatter, never taken for a DM."""
    msg = to_inbound(hand_built("hello", cached=False), ME)
    assert msg.is_group and not msg.addressed


def test_an_empty_message_is_nothing():
    """No text, file, sticker or embed (a guild message without the Message Content intent): no InboundMessage."""
    assert to_inbound(hand_built(""), ME) is None and to_inbound(hand_built("  ", guild_id=None), ME) is None


# --- the Message Content intent ------------------------------------------------------------------


async def test_intent_off_in_the_portal_reads_dms_and_mentions_only(start_tusk, dc, fake_llm, tmp_path, caplog):
    """With the intent off, Tusk connects without it, says once what to switch on, and drops the empty messages."""
    dc.message_content_enabled = False
    app = await start_tusk()
    assert not dc.identify["intents"] & MESSAGE_CONTENT
    await dc.message(dc.channel, dc.alice, f"{dc.mention} /listen on", guild=dc.guild, roles=(dc.mods,))
    await dc.wait_for(lambda: dc.sent)
    await dc.message(dc.channel, dc.alice, "secret chatter nobody addressed", guild=dc.guild)
    await dc.message(dc.channel, dc.bob, "a reply without ping", guild=dc.guild, reply_to=dc.created[0])
    await dc.message(dc.channel, dc.alice, f"{dc.mention} now you", guild=dc.guild)
    await dc.message(dc.dm, dc.alice, "and a DM")
    await dc.wait_for(lambda: len(fake_llm.requests) == 2 and len(dc.sent) == 3)
    await app.agent.until_idle()
    assert sorted(t.split("\n")[-1] for t in user_texts(fake_llm)) == ["and a DM", "now you"]  # chats run in parallel
    assert "secret chatter" not in "".join(session_lines(tmp_path, dc.channel))
    assert not any('"content": ""' in line for line in session_lines(tmp_path, dc.channel))
    warnings = [r for r in caplog.records if "Message Content intent is not enabled" in r.getMessage()]
    assert len(warnings) == 1 and "Privileged Gateway Intents -> Message Content Intent" in warnings[0].getMessage()


async def test_gateway_4014_is_one_clear_line_and_tusk_still_runs(start_tusk, dc, fake_llm, caplog):
    """Flags that say yes but a gateway closing with 4014: one error line naming the setting, then DMs still work."""
    dc.application_flags = GATEWAY_MESSAGE_CONTENT_LIMITED
    dc.message_content_enabled = False
    await start_tusk()
    await dc.message(dc.dm, dc.alice, "still there?")
    await dc.wait_for(lambda: dc.sent)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "4014" in errors[0].getMessage() and "Message Content Intent" in errors[0].getMessage()
    assert errors[0].exc_info is None  # a line, not a traceback
    assert not dc.identify["intents"] & MESSAGE_CONTENT


@pytest.mark.parametrize("flags, verdict", [(0, "warn"), (GATEWAY_MESSAGE_CONTENT_LIMITED, "ok"), (1 << 18, "ok")])
async def test_doctor_reads_the_application_flags(make_settings, dc, flags, verdict):
    """`tusk doctor` warns, with the portal setting, when the flags show the Message Content intent off."""
    dc.application_flags = flags
    check = await _discord(make_settings(DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base))
    assert check.verdict == verdict
    if verdict == "warn":
        assert "Message Content" in check.detail and "Privileged Gateway Intents" in check.fix


# --- message types and what the model reads -------------------------------------------------------


async def test_a_reply_brings_the_replied_to_text(tusk_dc, dc, fake_llm):
    """Replying to someone's message with a mention: the model reads who said what was replied to."""
    original = await dc.message(dc.channel, dc.alice, "the meeting moved to Friday 5pm", guild=dc.guild)
    await dc.message(dc.channel, dc.bob, f"{dc.mention} is that right?", guild=dc.guild, reply_to=original)
    await dc.wait_for(lambda: dc.sent)
    assert user_texts(fake_llm)[0].endswith('(replying to Alice: "the meeting moved to Friday 5pm")\nis that right?')


async def test_mentions_become_names(tusk_dc, dc, fake_llm):
    """User, nickname, role and channel mentions reach the model as names; the bot's own mention is gone."""
    alice, bob = dc.alice["id"], dc.bob["id"]
    await dc.message(dc.channel, dc.alice, f"{dc.mention} ask <@{bob}> and <@!{alice}> in <#{dc.channel}> "
                     f"about <@&{dc.mods}>, not <@{snowflake()}>", guild=dc.guild, mentions=(dc.alice, dc.bob),
                     mention_roles=[dc.mods])
    await dc.wait_for(lambda: dc.sent)
    assert user_texts(fake_llm)[0].endswith("ask @Bob and @Alice in #general about @mods, not @unknown-user")


async def test_system_messages_are_never_turns(tusk_dc, dc, fake_llm, tmp_path):
    """Joins, pins, boosts, thread creation and thread starters cost nothing, even in a DM; a real message follows."""
    for kind in (7, 6, 8, 18, 21):
        await dc.message(dc.channel, dc.alice, f"{dc.mention} system {kind}", guild=dc.guild, type=kind)
        await dc.message(dc.dm, dc.alice, f"system {kind}", type=kind)
    await dc.message(dc.dm, dc.alice, "a real one")
    await dc.wait_for(lambda: dc.sent)
    assert [t.split("\n")[-1] for t in user_texts(fake_llm)] == ["a real one"]
    assert not (tmp_path / f"data/chats/discord/{dc.channel}").exists()


async def test_stickers_embeds_and_forwards_alone_are_read(tusk_dc, dc, fake_llm):
    """A message with only a sticker, an embed, or a forwarded message is a turn the model can read."""
    await dc.message(dc.dm, dc.alice, sticker_items=[{"id": snowflake(), "name": "wave", "format_type": 1}])
    await dc.wait_for(lambda: dc.sent)
    await dc.message(dc.dm, dc.alice, embeds=[{"type": "rich", "title": "Release notes", "description": "v2 is out"}])
    await dc.wait_for(lambda: len(dc.sent) == 2)
    snapshot = {"type": 0, "content": "lunch at noon", "embeds": [], "attachments": [], "flags": 0, "mentions": [],
                "mention_roles": [], "timestamp": "2026-01-02T10:00:00+00:00", "edited_timestamp": None}
    forward = {"type": 1, "channel_id": dc.channel, "message_id": snowflake()}  # a message_reference of type FORWARD
    await dc.message(dc.dm, dc.alice, message_reference=forward, message_snapshots=[{"message": snapshot}])
    await dc.wait_for(lambda: len(dc.sent) == 3)
    assert [t.split("\n")[-1] for t in user_texts(fake_llm)] == [
        "[sticker: wave]", "[embed: Release notes: v2 is out]", "[forwarded: lunch at noon]"]


async def test_webhooks_other_bots_and_itself_are_never_answered(tusk_dc, dc, fake_llm):
    """A bot's answer that mentions Tusk, a webhook post and Tusk's own echoed reply start no turn: no loop."""
    relay = dc.add_user("relay", bot=True)
    await dc.message(dc.channel, dc.alice, f"{dc.mention} hello", guild=dc.guild)
    await dc.wait_for(lambda: dc.sent)
    await dc.dispatch("MESSAGE_CREATE", {**dc.created[0], "guild_id": dc.guild.id})  # our own reply, as Discord echoes
    await dc.message(dc.channel, relay, f"{dc.mention} echo", guild=dc.guild, reply_to=dc.created[0])
    await dc.message(dc.channel, dc.alice, f"{dc.mention} via hook", guild=dc.guild, webhook=True)
    await dc.message(dc.dm, dc.alice, "done")
    await dc.wait_for(lambda: len(dc.sent) == 2)
    assert len(fake_llm.requests) == 2


async def test_edits_and_deletions_are_not_turns(tusk_dc, dc, fake_llm, tmp_path):
    """An edited or deleted message starts no new turn; the session keeps the text as first sent."""
    question = await dc.message(dc.dm, dc.alice, "what is 2+2?")
    await dc.wait_for(lambda: dc.sent)
    await dc.edit(question, "what is 3+3?")
    await dc.delete(question)
    await dc.message(dc.dm, dc.alice, "thanks")
    await dc.wait_for(lambda: len(dc.sent) == 2)
    assert len(fake_llm.requests) == 2
    saved = [json.loads(line) for line in session_lines(tmp_path, dc.dm)]
    assert [m["content"] for m in saved if m.get("role") == "user"] == ["what is 2+2?", "thanks"]


# --- threads, forums, guilds ---------------------------------------------------------------------


async def test_forum_posts_and_private_threads_keep_their_own_memory(tusk_dc, dc, fake_llm, tmp_path):
    """A forum post and a private thread are chats of their own, apart from their parents."""
    forum = dc.guild.add_channel("help-forum", type=15)
    post, private = dc.guild.add_thread(forum, "my question"), dc.guild.add_thread(dc.channel, "secret", private=True)
    # threads made after start arrive as THREAD_CREATE
    for thread in (post, private):
        created = next(t for t in dc.guild.threads if t["id"] == thread)
        await dc.dispatch("THREAD_CREATE", created | {"newly_created": True})
    await dc.message(post, dc.alice, f"{dc.mention} in the forum", guild=dc.guild)
    await dc.message(private, dc.alice, f"{dc.mention} in private", guild=dc.guild)
    await dc.wait_for(lambda: len(dc.sent) == 2)
    chats = {p.name for p in (tmp_path / "data/chats/discord").iterdir()}
    assert chats == {post, private}
    assert len(sent_to(dc, post)) == len(sent_to(dc, private)) == 1  # each answered in its own thread


async def test_removed_from_a_guild(tusk_dc, dc, fake_llm, caplog):
    """After GUILD_DELETE a reminder there fails once with the fix, then quietly; its messages are not DMs."""
    await dc.remove_guild(dc.guild)
    await dc.message(dc.channel, dc.alice, "chatter after removal", guild=dc.guild)
    channel = discord_channel(tusk_dc)
    for _ in range(2):
        dc.fail_next("POST", f"/channels/{dc.channel}/messages", 403, code=50001, message="Missing Access")
    with pytest.raises(DeliveryError, match="invite it to the server again"):
        await channel.send(OutboundMessage(ChatKey("discord", dc.channel), "time to stretch"))
    await channel.send(OutboundMessage(ChatKey("discord", dc.channel), "again"))  # told already: not raised
    assert not fake_llm.requests and not dc.sent


# --- REST errors as Discord sends them -----------------------------------------------------------


async def test_missing_permissions_is_told_once_per_channel(tusk_dc, dc, fake_llm, caplog):
    """403 50013 on every reply in a channel: one log entry with the fix, no retries, typing stops, no crash."""
    for _ in range(10):
        dc.fail_next("POST", f"/channels/{dc.channel}/messages", 403, code=50013)
    await dc.message(dc.channel, dc.alice, f"{dc.mention} one", guild=dc.guild)
    await dc.wait_for(lambda: "Send Messages" in caplog.text)
    await tusk_dc.agent.until_idle()
    await dc.message(dc.channel, dc.alice, f"{dc.mention} two", guild=dc.guild)
    await dc.wait_for(lambda: len(fake_llm.requests) == 2)
    await tusk_dc.agent.until_idle()
    told = [r for r in caplog.records if "Send Messages" in r.getMessage() or "Send Messages" in str(r.exc_info)]
    posts = [p for m, p in dc.requests if m == "POST" and p.endswith(f"/channels/{dc.channel}/messages")]
    assert len(told) == 1 and len(posts) <= 3
    await dc.message(dc.dm, dc.alice, "other chats still work")
    await dc.wait_for(lambda: dc.sent)


async def test_rate_limits_are_waited_out(tusk_dc, dc, fake_llm):
    """A 429 (per route, then global) with retry_after is waited out by discord.py: the reply arrives once."""
    dc.fail_next("POST", f"/channels/{dc.dm}/messages", 429, retry_after=0.05)
    dc.fail_next("POST", f"/channels/{dc.dm}/messages", 429, retry_after=0.05, is_global=True)
    await dc.message(dc.dm, dc.alice, "hello")
    await dc.wait_for(lambda: dc.sent)
    posts = [p for m, p in dc.requests if m == "POST" and p.endswith(f"/channels/{dc.dm}/messages")]
    assert len(posts) == 3 and len(dc.sent) == 1


async def test_a_long_rate_limit_fails_the_reply_at_once(tusk_dc, dc):
    """A 429 asking for more than MAX_RATE_WAIT seconds fails the reply now instead of holding the chat."""
    dc.fail_next("POST", f"/channels/{dc.dm}/messages", 429, retry_after=MAX_RATE_WAIT * 100, is_global=True)
    with pytest.raises(DeliveryError, match="rate limit"):
        await asyncio.wait_for(discord_channel(tusk_dc).send(OutboundMessage(ChatKey("discord", dc.dm), "hi")), 5)


async def test_intent_switched_off_while_running(tusk_dc, dc, fake_llm, caplog, monkeypatch):
    """The intent turned off while Tusk runs: at the next identify the 4014 is one error line, and Tusk reconnects
    without the intent instead of going silent."""
    async def no_wait(self, shard_id, *, initial=False):  # discord.py waits 5 s before identifying again: time only
        pass

    monkeypatch.setattr(discord.Client, "before_identify_hook", no_wait)
    assert dc.identify["intents"] & MESSAGE_CONTENT
    dc.message_content_enabled = False
    await dc.ask_reconnect()
    await dc.wait_for(lambda: not dc.identify["intents"] & MESSAGE_CONTENT and dc._sessions)
    await dc.message(dc.dm, dc.alice, "are you back?")
    await dc.wait_for(lambda: dc.sent)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "4014" in errors[0].getMessage() and errors[0].exc_info is None


async def test_a_streamed_reply_refused_is_told_once(tusk_dc, dc, fake_llm, caplog):
    """A long (streamed) reply in a channel the bot may not post in: the fix is logged once, nothing is retried."""
    fake_llm.script(Reply(text=" ".join(f"word{i}" for i in range(150)), token_delay=0.002))
    for _ in range(5):
        dc.fail_next("POST", f"/channels/{dc.channel}/messages", 403, code=50013)
    await dc.message(dc.channel, dc.alice, f"{dc.mention} tell me a lot", guild=dc.guild)
    await dc.wait_for(lambda: "Send Messages" in caplog.text)
    await tusk_dc.agent.until_idle()
    told = [r for r in caplog.records if "Send Messages" in r.getMessage() + str(r.exc_info)]
    posts = [p for m, p in dc.requests if m == "POST" and p.endswith(f"/channels/{dc.channel}/messages")]
    assert len(told) == 1 and len(posts) == 2 and not dc.sent  # the draft's first message, then the final send


async def test_refusals_are_told_once_per_channel_until_delivered_or_quiet_again(dc):
    """A refusal yields the fix once per channel; a delivery there, or QUIET seconds, makes the next one told again."""
    clock = [0.0]
    refusals = Refusals(clock=lambda: clock[0])
    dc.fail_next("GET", "/users/@me", 403, code=50007, message="Cannot send messages to this user")
    async with aiohttp.ClientSession() as session:  # a real Discord error body, as discord.py reads it
        async with session.get(f"{dc.api_base}/users/@me") as response:
            exc = discord.Forbidden(response, await response.json())
    first = refusals.refused(exc, 1)
    assert first is not None and "blocked the bot" in str(first) and "50007" in str(first)
    assert refusals.refused(exc, 1) is None and refusals.refused(exc, 2) is not None and refusals.quiet(1)
    refusals.delivered(1)
    assert refusals.refused(exc, 1) is not None
    clock[0] += QUIET + 1
    assert not refusals.quiet(1) and refusals.refused(exc, 1) is not None
