"""Discord nonces: every message the bot posts carries one Discord enforces, made from the message it answers, so
the same reply sent again (a turn run again after a crash) is not doubled (channels/discord_bot/nonces.py)."""

import pytest

from bot.events import ChatKey, OutboundMessage, ReplyRef
from channels.discord_bot import DiscordChannel, DiscordSettings
from channels.discord_bot.nonces import nonce
from tests.fakes.fake_discord import FakeDiscord, snowflake
from tests.published import Published


def test_a_nonce_is_fixed_by_what_it_answers_and_fits_discords_25_characters():
    """The same inputs give the same nonce of at most 25 characters; another channel, message, kind, piece or
    text gives another; a reply that answers no message gets none (discord.py's random one)."""
    key, ref = ChatKey("discord", "55"), ReplyRef(message="1234")
    made = nonce("reply", key, ref, 0, "hello")
    assert made == nonce("reply", key, ref, 0, "hello") and made is not None and len(made) <= 25
    others = {nonce("reply", ChatKey("discord", "56"), ref, 0, "hello"), nonce("reply", key, ReplyRef(message="1235"),
              0, "hello"), nonce("draft", key, ref, 0), nonce("reply", key, ref, 1, "hello"),
              nonce("reply", key, ref, 0, "hello!"), nonce("voice", key, ref)}
    assert made not in others and len(others) == 6
    assert nonce("reply", key, None, 0, "hi") is None and nonce("reply", key, ReplyRef(thread="x"), 0, "hi") is None


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.guild = fake.add_guild()
        fake.channel = fake.guild.add_channel()
        fake.alice = fake.add_user("alice")
        fake.dm = snowflake()
        yield fake


@pytest.fixture
async def receiving(dc):
    """A started (receiving) Discord channel on the fake and what it published; stopped after."""
    published = Published()
    channel = DiscordChannel(DiscordSettings(dc.token, api_base=dc.api_base, gateway_url=dc.gateway_url), published,
                             [("help", "what I can do")])
    await channel.start()
    yield channel, published
    await channel.stop()


async def test_a_dm_names_its_message_without_quoting_it(receiving, dc):
    """A DM's ReplyRef names the message (for the nonce) but its reply quotes nothing; a guild reply quotes."""
    channel, published = receiving
    dm = await dc.message(dc.dm, dc.alice, "hi")
    asked = await dc.message(dc.channel, dc.alice, f"{dc.mention} hi", guild=dc.guild)
    await dc.wait_for(lambda: len(published) == 2)
    in_dm, in_guild = published
    assert in_dm.ref == ReplyRef(message=dm["id"], quote=False) and in_guild.ref == ReplyRef(message=asked["id"])
    await channel.send(OutboundMessage.answer(in_dm, "hello"))
    await channel.send(OutboundMessage.answer(in_guild, "hello there"))
    first, second = dc.sent
    assert "message_reference" not in first and str(second["message_reference"]["message_id"]) == asked["id"]
    assert first["enforce_nonce"] is True and first["nonce"] == nonce("reply", in_dm.key, in_dm.ref, 0, "hello")


async def test_the_same_reply_sent_again_shows_once_and_another_text_shows(receiving, dc):
    """The answer to a message sent twice is one message; a notice about the same message with other words is a
    message of its own; two notices outside any turn with the same words both show (random nonces)."""
    channel, published = receiving
    await dc.message(dc.dm, dc.alice, "hi")
    await dc.wait_for(lambda: published)
    answer = OutboundMessage.answer(published[0], "hello")
    await channel.send(answer)
    await channel.send(answer)
    await channel.send(OutboundMessage.answer(published[0], "I could not read that file", verbatim=True))
    notice = OutboundMessage(published[0].key, "Tusk restarted", verbatim=True)
    await channel.send(notice)
    await channel.send(notice)
    assert [m["content"] for m in dc.sent] == ["hello", "I could not read that file", "Tusk restarted",
                                               "Tusk restarted"]
    assert len(dc.repeats) == 1 and all(m["enforce_nonce"] is True and m["nonce"] for m in dc.sent)


async def test_a_draft_begun_again_takes_up_the_messages_it_made(receiving, dc):
    """A reply streamed twice for the same message (a turn run again): the second draft makes no new message but
    edits the first one's to its own text, and ends on its final text."""
    channel, published = receiving
    await dc.message(dc.dm, dc.alice, "tell me")
    await dc.wait_for(lambda: published)
    first = channel.draft(published[0])
    await first.show("First attempt")
    await first.finish("First attempt, done.")
    again = channel.draft(published[0])
    await again.show("Second")
    await again.finish("Second attempt, done.")
    (made,) = dc.sent
    assert dc.repeats[0]["id"] == made["id"] and [e["content"] for e in dc.edits][-1] == "Second attempt, done."
    assert [m["content"] for m in dc.created] == ["Second attempt, done."]
