"""/stop on Discord: the Stop button under a draft (a component interaction), the slash command, and typed."""

import contextlib

import pytest

from bot.app import TuskApp
from bot.stop import NOTHING_TO_STOP, stopped_note
from channels.discord_bot import STOPPED_ALREADY
from channels.discord_bot import stream as discord_stream
from tests.fakes.fake_discord import FakeDiscord, snowflake
from tests.fakes.fake_llm import Reply
from tests.legality import violations
from tests import kept

LONG = " ".join(f"word{i}" for i in range(600)) + "."
EPHEMERAL = 64


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.guild = guild = fake.add_guild()
        fake.channel = guild.add_channel()
        fake.alice, fake.bob = fake.add_user("alice"), fake.add_user("bob")
        fake.dm = snowflake()
        yield fake


@pytest.fixture
async def start(make_settings, dc, monkeypatch):
    monkeypatch.setattr(discord_stream, "INTERVAL", 0.2)
    async with contextlib.AsyncExitStack() as stack:
        async def start(**env):
            app = TuskApp(make_settings(DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base,
                                        DISCORD_GATEWAY_URL=dc.gateway_url, **env))
            app.add_platforms()
            return await stack.enter_async_context(app)

        yield start


def saved(app, chat):
    session = kept.on_disk(app, "discord", chat)
    return kept.on_disk(app, "discord", chat).unconsolidated


def with_button(dc):
    return next((m for m in dc.created if dc.components(m["id"])), None)


async def test_the_stop_button_stops_the_reply_and_goes_away(start, dc, fake_llm):
    """The draft carries a Stop button; Bob's press ends the reply on its text so far and a note naming him,
    is answered to him alone, the button goes, and the session keeps exactly that reply."""
    app = await start()
    fake_llm.script(Reply(text=LONG, token_delay=0.02), Reply(text="next one"))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} tell me a lot", guild=dc.guild)
    message = await dc.wait_for(lambda: with_button(dc), timeout=10)
    (row,) = dc.components(message["id"])
    assert row["components"][0]["custom_id"] == "tusk:stop" and row["components"][0]["label"] == "Stop"
    await dc.press(message, "tusk:stop", dc.bob, guild=dc.guild)
    await dc.wait_for(lambda: dc.callbacks, timeout=10)
    assert dc.callbacks[0]["type"] == 4 and dc.callbacks[0]["data"]["content"] == "Stopped."
    assert dc.callbacks[0]["data"]["flags"] & EPHEMERAL
    await dc.wait_for(lambda: not app.bus.active_chats and with_button(dc) is None, timeout=10)
    reply = saved(app, dc.channel)[-1].content
    assert reply.endswith(stopped_note("Bob")) and dc.edits[-1]["content"] == reply
    assert dc.edits[-1]["components"] == []
    await dc.message(dc.channel, dc.alice, f"{dc.mention} and then?", guild=dc.guild)
    await dc.wait_for(lambda: any(m["content"] == "next one" for m in dc.sent), timeout=10)
    assert violations(fake_llm.requests[-1]["messages"]) == []


async def test_a_typed_stop_in_a_dm_ends_the_reply(start, dc, fake_llm):
    """`/stop` typed in a DM while the reply is written ends it, noted, with no answer of its own; a second
    /stop (nothing running now) says so."""
    app = await start()
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    await dc.message(dc.dm, dc.alice, "tell me a lot")
    await dc.wait_for(lambda: with_button(dc), timeout=10)
    await dc.message(dc.dm, dc.alice, "/stop")
    await dc.wait_for(lambda: not app.bus.active_chats and with_button(dc) is None, timeout=10)
    await dc.message(dc.dm, dc.alice, "/stop")
    await dc.wait_for(lambda: dc.sent[-1]["content"] == NOTHING_TO_STOP, timeout=10)
    assert len(dc.sent) == 2 and saved(app, dc.dm)[-1].content.endswith(stopped_note(""))
    assert len(fake_llm.requests) == 1


async def test_the_slash_stop_stops_and_closes_its_interaction(start, dc, fake_llm):
    """/stop as an application command: the reply is stopped and the deferred interaction gets "Stopped."."""
    app = await start()
    await dc.wait_connected()
    fake_llm.script(Reply(text=LONG, token_delay=0.02))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} tell me a lot", guild=dc.guild)
    await dc.wait_for(lambda: with_button(dc), timeout=10)
    await dc.command("stop", dc.channel, dc.alice, guild=dc.guild)
    await dc.wait_for(lambda: dc.followups, timeout=10)
    assert dc.followups[0]["content"] == "Stopped." and dc.callbacks[0]["type"] == 5
    await dc.wait_for(lambda: not app.bus.active_chats, timeout=10)
    assert saved(app, dc.channel)[-1].content.endswith(stopped_note("Alice"))


async def test_a_press_on_a_finished_reply_or_by_a_stranger_stops_nothing(start, dc, fake_llm):
    """With DISCORD_ALLOW_FROM naming Alice only, Bob's press is refused and the reply runs to its end; a press
    that arrives after it is finished (a stale client) is told so."""
    app = await start(DISCORD_ALLOW_FROM=dc.alice["id"])
    fake_llm.script(Reply(text=LONG[:1500], token_delay=0.01))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} tell me", guild=dc.guild)
    message = await dc.wait_for(lambda: with_button(dc), timeout=10)
    await dc.press(message, "tusk:stop", dc.bob, guild=dc.guild)
    await dc.wait_for(lambda: dc.callbacks, timeout=10)
    assert dc.callbacks[0]["data"]["content"].startswith("Only those who may talk with me here")
    await dc.wait_for(lambda: not app.bus.active_chats, timeout=10)
    assert saved(app, dc.channel)[-1].content == LONG[:1500]
    await dc.press(message, "tusk:stop", dc.alice, guild=dc.guild, as_shown=[{"type": 1, "components": [
        {"type": 2, "style": 2, "label": "Stop", "custom_id": "tusk:stop"}]}])
    await dc.wait_for(lambda: len(dc.callbacks) == 2, timeout=10)
    assert dc.callbacks[1]["data"]["content"] == STOPPED_ALREADY
