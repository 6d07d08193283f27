"""Discord through real discord.py against a fake REST API and gateway on 127.0.0.1."""

import asyncio
import contextlib
import json
import signal
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from bot.app import TuskApp
from bot.commands.base import ADMINS_ONLY
from bot.errors import ConfigError
from bot.events import ChatKey, OutboundMessage
from channels.discord_bot import DiscordChannel, api_root, command_to_inbound, discord, to_inbound  # quiet import
from tests import procs
from tests.fakes.fake_discord import MANAGE_MESSAGES, FakeDiscord, shown, snowflake
from tests.fakes.fake_llm import Reply, last_user_text
from tests.own_words import ANSWERS, PERSONA, WHY, seed
from tests.test_cli import env_for
from tests import kept

ME = 1000
COMMANDS = {"help", "status", "new", "memory", "forget"}  # at least these; the app may add more


# --- the pure mapping, with hand-built objects ------------------------------------------------


def message(content="", *, guild=True, bot=False, mentions=(), reply_author=None, manage=False, channel_id=55,
            kind=discord.MessageType.default, webhook_id=None):
    """Just the attributes `to_inbound` reads of a discord.Message."""
    perms = discord.Permissions(manage_messages=manage)
    replied = SimpleNamespace(author=SimpleNamespace(id=reply_author))
    reference = None if reply_author is None else SimpleNamespace(resolved=replied)
    return SimpleNamespace(
        author=SimpleNamespace(id=7, bot=bot, display_name="Alice"), webhook_id=webhook_id, type=kind,
        guild=SimpleNamespace(id=9) if guild else None, attachments=[],
        mentions=[SimpleNamespace(id=i, display_name=f"User{i}") for i in mentions],
        reference=reference, content=content, created_at=datetime(2025, 1, 2, tzinfo=timezone.utc),
        channel=SimpleNamespace(id=channel_id, permissions_for=lambda member: perms))


def test_dm_is_a_turn_keyed_by_its_channel():
    """In a DM every message is a turn, keyed by the DM channel id, from a non-group sender."""
    msg = to_inbound(message("hello", guild=False, channel_id=42), ME)
    assert msg is not None and msg.key == ChatKey("discord", "42") and msg.text == "hello"
    assert (msg.sender_id, msg.sender_name, msg.is_group, msg.sender_is_admin) == ("7", "Alice", False, False)
    assert msg.ts == datetime(2025, 1, 2, tzinfo=timezone.utc).timestamp()


def test_guild_message_needs_a_mention_which_is_stripped():
    """In a guild only messages mentioning the bot count, with both mention forms removed from the text."""
    assert not to_inbound(message("hello all"), ME).addressed  # handed over as chatter: /listen decides
    assert not to_inbound(message("hi <@2000>", mentions=[2000]), ME).addressed
    msg = to_inbound(message(f"<@{ME}> what is <@!{ME}> up?", mentions=[ME]), ME)
    assert msg is not None and msg.text == "what is up?" and msg.is_group


def test_reply_to_the_bot_counts_as_addressed():
    """A reply to one of the bot's messages is a turn even without a mention; a reply to someone else is not."""
    assert to_inbound(message("and then?", reply_author=ME), ME).text == "and then?"
    assert not to_inbound(message("and then?", reply_author=2000), ME).addressed
    deleted = message("hm", mentions=())
    deleted.reference = SimpleNamespace(resolved=SimpleNamespace(id=1))  # DeletedReferencedMessage has no author
    assert not to_inbound(deleted, ME).addressed


def test_bots_webhooks_and_system_messages_are_ignored():
    """Messages from bots (the bot itself included), webhooks and system events never become turns."""
    assert to_inbound(message("hi", guild=False, bot=True), ME) is None
    assert to_inbound(message("hi", guild=False, webhook_id=5), ME) is None
    assert to_inbound(message("", guild=False, kind=discord.MessageType.pins_add), ME) is None
    assert to_inbound(message("hi", guild=False, kind=discord.MessageType.reply), ME) is not None


def test_admin_flag_is_manage_messages_in_that_channel():
    """`sender_is_admin` is the channel's Manage Messages permission for the sender; never set in DMs."""
    assert to_inbound(message(f"<@{ME}> /forget", mentions=[ME], manage=True), ME).sender_is_admin
    assert not to_inbound(message(f"<@{ME}> /forget", mentions=[ME]), ME).sender_is_admin
    assert not to_inbound(message("/forget", guild=False, manage=True), ME).sender_is_admin


def test_slash_command_maps_to_the_typed_command():
    """A slash command becomes the text a user would type, with the interaction's resolved permissions."""
    interaction = SimpleNamespace(channel_id=55, guild_id=9, user=SimpleNamespace(id=7, display_name="Alice"),
                                  permissions=discord.Permissions(manage_messages=True),
                                  created_at=datetime(2025, 1, 2, tzinfo=timezone.utc))
    msg = command_to_inbound(interaction, "memory", "undo")
    assert msg.text == "/memory undo" and msg.key == ChatKey("discord", "55") and msg.sender_is_admin
    assert command_to_inbound(interaction, "help", "").text == "/help"


def test_api_base_may_omit_the_api_path():
    """DISCORD_API_BASE may be a bare host (the API path is added) or a full REST root (kept)."""
    assert api_root("http://proxy:8080/") == "http://proxy:8080/api/v10"
    assert api_root("http://127.0.0.1:9/api/v10/") == "http://127.0.0.1:9/api/v10"


# --- end to end through the app ---------------------------------------------------------------


@pytest.fixture
async def dc():
    async with FakeDiscord(token="fake-discord-token-123") as fake:
        fake.guild = guild = fake.add_guild()
        fake.channel = guild.add_channel()
        fake.thread = guild.add_thread(fake.channel)
        fake.mods = guild.add_role("mods", MANAGE_MESSAGES)
        fake.alice, fake.bob = fake.add_user("alice"), fake.add_user("bob")
        fake.dm = snowflake()
        yield fake


@pytest.fixture
async def start_tusk(make_settings, dc):
    """Start Tusk with the Discord channel pointed at the fake (extra env as keyword arguments); stopped after."""
    async with contextlib.AsyncExitStack() as stack:
        async def start(**env):
            app = TuskApp(make_settings(DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base,
                                        DISCORD_GATEWAY_URL=dc.gateway_url, **env))
            app.add_http()
            assert [c.name for c in app.add_platforms()] == ["discord"]
            return await stack.enter_async_context(app)

        yield start


@pytest.fixture
async def tusk_dc(start_tusk):
    return await start_tusk()


def sent_to(dc, channel):
    """What each message the bot posted in `channel` says now (a streamed reply's edits applied)."""
    edited = {e["id"]: e["content"] for e in dc.edits}
    return [edited.get(m["id"], m["content"]) for m in dc.sent if m["channel_id"] == channel]


async def test_dm_turn_end_to_end(tusk_dc, dc, fake_llm, tmp_path):
    """A DM is answered with the model's reply (not as a quote), shows "typing", and is saved under the DM's id."""
    fake_llm.script(Reply(text="Hello **Alice**!", delay=0.2))
    await dc.message(dc.dm, dc.alice, "hello there")
    await dc.wait_for(lambda: dc.sent and dc.typing)
    assert dc.sent[0]["content"] == "Hello **Alice**!" and dc.sent[0]["channel_id"] == dc.dm
    assert "message_reference" not in dc.sent[0] and dc.sent[0]["allowed_mentions"]["parse"] == []
    assert dc.typing[0] == dc.dm
    assert last_user_text(fake_llm.requests[0]).endswith("hello there")
    assert (tmp_path / f"data/chats/discord/{dc.dm}/session.jsonl").exists()


async def test_tusks_own_words_are_shown_as_written(tusk_dc, dc, fake_llm):
    """A command's answer, typed in a DM or asked as a slash command, is escaped for Discord's Markdown: the user
    sees facts 3 and 5 (not a list renumbered 3, 4) under their lines, `*strong*` and the `<...>` placeholder;
    the model's reply goes as it was written, for Discord to render."""
    seed(kept.files(tusk_dc, "discord", dc.dm))
    fake_llm.script(Reply(text="**Green** tea, *strong*"))
    await dc.message(dc.dm, dc.alice, WHY)
    await dc.wait_for(lambda: dc.sent)
    await dc.command(PERSONA.lstrip("/"), dc.dm, dc.alice)
    await dc.wait_for(lambda: dc.followups)
    await dc.message(dc.dm, dc.alice, "which tea?")
    await dc.wait_for(lambda: len(dc.sent) == 2)
    assert [shown(m["content"]) for m in (dc.sent[0], dc.followups[0], dc.sent[1])] == [*ANSWERS, "Green tea, strong"]
    assert dc.sent[0]["content"].startswith("3\\. Ann drinks \\*strong\\*")
    assert dc.sent[1]["content"] == "**Green** tea, *strong*"


async def test_gateway_intents_exclude_privileged_members(tusk_dc, dc):
    """The bot asks for guilds, guild messages, DMs and message content, not the members or presence intents."""
    intents = discord.Intents._from_value(dc.identify["intents"])
    assert intents == discord.Intents(guilds=True, guild_messages=True, dm_messages=True, message_content=True)


async def test_guild_mention_turn_end_to_end(tusk_dc, dc, fake_llm, tmp_path):
    """A mention in a guild channel is a turn without the mention; the reply quotes the question."""
    fake_llm.script(Reply(text="4"))
    question = await dc.message(dc.channel, dc.alice, f"{dc.mention} what is 2+2?", guild=dc.guild)
    await dc.wait_for(lambda: dc.sent)
    text = last_user_text(fake_llm.requests[0])
    assert text.endswith("what is 2+2?") and "<@" not in text and "group chat" in text
    assert sent_to(dc, dc.channel) == ["4"]
    assert dc.sent[0]["message_reference"]["message_id"] == int(question["id"])
    assert (tmp_path / f"data/chats/discord/{dc.channel}/session.jsonl").exists()


async def test_reply_to_the_bot_is_a_turn(tusk_dc, dc, fake_llm):
    """Replying to the bot's message (without a ping) continues the conversation in a guild channel."""
    fake_llm.script(Reply(text="first"), Reply(text="second"))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} one", guild=dc.guild)
    await dc.wait_for(lambda: dc.created)
    await dc.message(dc.channel, dc.alice, "two", guild=dc.guild, reply_to=dc.created[0])
    await dc.wait_for(lambda: len(dc.sent) == 2)
    assert last_user_text(fake_llm.requests[1]).endswith("two")


async def test_unaddressed_and_bot_messages_are_ignored(tusk_dc, dc, fake_llm):
    """Guild messages without a mention, messages from bots (itself included) and webhooks cost nothing."""
    other_bot = dc.add_user("otherbot", bot=True)
    await dc.message(dc.channel, dc.alice, "just chatting", guild=dc.guild)
    await dc.message(dc.channel, other_bot, f"{dc.mention} hey bot", guild=dc.guild)
    await dc.message(dc.dm, dc.bot, "my own message")
    await dc.message(dc.channel, dc.alice, f"{dc.mention} via webhook", guild=dc.guild, webhook=True)
    await dc.message(dc.channel, dc.alice, f"{dc.mention} the real one", guild=dc.guild)
    await dc.wait_for(lambda: dc.sent and dc.typing)
    assert len(fake_llm.requests) == 1 and last_user_text(fake_llm.requests[0]).endswith("the real one")
    assert dc.typing == [dc.channel]


async def test_each_thread_keeps_its_own_memory(tusk_dc, dc, fake_llm, tmp_path):
    """A message in a thread is keyed by the thread id, apart from its parent channel."""
    fake_llm.script(Reply(text="noted"))  # short: not streamed, so the one message sent is the final reply
    await dc.message(dc.thread, dc.alice, f"{dc.mention} in the thread", guild=dc.guild)
    await dc.wait_for(lambda: dc.sent)  # the session file is written before the final reply goes out
    assert dc.sent[0]["channel_id"] == dc.thread
    assert (tmp_path / f"data/chats/discord/{dc.thread}/session.jsonl").exists()
    assert not (tmp_path / f"data/chats/discord/{dc.channel}").exists()


async def test_slash_commands_are_synced_and_answered_through_the_interaction(tusk_dc, dc, fake_llm):
    """Every chat command is registered at start; /help is answered as a deferred ephemeral followup."""
    synced = {c["name"]: c for c in dc.commands[None]}
    assert set(synced) == {name for name, _ in tusk_dc.menu()} >= COMMANDS
    options = {name: [(o["name"], o["type"], o["required"]) for o in c["options"]] for name, c in synced.items()}
    assert options["memory"] == [("what", 3, False)] and options["forget"] == [("confirm", 3, False)]
    assert options["help"] == options["status"] == options["new"] == []
    interaction = await dc.command("help", dc.channel, dc.alice, guild=dc.guild)
    await dc.wait_for(lambda: dc.followups)
    assert dc.callbacks == [{"type": 5, "data": {"flags": 64}, "interaction_id": interaction["id"]}]
    assert dc.followups[0]["token"] == interaction["token"] and dc.followups[0]["flags"] & 64
    assert dc.followups[0]["content"].startswith("Commands:\n/help")
    assert not dc.sent and not fake_llm.requests


async def test_slash_command_option_is_passed_as_text(tusk_dc, dc):
    """`/memory what:history 3` in a DM runs `/memory history 3`, answered visibly (DMs need no ephemeral)."""
    await dc.command("memory", dc.dm, dc.alice, "history 3")
    await dc.wait_for(lambda: dc.followups)
    assert dc.callbacks[0]["type"] == 5 and "data" not in dc.callbacks[0]
    assert dc.followups[0]["content"] == "No history entries yet." and not dc.followups[0].get("flags")


async def test_guild_sync_goes_to_the_development_guild(start_tusk, dc):
    """With DISCORD_GUILD_ID the commands are synced to that guild (instant), not globally."""
    await start_tusk(DISCORD_GUILD_ID=dc.guild.id)
    assert {c["name"] for c in dc.commands[dc.guild.id]} >= COMMANDS and None not in dc.commands


async def test_slash_forget_needs_manage_messages(tusk_dc, dc):
    """In a guild /forget is refused without Manage Messages and runs with it."""
    await dc.command("forget", dc.channel, dc.alice, guild=dc.guild)
    await dc.wait_for(lambda: dc.followups)
    await dc.command("forget", dc.channel, dc.bob, "confirm", guild=dc.guild, permissions=MANAGE_MESSAGES)
    await dc.wait_for(lambda: len(dc.followups) == 2)
    assert dc.followups[0]["content"] == ADMINS_ONLY.format(what="make me forget this chat")
    assert dc.followups[1]["content"] == "I keep nothing about this chat: there is nothing to forget."


async def test_typed_forget_checks_the_members_roles(tusk_dc, dc, fake_llm):
    """"@bot /forget" typed in a guild is refused for a plain member and runs for one with a Manage Messages role."""
    await dc.message(dc.channel, dc.alice, f"{dc.mention} /forget", guild=dc.guild)
    await dc.wait_for(lambda: dc.sent)
    await dc.message(dc.channel, dc.bob, f"{dc.mention} /forget", guild=dc.guild, roles=(dc.mods,))
    await dc.wait_for(lambda: len(dc.sent) == 2)
    assert sent_to(dc, dc.channel) == [ADMINS_ONLY.format(what="make me forget this chat"),
                                       "I keep nothing about this chat: there is nothing to forget."]
    assert not fake_llm.requests


async def test_long_reply_is_split_at_line_breaks(tusk_dc, dc, fake_llm):
    """A 10,000-character reply arrives as pieces of at most 2,000 that rejoin to the text; only the first quotes."""
    long = "\n".join(f"line {i:03d} " + "x" * 90 for i in range(100))[:10_000]
    fake_llm.script(Reply(text=long))
    await dc.message(dc.channel, dc.alice, f"{dc.mention} tell me everything", guild=dc.guild)
    await dc.wait_for(lambda: dc.sent and "\n".join(sent_to(dc, dc.channel)) == long)
    pieces = dc.sent
    assert len(pieces) >= 5 and all(len(p["content"]) <= 2000 for p in pieces)
    assert "message_reference" in pieces[0] and not any("message_reference" in p for p in pieces[1:])


async def test_allow_list_blocks_others_at_no_cost(start_tusk, dc, fake_llm, tmp_path):
    """Users outside DISCORD_ALLOW_FROM get no reply, cause no LLM call and leave no session folder."""
    await start_tusk(DISCORD_ALLOW_FROM=f" {dc.alice['id']} ")
    other_dm = snowflake()
    await dc.message(other_dm, dc.bob, "let me in")
    await dc.message(dc.channel, dc.bob, f"{dc.mention} me too", guild=dc.guild)
    await dc.command("status", dc.channel, dc.bob, guild=dc.guild)
    await dc.message(dc.dm, dc.alice, "hello")
    await dc.wait_for(lambda: dc.sent)
    assert len(fake_llm.requests) == 1 and [m["channel_id"] for m in dc.sent] == [dc.dm]
    assert not dc.callbacks and not dc.followups
    assert [p.name for p in (tmp_path / "data/chats/discord").iterdir()] == [dc.dm]


async def test_attachment_without_text_is_kept_and_read(tusk_dc, dc, fake_llm, tmp_path):
    """A text file with no message text is downloaded into the chat's media/ folder and read into the turn."""
    await dc.message(dc.dm, dc.alice, "", attachments=(dc.attachment("notes.txt", b"buy oat milk"),))
    await dc.wait_for(lambda: dc.sent)
    (kept,) = (tmp_path / "data/chats/discord" / dc.dm / "media").iterdir()
    assert kept.name.endswith("-notes.txt") and kept.read_bytes() == b"buy oat milk"
    assert "buy oat milk" in json.dumps(fake_llm.requests[-1]["messages"][-1])


async def test_failed_send_is_logged_with_the_chat_key(tusk_dc, dc, fake_llm, caplog):
    """A reply Discord refuses raises in the channel and the bus logs it with the chat key (no message text)."""
    fake_llm.script(Reply(text="secret words"))
    dc.fail_next("POST", f"/channels/{dc.dm}/messages", status=403)
    await dc.message(dc.dm, dc.alice, "hello")
    await dc.wait_for(lambda: "could not deliver" in caplog.text)
    assert f"could not deliver a reply to discord:{dc.dm}" in caplog.text and "secret words" not in caplog.text
    assert not dc.sent


async def test_message_without_a_waiting_turn_goes_to_the_chat(tusk_dc, dc):
    """A message that answers no pending turn (a reminder) is posted to the chat's channel or thread as is."""
    channel = next(c for c in tusk_dc.channels if isinstance(c, DiscordChannel))
    await channel.send(OutboundMessage(ChatKey("discord", dc.thread), "time to stretch"))
    assert dc.sent == [{**dc.sent[0], "content": "time to stretch", "channel_id": dc.thread}]
    assert "message_reference" not in dc.sent[0]


async def test_wrong_token_fails_at_start(make_settings, dc):
    """A token Discord refuses stops Tusk at start with a ConfigError naming DISCORD_BOT_TOKEN."""
    app = TuskApp(make_settings(DISCORD_BOT_TOKEN="wrong", DISCORD_API_BASE=dc.api_base,
                                DISCORD_GATEWAY_URL=dc.gateway_url))
    app.add_platforms()
    with pytest.raises(ConfigError, match="DISCORD_BOT_TOKEN"):
        async with app:
            pass


async def test_stop_restores_discord_py_defaults(start_tusk, dc):
    """The REST and gateway addresses are put back when the channel stops."""
    default = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    app = await start_tusk()
    channel = next(c for c in app.channels if isinstance(c, DiscordChannel))
    assert discord.http.Route.BASE == dc.api_base
    await channel.stop()
    assert (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY) == default


async def test_tusk_run_answers_on_discord_and_stops_on_sigterm(dc, fake_llm, tmp_path):
    """`tusk run` with Discord settings connects, answers a DM without logging its text, and exits 0 on SIGTERM."""
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", DISCORD_BOT_TOKEN=dc.token, DISCORD_API_BASE=dc.api_base,
                  DISCORD_GATEWAY_URL=dc.gateway_url, DISCORD_ALLOW_FROM=dc.alice["id"])
    fake_llm.script(Reply(text="pong from tusk"))
    proc = await procs.start_tusk("run", env=env,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        assert "Tusk is running on discord" in line
        await dc.wait_connected()
        await dc.message(dc.dm, dc.alice, "zebra sandwich")
        await dc.wait_for(lambda: dc.sent, timeout=procs.FIRST_TURN)
        assert dc.sent[0]["content"] == "pong from tusk"
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert "zebra" not in err.decode() and dc.token not in err.decode() and "Discord channel running" in err.decode()


async def test_channels_and_threads_never_see_each_others_memory(tusk_dc, dc, fake_llm):
    """A channel's MEMORY.md reaches only that channel's prompts, not its thread's nor a DM's."""
    files = kept.files(tusk_dc, "discord", str(dc.channel))
    files.dir.mkdir(parents=True)
    files.memory.write_text("- canary-channel")
    fake_llm.responder = lambda body: Reply(text="seen" if "canary-channel" in str(body) else "none")
    await dc.message(dc.channel, dc.alice, f"{dc.mention} hi", guild=dc.guild)
    await dc.message(dc.thread, dc.alice, f"{dc.mention} hi", guild=dc.guild)
    await dc.message(dc.dm, dc.alice, "hi")
    await dc.wait_for(lambda: len(dc.sent) == 3)
    assert (sent_to(dc, dc.channel), sent_to(dc, dc.thread), sent_to(dc, dc.dm)) == (["seen"], ["none"], ["none"])


async def test_message_during_start_up_is_taken_not_dropped(start_tusk, dc, fake_llm):
    """A DM arriving after READY but before start-up completes (discord.py's guild wait) is queued and answered."""
    starting = asyncio.create_task(start_tusk())
    await dc.wait_connected(timeout=60)
    await dc.message(dc.dm, dc.alice, "early bird")
    assert not starting.done()  # still in discord.py's wait for the guilds: the race this is about
    await starting
    await dc.wait_for(lambda: dc.sent)
    assert dc.sent[0]["content"].startswith("echo: ") and dc.sent[0]["content"].endswith("early bird")


async def test_stranger_gets_a_pairing_code_on_discord(start_tusk, dc, fake_llm):
    """With the default pairing policy a stranger's DM gets a code and no LLM call; a guild mention, a guild code."""
    app = await start_tusk(TUSK_DM_POLICY="pairing")
    await dc.message(dc.dm, dc.alice, "hello")
    await dc.message(dc.channel, dc.bob, f"{dc.mention} hi", guild=dc.guild)
    await dc.wait_for(lambda: len(dc.sent) == 2)
    assert "tusk pairing approve" in dc.sent[0]["content"] and "this group" in dc.sent[1]["content"]
    pending = app.access.pairing.state().pending
    assert {(r.kind, r.id) for r in pending} == {("user", dc.alice["id"]), ("group", dc.guild.id)}
    assert fake_llm.requests == []
