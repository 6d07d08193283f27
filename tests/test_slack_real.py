"""Slack as real workspaces send it: every message subtype, doubled and retried events, Slack's markup and
rich_text blocks, edits, Slack Connect fields and the Web API's `ok: false` errors, through TuskApp and the
Slack channel against the fake Slack (tests/fakes/fake_slack.py)."""

import contextlib
import logging

import pytest

from bot.app import TuskApp
from bot.events import ChatKey, OutboundMessage
from channels.slack import stream as slack_stream
from channels.slack.events import EDIT_WINDOW, to_inbound
from channels.slack.format import from_slack
from channels.slack.rich import rich_text
from tests.fakes.fake_llm import Reply
from tests.settle import idle
from tests.test_slack import BOT, slack  # noqa: F401  (the fake Slack and its three people)
from tests import kept

LONG = " ".join(f"word{i}" for i in range(60)) + "."  # past TUSK_STREAM_MIN_CHARS: a thread reply streams


@pytest.fixture
def settings(make_settings, slack, monkeypatch):
    monkeypatch.setattr(slack_stream, "INTERVAL", 0.05)

    def make(**env):
        return make_settings(**{"SLACK_BOT_TOKEN": slack.bot_token, "SLACK_APP_TOKEN": slack.app_token,
                                "SLACK_API_URL": slack.api_url, **env})
    return make


@contextlib.asynccontextmanager
async def running(settings, slack):
    app = TuskApp(settings)
    app.add_http()
    (channel,) = app.add_platforms()
    async with app:
        await slack.wait_connected()
        yield app, channel


def saved(app, chat):
    """The chat's session as saved on disk: (role, content) pairs."""
    session = kept.on_disk(app, "slack", chat)
    return [(m.role, m.content) for m in kept.on_disk(app, "slack", chat).unconsolidated]


def last_user_text(fake_llm):
    return [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"][-1].rsplit("\n\n", 1)[-1]


async def settle(app, slack, fake_llm, posts, requests):
    """Wait for `posts` replies and `requests` LLM calls, then for the answer to a last /status (an ephemeral
    response, no post, no model call): Socket Mode envelopes are taken in the order they arrive, so every event
    before it has been answered or dropped by then; and for every turn published so far to end."""
    await slack.wait_for(lambda: len(slack.posted) + len({c["ts"] for c in slack.stream_calls}) >= posts)
    await fake_llm.wait_for_requests(requests)
    await status_answered(slack)
    await idle(app)


async def status_answered(slack):
    """Send /status as the last envelope and wait for its ephemeral answer."""
    before = len(slack.responses)
    await slack.send_command("/status", user="U0ANN", channel="D0ANN")
    await slack.wait_for(lambda: len(slack.responses) > before)


# -- which events carry a message --------------------------------------------------------------


def real_non_messages(slack):
    """Events real workspaces send that carry nothing said to Tusk."""
    mention = slack.mention("hello")
    own = {"type": "message", "channel": "D0ANN", "channel_type": "im", "user": BOT, "bot_id": slack.bot_id,
           "text": "my reply", "ts": slack.next_ts(), "app_id": "A0TUSK", "bot_profile": {"id": slack.bot_id}}
    return {
        "message_changed": slack.edited(slack.dm("hi"), "hi there"),
        "message_changed of our reply": slack.edited(own, "my reply, edited"),
        "message_deleted": slack.deleted(slack.dm("oops")),
        "bot_message": slack.subtyped("bot_message", "build passed", user=None, bot_id="B0CI", username="ci"),
        "bot_id with a user": slack.channel_message(f"<@{BOT}> ping", user="U0OTHERBOT", bot_id="B0OTHER"),
        "our own message": own,
        "app_mention from a bot": {**mention, "bot_id": "B0OTHER"},
        "channel_join": slack.subtyped("channel_join", "<@U0ANN> has joined the channel"),
        "channel_leave": slack.subtyped("channel_leave", "<@U0ANN> has left the channel"),
        "huddle_thread": slack.subtyped("huddle_thread", "", room={"id": "R1", "name": ""}),
        "unknown subtype": slack.subtyped("some_future_subtype", "text"),
        "message_replied": slack.subtyped("message_replied", "", user=None, hidden=True,
                                          message={"type": "message", "user": "U0ANN", "text": "q"}),
    }


def test_real_events_that_are_not_messages_carry_none(slack):
    """Edits, deletions, bots (Tusk included), joins, leaves, huddles and unknown subtypes give no message."""
    events = real_non_messages(slack)
    kept = {name: to_inbound(event, bot_user_id=BOT) for name, event in events.items()}
    assert {name: msg for name, msg in kept.items() if msg is not None and msg.text.strip()} == {}


def test_user_subtypes_are_messages(slack):
    """A /me message, a thread reply also sent to the channel and a file share are what their sender said."""
    me = to_inbound(slack.dm("waves", subtype="me_message"), bot_user_id=BOT)
    broadcast = to_inbound(slack.mention("also here", thread_ts="1700000001.000100", subtype="thread_broadcast",
                                         root={"text": "q", "ts": "1700000001.000100"}), bot_user_id=BOT)
    share = to_inbound(slack.dm("see this", subtype="file_share", files=[]), bot_user_id=BOT)
    assert me.text == "waves" and share.text == "see this"
    assert broadcast.text == "also here" and broadcast.key.chat_id == "C0GENERAL-1700000001.000100"


def test_rich_text_blocks_speak_when_text_is_empty():
    """With an empty `text`, the rich_text blocks are read: mentions, links, emoji, lists, code and quotes."""
    blocks = [{"type": "rich_text", "block_id": "x1", "elements": [
        {"type": "rich_text_section", "elements": [
            {"type": "user", "user_id": BOT}, {"type": "text", "text": " look at "},
            {"type": "link", "url": "https://x.org", "text": "this"}, {"type": "text", "text": " & <that> "},
            {"type": "emoji", "name": "wave", "skin_tone": 2}, {"type": "channel", "channel_id": "C0DEV"},
            {"type": "text", "text": "\n"}]},
        {"type": "rich_text_list", "style": "ordered", "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": "one", "style": {"bold": True}}]},
            {"type": "rich_text_section", "elements": [{"type": "user", "user_id": "U0ANN"}]}]},
        {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "a < b"}]},
        {"type": "rich_text_quote", "elements": [{"type": "text", "text": "quoted"}]},
        {"type": "rich_text_mystery", "elements": "not a list"}, "junk"]}, {"type": "divider"}]
    event = {"type": "app_mention", "channel": "C1", "user": "U1", "text": "", "ts": "1700000000.000100",
             "blocks": blocks}
    assert to_inbound(event, bot_user_id=BOT).text == (
        "look at this (https://x.org) & <that> :wave::skin-tone-2:<#C0DEV>\n1. one\n2. <@U0ANN>\n```\na < b\n```\n"
        "> quoted")
    assert rich_text("not blocks") == rich_text([{"type": "rich_text", "elements": None}]) == ""


def test_malformed_events_never_raise():
    """Odd shapes (no channel, numbers for strings, junk blocks, a bad edit stamp) give None or a message, never
    an exception."""
    base = {"type": "app_mention", "channel": "C1", "user": "U1", "ts": "1700000000.000100"}
    odd = [{**base, "channel": None}, {**base, "text": None, "blocks": "junk"}, {**base, "ts": 17e8, "text": "x"},
           {**base, "text": ["not", "text"], "blocks": [{"type": "rich_text", "elements": [None, 3]}]},
           {**base, "text": "x", "edited": {"ts": "soon"}}, {**base, "text": "x", "edited": "yes"}, {}]
    results = [to_inbound(event, bot_user_id=BOT) for event in odd]
    assert results[0] is None and results[2].text == "x" and results[-1] is None


def test_slack_markup_reads_as_plain_text():
    """Channel links with or without a name, labelled links, entities and emoji shortcodes, as the model reads them."""
    text = f"<@{BOT}|tusk> see <#C0DEV|dev> <#C0OPS|> <https://x.org|label> &amp; &lt;b&gt; :thumbsup: <!here>"
    assert from_slack(text, BOT) == "see #dev <#C0OPS> label (https://x.org) & <b> :thumbsup: @here"


# -- through the channel -----------------------------------------------------------------------


async def test_nothing_is_answered_or_kept_for_events_that_say_nothing(settings, slack, fake_llm):
    """In a thread that keeps all chatter (/listen on), subtype events and bots are never answered nor saved."""
    s = settings()
    async with running(s, slack) as (app, _):
        top = slack.mention("/listen on", user="U0BOSS")
        await slack.send_event(top)
        await slack.wait_for(lambda: slack.posted)
        thread = {"channel": "C0GENERAL", "thread_ts": top["ts"]}
        for event in real_non_messages(slack).values():
            await slack.send_event({**event, **thread} if event.get("channel", "").startswith("C") else event)
        await slack.send_event(slack.channel_message("real chatter", user="U0CAROL", thread_ts=top["ts"]))
        await slack.wait_for(lambda: any("real chatter" in c for _, c in saved(app, f"C0GENERAL-{top['ts']}")))
        await status_answered(slack)  # after every event above: each has been kept or dropped
        await idle(app)
    contents = [c for _, c in saved(app, f"C0GENERAL-{top['ts']}")]
    assert len(slack.posted) == 1 and not fake_llm.requests and not slack.stream_calls
    assert [c for c in contents if "listen" not in c.lower()] == ["real chatter"]
    assert {p.name for p in (s.home / "chats" / "slack").iterdir()} == {f"C0GENERAL-{top['ts']}"}


async def test_a_mention_and_its_message_twin_and_retries_are_answered_once(settings, slack, fake_llm):
    """`message` + `app_mention` for one channel message, in either order, and Socket Mode redeliveries
    (retry_attempt > 0, same event_id): one answer each."""
    async with running(settings(), slack) as (app, _):
        first, second = slack.mention("first"), slack.mention("second")
        await slack.send_event(slack.as_message(first))
        await slack.send_event(first, event_id="Ev1")
        await slack.send_event(first, event_id="Ev1", retry_attempt=1, retry_reason="timeout")
        await slack.send_event(second, event_id="Ev2")
        await slack.send_event(slack.as_message(second))
        await slack.send_event(second, event_id="Ev2", retry_attempt=2, retry_reason="timeout")
        await settle(app, slack, fake_llm, 2, 2)
    assert len(fake_llm.requests) == 2 and sorted(p["thread_ts"] for p in slack.posted) == [first["ts"], second["ts"]]


async def test_mentions_of_people_reach_the_model_as_names(settings, slack, fake_llm):
    """`<@U…>` and `<@U…|name>` become @names (users.info once per person), Tusk's own mention is dropped,
    and a thread reply continues the thread's memory."""
    async with running(settings(), slack) as (app, _):
        top = slack.mention("remember the plan")
        await slack.send_event(top)
        await slack.wait_for(lambda: slack.posted)
        reply = slack.mention("ask <@U0CAROL>, <@U0BOSS|boss> and <@U0NOBODY> in <#C0DEV|dev> :tada:",
                              thread_ts=top["ts"], parent_user_id="U0ANN")
        await slack.send_event(reply)
        await settle(app, slack, fake_llm, 2, 2)
    assert last_user_text(fake_llm) == "ask @carol, @boss and @U0NOBODY in #dev :tada:"
    assert sorted(p["user"] for p in slack.calls_to("users.info")) == ["U0ANN", "U0CAROL", "U0NOBODY"]
    assert [c for r, c in saved(app, f"C0GENERAL-{top['ts']}") if r == "user"] == [
        "remember the plan", "ask @carol, @boss and @U0NOBODY in #dev :tada:"]


async def test_an_edit_is_not_answered_again_unless_it_adds_the_mention(settings, slack, fake_llm):
    """Editing an answered mention (app_mention again + message_changed) gives nothing; a thread message
    edited to add Tusk's mention is answered once; an edit long after, or in a DM, is not."""
    async with running(settings(), slack) as (app, _):
        top = slack.mention("what is 2+2?")
        await slack.send_event(top)
        await slack.wait_for(lambda: slack.posted)
        await slack.send_event(slack.edited_mention(top, f"<@{BOT}> what is 2+3?"))
        await slack.send_event(slack.edited(slack.as_message(top), f"<@{BOT}> what is 2+3?"))
        late = slack.channel_message("forgot to ask", thread_ts=top["ts"])
        await slack.send_event(late)
        await slack.send_event(slack.edited(late, f"<@{BOT}> forgot to ask"))
        added = slack.edited_mention(late, f"<@{BOT}> forgot to ask")
        await slack.send_event(added)
        await slack.send_event(added, event_id="EvAgain")
        old = slack.channel_message("old one", thread_ts=top["ts"])
        await slack.send_event(slack.edited_mention(old, f"<@{BOT}> old one", after=EDIT_WINDOW + 60))
        dm = slack.dm("hello")
        await slack.send_event(dm)
        await slack.send_event(slack.edited(dm, "hello again"))
        await settle(app, slack, fake_llm, 3, 3)
    asked = [[m["content"] for m in body["messages"] if m["role"] == "user"][-1].rsplit("\n\n", 1)[-1]
             for body in fake_llm.requests]
    assert sorted(asked) == ["forgot to ask", "hello", "what is 2+2?"] and len(slack.posted) == 3
    assert sorted(str(p.get("thread_ts")) for p in slack.posted) == sorted([top["ts"], top["ts"], "None"])
    assert [c for r, c in saved(app, f"C0GENERAL-{top['ts']}") if r == "user"] == ["what is 2+2?", "forgot to ask"]


async def test_slack_connect_and_enterprise_fields(settings, slack, fake_llm, caplog):
    """A user of another workspace in a shared channel (enterprise fields in the envelope): the allow-list
    judges the user id alone, the chat key is the channel's, and a streamed reply names the user's own team."""
    slack.add_user("U0EVE", "eve", team="T0OTHER")
    slack.add_user("U0MALLORY", "mallory", team="T0OTHER")
    s = settings(SLACK_ALLOW_FROM="U0EVE", TUSK_DM_POLICY="allowlist")
    fake_llm.script(Reply(text=LONG, token_delay=0.002))
    grid = {"enterprise_id": "E0GRID", "is_ext_shared_channel": True,
            "authorizations": [{"enterprise_id": "E0GRID", "team_id": slack.team_id, "user_id": BOT, "is_bot": True,
                                "is_enterprise_install": False}]}
    caplog.set_level(logging.INFO, logger="channels.base")
    async with running(s, slack) as (app, _):
        for user in ("U0MALLORY", "U0EVE"):
            event = slack.mention("hi from afar", user=user, channel="C0SHARED")
            await slack.send_body(slack.event_body(event, **grid))
        await slack.wait_for(lambda: any(c["method"] == "chat.stopStream" for c in slack.stream_calls))
        await slack.wait_for(lambda: "ignoring messages from U0MALLORY: not in SLACK_ALLOW_FROM" in caplog.text)
        await idle(app)
    start = slack.stream_calls[0]
    assert len(fake_llm.requests) == 1 and "from eve (id U0EVE)" in str(fake_llm.requests[0]["messages"])
    assert (start["channel"], start["thread_ts"]) == ("C0SHARED", event["ts"])
    assert (start["recipient_user_id"], start["recipient_team_id"]) == ("U0EVE", "T0OTHER")
    assert sorted(p.name for p in (s.home / "chats" / "slack").iterdir()) == [f"C0SHARED-{event['ts']}"]


async def test_a_huge_message_gets_the_length_answer(settings, slack, fake_llm):
    """A 40,000-character mention (Slack's limit) is answered with the length limit in its thread, unsaved."""
    async with running(settings(), slack) as (app, _):
        event = slack.mention("x" * 39_990)
        await slack.send_event(event)
        await slack.wait_for(lambda: slack.posted)
    assert slack.posted[0]["thread_ts"] == event["ts"] and "I can read up to 32,000" in slack.posted[0]["text"]
    assert not fake_llm.requests and [r for r, _ in saved(app, f"C0GENERAL-{event['ts']}")] == []


# -- the Web API's errors ----------------------------------------------------------------------


@pytest.mark.parametrize("error, fix", [("is_archived", "unarchive"), ("not_in_channel", "/invite"),
                                        ("channel_not_found", "/invite")])
async def test_a_place_that_refuses_every_message_is_logged_once(settings, slack, fake_llm, caplog, error, fix):
    """A streamed thread reply or a plain post to a refusing channel: one log line with the fix, the turn
    saved, and the next message elsewhere answered."""
    caplog.set_level(logging.INFO)
    fake_llm.script(Reply(text=LONG, token_delay=0.002), Reply(text="short"), Reply(text="dm answer"))
    async with running(settings(), slack) as (app, _):
        slack.refuse_channel("C0OLD", error)
        for text in ("a long one", "a short one"):
            await slack.send_event(slack.mention(text, channel="C0OLD"))
        await fake_llm.wait_for_requests(2)
        await slack.send_event(slack.dm("still there?"))
        await slack.wait_for(lambda: slack.texts("D0ANN") == ["dm answer"])
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 2 and all(error in line and fix in line for line in loud), loud
    assert not slack.calls_to("reactions.remove") or all(p["channel"] == "D0ANN"
                                                           for p in slack.calls_to("reactions.remove"))


async def test_rate_limits_are_waited_out_then_told_once(settings, slack, fake_llm, caplog):
    """429 + Retry-After on the marker and the post is retried (one reply); still limited after the retries,
    the failure is logged once, names ratelimited, and the next message is answered."""
    fake_llm.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    async with running(settings(), slack):
        slack.fail_next("reactions.add", "ratelimited", status=429, retry_after=0)
        slack.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=0)
        await slack.send_event(slack.dm("first"))
        await slack.wait_for(lambda: slack.texts() == ["one"])
        for _ in range(3):
            slack.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=0)
        await slack.send_event(slack.dm("second"))
        await fake_llm.wait_for_requests(2)
        await slack.wait_for(lambda: len(slack.calls_to("chat.postMessage")) == 5)
        await slack.send_event(slack.dm("third"))
        await slack.wait_for(lambda: slack.texts() == ["one", "three"])
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "ratelimited" in r.getMessage()]
    assert len(loud) == 1 and "rate-limited after the waits" in loud[0]
    assert len(slack.calls_to("reactions.add")) == 4


async def test_a_message_slack_finds_too_long_is_sent_in_smaller_pieces(settings, slack, fake_llm):
    """msg_too_long: the same text goes again in smaller pieces, nothing lost and nothing sent twice."""
    text = "\n\n".join(f"paragraph {i} " + "word " * 80 for i in range(6))
    async with running(settings(), slack) as (_, channel):
        slack.fail_next("chat.postMessage", "msg_too_long")
        await channel.send(OutboundMessage(ChatKey("slack", "D0ANN"), text))
    assert len(slack.posted) > 1 and " ".join(slack.texts()).split() == text.split()


async def test_http_events_retried_by_slack_are_answered_once(make_settings, slack, fake_llm):
    """HTTP mode: Slack's retries of one delivery (X-Slack-Retry-Num, same event_id) get one answer."""
    s = make_settings(SLACK_BOT_TOKEN=slack.bot_token, SLACK_SIGNING_SECRET=slack.signing_secret,
                      SLACK_API_URL=slack.api_url, SLACK_HTTP_PORT="0")
    app = TuskApp(s)
    app.add_http()
    (channel,) = app.add_platforms()
    async with app:
        url = f"http://127.0.0.1:{channel.port}/slack/events"
        body = slack.event_body(slack.dm("once over http"))
        for retry in (None, 1, 2):
            assert (await slack.deliver(url, body, retry_num=retry))[0] == 200
        assert (await slack.deliver(url, slack.event_body(slack.dm("and then?"))))[0] == 200
        await slack.wait_for(lambda: any(t.endswith("and then?") for t in slack.texts()))  # the chat's turns: in order
        await idle(app)
    assert len(slack.posted) == 2 and len(fake_llm.requests) == 2


async def test_tusks_own_messages_coming_back_are_never_answered(settings, slack, fake_llm):
    """Slack sends the bot its own posts and edits as events: a DM reply written by updates and a thread reply
    both come back (and are acknowledged), and each message still gets exactly one answer (no loop)."""
    slack.echo_own = True
    fake_llm.script(Reply(text=LONG, token_delay=0.002), Reply(text="short"))
    async with running(settings(), slack) as (app, _):
        await slack.send_event(slack.dm("write a lot"))
        await slack.wait_for(lambda: slack.texts("D0ANN") == [LONG])
        await slack.send_event(slack.mention("and here", channel="C0GENERAL"))
        await slack.wait_for(lambda: slack.texts("C0GENERAL") == ["short"])
        echoes = len(slack.posted) + len([u for u in slack.updates if u["method"] == "chat.update"])
        await slack.wait_for(lambda: len(slack.acks) == 2 + echoes)
        await status_answered(slack)  # after every echo: each has been dropped or answered
        await idle(app)
    assert len(fake_llm.requests) == 2 and len(slack.posted) == 2 and echoes > 2
