"""The Slack channel against a fake Slack (Web API, Socket Mode websocket, response_url) on 127.0.0.1."""

import asyncio
import contextlib
import re
import signal

import pytest

from bot.app import TuskApp
from bot.commands.base import ADMINS_ONLY
from bot.errors import ConfigError
from bot.events import ChatKey, OutboundMessage
from channels.slack import SlackError
from channels.slack.events import command_text, command_to_inbound, route_of, to_inbound
from channels.slack.format import LIMIT, from_slack, split_for_slack, to_mrkdwn
from tests import procs
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_slack import FakeSlack
from tests.own_words import ANSWERS, PERSONA, WHY, seed
from tests import kept
from tests.settle import idle

BOT = "U0TUSK"


@pytest.fixture
async def slack():
    async with FakeSlack(bot_user_id=BOT) as fake:
        fake.add_user("U0ANN", "ann")
        fake.add_user("U0BOSS", "boss", is_admin=True)
        fake.add_user("U0CAROL", "carol")
        yield fake


@pytest.fixture
def settings(make_settings, slack):
    """Settings for Socket Mode against the fake (extra variables as keywords)."""
    def make(**env):
        return make_settings(**{"SLACK_BOT_TOKEN": slack.bot_token, "SLACK_APP_TOKEN": slack.app_token,
                                "SLACK_API_URL": slack.api_url, **env})
    return make


@contextlib.asynccontextmanager
async def running(settings):
    app = TuskApp(settings)
    app.add_http()
    (channel,) = app.add_platforms()
    async with app:
        yield app, channel


def chats(settings):
    folder = settings.home / "chats" / "slack"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def user_texts(fake_llm):
    return [m["content"] for body in fake_llm.requests for m in body["messages"] if m["role"] == "user"]


# -- the pure mapping ------------------------------------------------------------------------


def dm_event(**extra):
    return {"type": "message", "channel_type": "im", "channel": "D1", "user": "U1", "text": "hi &amp; bye",
            "ts": "1700000000.000100", **extra}


def test_dm_event_becomes_a_direct_message():
    """A DM `message` event is a direct chat keyed by the DM channel, its text unescaped."""
    msg = to_inbound(dm_event(), bot_user_id=BOT)
    assert msg.key == ChatKey("slack", "D1") and msg.text == "hi & bye" and msg.sender_id == "U1"
    assert not msg.is_group and msg.ts == 1700000000.0001


def test_mention_event_becomes_a_thread_chat_without_the_mention():
    """An app_mention is a group chat keyed by channel and thread, the bot's mention removed."""
    event = {"type": "app_mention", "channel": "C1", "user": "U1", "text": f"<@{BOT}> sum <https://a.io|a.io>",
             "ts": "1700000005.000200", "thread_ts": "1700000001.000100"}
    msg = to_inbound(event, bot_user_id=BOT)
    assert msg.key == ChatKey("slack", "C1-1700000001.000100") and msg.text == "sum a.io" and msg.is_group
    top = to_inbound({**event, "thread_ts": None}, bot_user_id=BOT)
    assert top.key.chat_id == "C1-1700000005.000200"  # a top-level mention starts its own thread
    assert to_inbound(event, bot_user_id=BOT, thread_sessions=False).key.chat_id == "C1"


@pytest.mark.parametrize("extra", [
    {"subtype": "message_changed"}, {"subtype": "message_deleted"}, {"subtype": "bot_message"},
    {"subtype": "channel_join"}, {"bot_id": "B1"}, {"user": BOT}, {"user": None}, {"hidden": True},
    {"channel_type": "channel"}, {"type": "reaction_added"},
], ids=lambda e: next(iter(e.items()))[0] + "=" + str(next(iter(e.values()))))
def test_events_that_are_not_user_messages_are_dropped(extra):
    """Edits, deletions, bot messages (this bot's too), joins and channel chatter without a mention give nothing."""
    assert to_inbound(dm_event(**extra), bot_user_id=BOT) is None


def test_file_shares_and_thread_replies_in_dms_are_messages():
    """A file share's caption is the text; a DM thread reply is its own chat when thread sessions are on."""
    assert to_inbound(dm_event(subtype="file_share", text="see this"), bot_user_id=BOT).text == "see this"
    msg = to_inbound(dm_event(thread_ts="1700000000.000001"), bot_user_id=BOT)
    assert msg.key.chat_id == "D1-1700000000.000001" and not msg.is_group


def test_slash_commands_map_to_chat_commands():
    """`/memory undo` stays itself; `/tusk memory undo` is the same command; a bare `/tusk` asks for help."""
    known = ["help", "status", "new", "memory", "forget"]
    assert command_text("/memory", " undo ", known) == "/memory undo"
    assert command_text("/tusk", "memory undo", known) == "/memory undo"
    assert command_text("/tusk", "", known) == "/help"
    msg = command_to_inbound({"command": "/forget", "text": "", "user_id": "U1", "channel_id": "C1",
                              "channel_name": "general"}, known)
    assert msg.key == ChatKey("slack", "C1") and msg.text == "/forget" and msg.is_group
    direct = command_to_inbound({"command": "/status", "user_id": "U1", "channel_id": "D1",
                                 "channel_name": "directmessage"}, known)
    assert not direct.is_group


def test_chat_key_names_its_place():
    """A chat key alone says where to post: the channel, and the thread if it has one."""
    route = route_of(ChatKey("slack", "C1-1700000000.000100"))
    assert (route.channel, route.thread_ts) == ("C1", "1700000000.000100")
    assert route_of(ChatKey("slack", "D1")).thread_ts is None


def test_markdown_becomes_mrkdwn():
    """Bold, italics, links, headings, bullets and code map to mrkdwn; & < > are escaped, code included."""
    text = "# Plan\n**bold** *it* ~~no~~ [docs](https://x.io/?a=1&b=2) a<b\n- item\n```python\nif a < b: pass\n```"
    assert to_mrkdwn(text) == ("*Plan*\n*bold* _it_ ~no~ <https://x.io/?a=1&amp;b=2|docs> a&lt;b\n• item\n"
                               "```\nif a &lt; b: pass\n```")


def test_mrkdwn_keeps_mentions_and_blocks_broadcasts():
    """User mentions the model writes stay mentions; <!channel> cannot ping anyone; snake_case stays."""
    assert to_mrkdwn("ask <@U0ANN> or <!channel> about snake_case_name") == \
        "ask <@U0ANN> or &lt;!channel&gt; about snake_case_name"


def test_incoming_slack_markup_becomes_plain_text():
    """Links read as their label (and address when different); channel names and entities are plain."""
    assert from_slack("<http://a.com|docs> <mailto:x@y.z|x@y.z> <#C1|general> &lt;b&gt; <@U2>", BOT) == \
        "docs (http://a.com) x@y.z #general <b> <@U2>"


def test_long_markdown_is_split_with_fences_balanced():
    """Pieces stay within 3,000 characters as sent and every piece opens and closes its code block."""
    code = "\n".join(f"x_{i} = {i} < {i + 1}" for i in range(400))
    pieces = split_for_slack(f"Here:\n\n```python\n{code}\n```\n\nDone.")
    assert len(pieces) > 1 and all(len(p) <= LIMIT for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces)
    assert "x_399 = 399 &lt; 400" in pieces[-1] and pieces[-1].endswith("Done.")


# -- Socket Mode, end to end through the app --------------------------------------------------


async def test_dm_turn_over_socket_mode(settings, slack, fake_llm):
    """A DM is acknowledged, answered in the DM as mrkdwn, and marked with a reaction while its turn runs."""
    fake_llm.script(Reply(text="**Hello** Ann, see [the docs](https://x.io)."))
    s = settings()
    async with running(s):
        await slack.wait_connected()
        event = slack.dm("hello <https://a.io|a.io> &amp; you")
        assert await slack.wait_acked(await slack.send_event(event)) is None
        await slack.wait_for(lambda: slack.posted and len(slack.reactions) == 2)
    post = slack.posted[0]
    assert post["channel"] == "D0ANN" and "thread_ts" not in post
    assert post["text"] == "*Hello* Ann, see <https://x.io|the docs>."
    order = [m for m, _ in slack.calls if m in ("reactions.add", "chat.postMessage", "reactions.remove")]
    assert order == ["reactions.add", "chat.postMessage", "reactions.remove"]
    assert slack.reactions[0][1]["timestamp"] == event["ts"] and not slack.reacted
    assert user_texts(fake_llm)[-1].endswith("\n\nhello a.io & you")
    assert "direct chat; from ann (id U0ANN)" in user_texts(fake_llm)[-1]
    assert chats(s) == ["D0ANN"]


async def test_tusks_own_words_are_shown_as_written(settings, slack, fake_llm):
    """A command's answer, in a DM and to a slash command (its response_url), is escaped, not converted, and sent
    with mrkdwn off: the user sees facts 3 and 5 under their lines, `*strong*` and the `<...>` placeholder; the
    model's reply is still converted to mrkdwn."""
    fake_llm.script(Reply(text="**Green** tea, *strong*"))
    async with running(settings()) as (app, _):
        seed(kept.files(app, "slack", "D0ANN"))
        await slack.wait_connected()
        await slack.send_event(slack.dm(WHY))
        await slack.wait_for(lambda: slack.posted)
        await slack.send_command("/tusk", PERSONA.lstrip("/"))
        await slack.wait_for(lambda: slack.responses)
        await slack.send_event(slack.dm("which tea?"))  # the model's reply: converted to mrkdwn as before
        await slack.wait_for(lambda: len(slack.posted) == 2)
    assert slack.seen() == [*ANSWERS, "Green tea, strong"] and slack.posted[1]["text"] == "*Green* tea, _strong_"
    assert slack.responses[0]["text"].endswith("/persona &lt;how I should sound and behave here&gt;.")


async def test_mention_is_answered_in_its_thread(settings, slack, fake_llm):
    """A channel mention is a group turn whose reply goes into the mention's thread."""
    s = settings()
    async with running(s):
        await slack.wait_connected()
        event = slack.mention("what is up?")
        await slack.send_event(event)
        await slack.wait_for(lambda: slack.posted)
    assert slack.posted[0]["channel"] == "C0GENERAL" and slack.posted[0]["thread_ts"] == event["ts"]
    assert user_texts(fake_llm)[-1].endswith("group chat; from ann (id U0ANN)]\n\nwhat is up?")
    assert chats(s) == [f"C0GENERAL-{event['ts']}"]


async def test_each_thread_keeps_its_own_memory(settings, slack, fake_llm):
    """Two threads are two chat folders; a later mention in the first thread continues that conversation."""
    s = settings()
    async with running(s):
        await slack.wait_connected()
        first, second = slack.mention("one"), slack.mention("two")
        await slack.send_event(first)
        await slack.send_event(second)
        await slack.wait_for(lambda: len(slack.posted) == 2)
        await slack.send_event(slack.mention("again", thread_ts=first["ts"]))
        await slack.wait_for(lambda: len(slack.posted) == 3)
    assert chats(s) == sorted([f"C0GENERAL-{first['ts']}", f"C0GENERAL-{second['ts']}"])
    assert sorted(p["thread_ts"] for p in slack.posted) == sorted([first["ts"], second["ts"], first["ts"]])
    third = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert third[0] == "ann: one" and third[-1].endswith("again") and len(third) == 3


async def test_without_thread_sessions_a_channel_is_one_chat(settings, slack, fake_llm):
    """SLACK_THREAD_SESSIONS=false: mentions share the channel's chat and top-level ones get top-level replies."""
    s = settings(SLACK_THREAD_SESSIONS="false")
    async with running(s):
        await slack.wait_connected()
        first = slack.mention("one")
        await slack.send_event(first)
        await slack.wait_for(lambda: slack.posted)
        await slack.send_event(slack.mention("two", thread_ts=first["ts"]))
        await slack.wait_for(lambda: len(slack.posted) == 2)
    assert chats(s) == ["C0GENERAL"]
    assert "thread_ts" not in slack.posted[0] and slack.posted[1]["thread_ts"] == first["ts"]


async def test_retried_and_doubled_events_are_answered_once(settings, slack, fake_llm):
    """A Slack retry of an event, and a second event for the same message, never give a second answer."""
    async with running(settings()) as (app, _):
        await slack.wait_connected()
        event = slack.dm("once")
        envelopes = [await slack.send_event(event, event_id="Ev0001"),
                     await slack.send_event(event, event_id="Ev0001", retry_attempt=1, retry_reason="timeout"),
                     await slack.send_event({**event, "type": "app_mention"}, event_id="Ev0002")]
        for envelope in envelopes:
            await slack.wait_acked(envelope)
        await slack.send_event(slack.dm("then this"))  # the chat's turns run in order: a second "once" first
        await slack.wait_for(lambda: any(t.endswith("then this") for t in slack.texts()))
        await idle(app)
    assert len(slack.posted) == 2 and len(fake_llm.requests) == 2
    assert user_texts(fake_llm)[-1].endswith("then this")


async def test_messages_of_a_chat_keep_their_order(settings, slack, fake_llm):
    """A slow sender lookup for one message does not let the next message of the same chat overtake it."""
    async with running(settings()):
        await slack.wait_connected()
        first = slack.mention("first", user="U0ANN")
        slack.slow_next("users.info", 0.3)
        await slack.send_event(first)
        await slack.wait_for(lambda: slack.calls_to("users.info"))
        await slack.send_event(slack.mention("second", user="U0BOSS", thread_ts=first["ts"]))
        await slack.wait_for(lambda: len(slack.posted) == 2)
    assert [t.rsplit("\n", 1)[-1] for t in user_texts(fake_llm)[-2:]] == ["ann: first", "second"]  # the earlier one by its speaker
    assert "from boss (id U0BOSS)" in user_texts(fake_llm)[-1]


async def test_slash_command_is_answered_ephemerally(settings, slack, fake_llm):
    """A slash command is acknowledged at once and answered only to its caller, without the model."""
    async with running(settings()):
        await slack.wait_connected()
        envelope = await slack.send_command("/status")
        assert await slack.wait_acked(envelope) is None
        await slack.send_command("/tusk", "memory")
        await slack.wait_for(lambda: len(slack.responses) == 2)
    assert all(r["response_type"] == "ephemeral" for r in slack.responses)
    texts = {r["text"].split("\n")[0] for r in slack.responses}
    assert "Model: openai/fake-model" in texts and any(t.startswith("I don't remember anything") for t in texts)
    assert not slack.posted and not fake_llm.requests and not slack.reactions


async def test_forget_in_a_channel_needs_an_admin(settings, slack, fake_llm):
    """/forget in a channel is refused to members (and unknown users), allowed to workspace admins and SLACK_ADMINS."""
    async with running(settings(SLACK_ADMINS="U0CAROL")):
        await slack.wait_connected()
        for user in ("U0ANN", "U0NOBODY", "U0BOSS", "U0CAROL"):
            await slack.send_command("/forget", user=user, channel="C0GENERAL")
            await slack.wait_for(lambda n=len(slack.responses): len(slack.responses) > n)
        await slack.send_event(slack.mention("/forget", user="U0ANN"))
        await slack.wait_for(lambda: slack.posted)
    refused = ADMINS_ONLY.format(what="make me forget this chat")
    nothing = "I keep nothing about this chat: there is nothing to forget."
    assert [r["text"] for r in slack.responses] == [refused, refused, nothing, nothing]
    assert slack.posted[0]["text"] == refused and not fake_llm.requests


async def test_forget_in_a_dm_needs_no_admin(settings, slack, fake_llm):
    """In a DM the caller's own chat is theirs to erase."""
    async with running(settings()):
        await slack.wait_connected()
        await slack.send_event(slack.dm("remember me"))
        await slack.wait_for(lambda: slack.posted)
        await slack.send_command("/forget", "confirm", user="U0ANN", channel="D0ANN")
        await slack.wait_for(lambda: slack.responses)
    assert slack.responses[0]["text"].startswith("Forgotten:")


async def test_users_outside_the_allow_list_cost_nothing(settings, slack, fake_llm):
    """No LLM call, no session folder, no API call and no reply for senders not in SLACK_ALLOW_FROM."""
    s = settings(SLACK_ALLOW_FROM="U0BOSS")
    async with running(s) as (app, _):
        await slack.wait_connected()
        await slack.send_event(slack.dm("hi", user="U0ANN", channel="D0ANN"))
        await slack.send_event(slack.mention("hi", user="U0ANN"))
        await slack.wait_acked(await slack.send_command("/status", user="U0ANN"))
        await slack.send_event(slack.dm("hi", user="U0BOSS", channel="D0BOSS"))
        await slack.wait_for(lambda: slack.posted and len(slack.reactions) == 2)  # ann's came first: refused by now
        await idle(app)  # and a turn of theirs would have ended
    assert chats(s) == ["D0BOSS"] and len(fake_llm.requests) == 1
    assert [p["channel"] for p in slack.posted] == ["D0BOSS"] and not slack.responses
    assert all(p["channel"] == "D0BOSS" for _, p in slack.reactions)
    assert all(p.get("user") != "U0ANN" for p in slack.calls_to("users.info"))


async def test_long_reply_is_split_into_readable_messages(settings, slack, fake_llm):
    """A reply over 3,000 characters arrives as several messages, each within the limit, together the whole text."""
    text = "\n\n".join(" ".join(f"word{p}x{i}" for i in range(60)) for p in range(12))
    fake_llm.script(Reply(text=text))
    async with running(settings()):
        await slack.wait_connected()
        await slack.send_event(slack.dm("long please"))
        await slack.wait_for(lambda: len(slack.reactions) == 2)
    pieces = slack.texts()  # as they read at the end (a streamed reply's updates applied)
    assert len(pieces) >= 3 and all(len(p) <= LIMIT for p in pieces)
    assert " ".join(pieces).split() == text.split()


async def test_reconnects_when_slack_asks(settings, slack, fake_llm):
    """A `disconnect` envelope (Slack refreshing the connection) leads to a new connection that still answers."""
    async with running(settings()):
        await slack.wait_connected()
        await slack.disconnect()
        await slack.wait_connected(2)
        await slack.send_event(slack.dm("still there?"))
        await slack.wait_for(lambda: slack.posted)
    assert len(slack.calls_to("apps.connections.open")) == 2


# -- sending -------------------------------------------------------------------------------


async def test_send_from_the_chat_key_alone(settings, slack, fake_llm):
    """A message answering nothing (a reminder) is posted to the channel and thread its key names."""
    async with running(settings()) as (_, channel):
        await channel.send(OutboundMessage(ChatKey("slack", "C0GENERAL-1700000001.000100"), "Reminder: *stand-up*"))
        await channel.send(OutboundMessage(ChatKey("slack", "D0ANN"), "Hi"))
    assert [(p["channel"], p.get("thread_ts"), p["text"]) for p in slack.posted] == [
        ("C0GENERAL", "1700000001.000100", "Reminder: _stand-up_"), ("D0ANN", None, "Hi")]


async def test_failed_send_raises_with_slacks_error(settings, slack, fake_llm):
    """A refused post raises SlackError naming the method and Slack's error code, not the text."""
    async with running(settings()) as (_, channel):
        slack.fail_next("chat.postMessage", "channel_not_found")
        with pytest.raises(SlackError, match="chat.postMessage to C0GONE failed: channel_not_found") as info:
            await channel.send(OutboundMessage(ChatKey("slack", "C0GONE"), "secret words"))
    assert "secret words" not in str(info.value)


async def test_rate_limited_post_is_retried(settings, slack, fake_llm):
    """A 429 with Retry-After is waited out and the post goes through."""
    async with running(settings()) as (_, channel):
        slack.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=0)
        await channel.send(OutboundMessage(ChatKey("slack", "D0ANN"), "hi"))
    assert len(slack.calls_to("chat.postMessage")) == 2 and len(slack.posted) == 1


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"])
async def test_a_refused_token_stops_tusk_at_start(settings, slack, variable):
    """A token Slack refuses is a ConfigError at start that names the variable."""
    with pytest.raises(ConfigError, match=f"Slack refused {variable} \\(invalid_auth\\)"):
        async with running(settings(**{variable: "xoxb-wrong" if variable == "SLACK_BOT_TOKEN" else "xapp-wrong"})):
            pass


# -- HTTP events mode ----------------------------------------------------------------------


async def test_http_mode_answers_signed_requests_and_rejects_forged_ones(make_settings, slack, fake_llm):
    """HTTP events: the URL check is answered, a signed event gets a reply, a forged one a 401 and nothing."""
    s = make_settings(SLACK_BOT_TOKEN=slack.bot_token, SLACK_SIGNING_SECRET=slack.signing_secret,
                      SLACK_API_URL=slack.api_url, SLACK_HTTP_PORT="0")
    async with running(s) as (_, channel):
        url = f"http://127.0.0.1:{channel.port}/slack/events"
        check = {"type": "url_verification", "token": "t", "challenge": "abc123"}
        assert await slack.deliver(url, check) == (200, '{"challenge": "abc123"}')
        forged = slack.event_body(slack.dm("forged"))
        assert (await slack.deliver(url, forged, secret="not-the-secret"))[0] == 401
        status, _ = await slack.deliver(url, slack.event_body(slack.dm("signed")))
        assert status == 200
        await slack.wait_for(lambda: slack.posted)
        status, _ = await slack.deliver(url, slack.command_payload("/status"), form=True)
        assert status == 200
        await slack.wait_for(lambda: slack.responses)
    assert len(slack.posted) == 1 and user_texts(fake_llm)[-1].endswith("signed")
    assert slack.responses[0]["text"].startswith("Model:") and len(fake_llm.requests) == 1


# -- the real command ----------------------------------------------------------------------


async def test_tusk_run_answers_on_slack_and_stops_on_sigterm(slack, fake_llm, tmp_path):
    """`tusk run` with Slack variables connects over Socket Mode, answers a DM, logs no text, exits 0 on SIGTERM."""
    env = procs.clean_env(TUSK_HOME=str(tmp_path / "data"), TUSK_MODEL="openai/fake-model", TUSK_API_BASE=fake_llm.base_url,
               TUSK_API_KEY="sk-test", TUSK_LLM_RETRIES="0", TUSK_HTTP_PORT="0",
               SLACK_BOT_TOKEN=slack.bot_token, SLACK_APP_TOKEN=slack.app_token, SLACK_API_URL=slack.api_url,
               SLACK_ALLOW_FROM="U0ANN", TUSK_LOG_LEVEL="debug")
    proc = await procs.start_tusk("run", env=env, cwd=tmp_path,
                                  stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        while line and "Tusk is running" not in line:
            line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        if "Tusk is running on slack" not in line:
            pytest.fail(f"tusk run did not start: {(await proc.stderr.read()).decode()[-2000:]}")
        await slack.wait_connected()
        await slack.send_event(slack.dm("zebra crossing"))
        await slack.wait_for(lambda: slack.posted and len(slack.reactions) == 2, timeout=procs.FIRST_TURN)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    err = (await proc.stderr.read()).decode()
    ours = [line for line in err.splitlines() if re.search(r" (channels\.slack|slack_)\S* \[", line)]
    assert slack.posted[0]["channel"] == "D0ANN" and slack.posted[0]["text"].startswith("echo: ")
    assert ours and not any("zebra" in line or " DEBUG " in line for line in ours)
    assert slack.bot_token not in err and slack.app_token not in err


async def test_threads_and_dms_never_see_each_others_memory(settings, slack, fake_llm):
    """A thread's MEMORY.md reaches only that thread's prompts, not another thread's nor a DM's."""
    s = settings()
    first, second = slack.mention("one"), slack.mention("two")
    async with running(s) as (app, _):
        files = kept.files(app, "slack", f"C0GENERAL-{first['ts']}")
        files.dir.mkdir(parents=True)
        files.memory.write_text("- canary-thread")
        fake_llm.responder = lambda body: Reply(text="seen" if "canary-thread" in str(body) else "none")
        await slack.wait_connected()
        for event in (first, second, slack.dm("three", user="U0ANN")):
            await slack.send_event(event)
        await slack.wait_for(lambda: len(slack.posted) == 3)
    replies = {(p["channel"], p.get("thread_ts")): p["text"] for p in slack.posted}
    assert replies[("C0GENERAL", first["ts"])] == "seen"
    assert sorted(replies.values()) == ["none", "none", "seen"]


async def test_shutdown_stops_taking_events_but_delivers_the_running_turn(settings, slack, fake_llm):
    """On shutdown the socket closes first; the turn already running still gets its reply posted."""
    fake_llm.script(Reply(text="finished late", delay=0.5))
    async with running(settings()):
        await slack.wait_connected()
        await slack.send_event(slack.dm("slow one", user="U0ANN"))
        await fake_llm.wait_for_requests(1)
    assert [p["text"] for p in slack.posted] == ["finished late"]


async def test_html_502_from_a_proxy_is_retried_not_a_crash(settings, slack, fake_llm, caplog):
    """users.info answered by a proxy's HTML 502 is logged and retried; the sender's name comes from the retry."""
    async with running(settings()):
        await slack.wait_connected()
        slack.fail_next("users.info", status=502, body=("text/html", "<html><h1>502 Bad Gateway</h1></html>"))
        await slack.send_event(slack.dm("hello", user="U0ANN"))
        await slack.wait_for(lambda: slack.posted)
    assert len(slack.calls_to("users.info")) == 2 and "from ann (id U0ANN)" in user_texts(fake_llm)[-1]
    assert "Slack answered HTTP 502 to users.info" in caplog.text


async def test_non_json_error_bodies_never_break_the_adapter(settings, slack, fake_llm, caplog):
    """HTML labelled as JSON, or plain text, on every attempt: the sender is taken as nameless, the message is
    answered, and the next one too."""
    async with running(settings()):
        await slack.wait_connected()
        for body in [("application/json", "<html>Bad Gateway</html>")] * 3:
            slack.fail_next("users.info", status=502, body=body)
        await slack.send_event(slack.dm("first", user="U0ANN"))
        await slack.wait_for(lambda: slack.posted, timeout=10)
        for body in [("text/plain", "upstream connect error")] * 3:
            slack.fail_next("users.info", status=503, body=body)
        await slack.send_event(slack.dm("second", user="U0CAROL", channel="D0CAROL"))
        await slack.wait_for(lambda: len(slack.posted) == 2, timeout=10)
    assert "users.info for U0ANN failed (HTTP 502, not a Slack answer)" in caplog.text
    assert "users.info for U0CAROL failed (HTTP 503, not a Slack answer)" in caplog.text
    assert [t.rsplit("\n", 1)[-1] for t in user_texts(fake_llm)] == ["first", "second"]


async def test_stranger_gets_a_pairing_code_on_slack(settings, slack, fake_llm):
    """Default pairing policy: a stranger's DM is answered with a code only; no users.info call, no LLM call."""
    s = settings(TUSK_DM_POLICY="pairing")
    async with running(s) as (app, _):
        await slack.wait_connected()
        await slack.send_event(slack.dm("hello", user="U0CAROL", channel="D0CAROL"))
        await slack.wait_for(lambda: slack.posted)
        code = app.access.pairing.state().pending[0].code
        assert code in slack.posted[0]["text"] and slack.posted[0]["channel"] == "D0CAROL"
        assert slack.calls_to("users.info") == [] and fake_llm.requests == []
        app.access.pairing.approve(code)
        await slack.send_event(slack.dm("now?", user="U0CAROL", channel="D0CAROL"))
        await slack.wait_for(lambda: len(slack.posted) == 2)
    assert len(fake_llm.requests) == 1 and chats(s) == ["D0CAROL"]
