"""Streaming replies on Telegram: drafts in private chats, a message edited in place in groups."""

import pytest

from bot.stream import CUT_NOTE
from channels.telegram import stream as telegram_stream
from channels.split import FENCE
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_telegram import MAX_TEXT
from tests.legality import violations
from tests.telegram_drafts import drafting_tusks, saved, sent

WORDS = " ".join(f"word{i}" for i in range(150)) + "."
FAST = 0.25  # the draft interval in these tests (Telegram's own are 1 s and 3 s)


@pytest.fixture
async def tusk_tg(make_settings, tg, monkeypatch):
    async with drafting_tusks(make_settings, tg, monkeypatch, FAST, http=True) as start:
        yield await start()


def saved_reply(app, chat):
    return saved(app, chat)[-1].content


def gaps(times):
    return [b - a for a, b in zip(times, times[1:])]


def test_the_default_pace_is_within_telegrams_limits():
    """About a message a second in a chat, 20 a minute in a group."""
    assert telegram_stream.PRIVATE_INTERVAL >= 1.0 and telegram_stream.GROUP_INTERVAL >= 60 / 20


async def test_private_chat_streams_drafts_then_sends_the_final_message(tusk_tg, tg, fake_llm):
    """In a DM the reply grows in sendMessageDraft calls (one draft id), long before the final message,
    which is the saved reply."""
    fake_llm.script(Reply(text=f"**Here** {WORDS}", token_delay=0.01))
    tg.push_message(42, "tell me a lot")
    await tg.wait_for(lambda: tg.sent, timeout=10)
    assert len(tg.drafts) >= 3 and len({d["draft_id"] for d in tg.drafts}) == 1
    assert tg.sent[0]["at"] - tg.drafts[0]["at"] > 0.8  # the first text came long before the final one
    assert all(g >= FAST - 0.02 for g in gaps([d["at"] for d in tg.drafts]))
    assert all(len(a["plain"]) < len(b["plain"]) for a, b in zip(tg.drafts, tg.drafts[1:]))
    final = sent(tg, "sendMessage")
    assert len(final) == 1 and final[0]["text"].startswith("<b>Here</b>")
    assert saved_reply(tusk_tg, "42") == f"**Here** {WORDS}"
    assert not sent(tg, "editMessageText")


async def test_a_short_private_reply_is_one_message_without_drafts(tusk_tg, tg, fake_llm):
    """Under the threshold: no draft, one message."""
    fake_llm.script(Reply(text="Yes.", token_delay=0.01))
    tg.push_message(42, "ok?")
    await tg.wait_for(lambda: tg.sent)
    assert tg.drafts == [] and [m["plain"] for m in tg.sent] == ["Yes."]


async def test_group_reply_is_sent_then_edited_within_the_pace(tusk_tg, tg, fake_llm):
    """In a group: one message replying to the question, edited at most once per interval, ending on the
    formatted final text, which equals the saved reply."""
    fake_llm.script(Reply(text=f"**Here** {WORDS}", token_delay=0.01))
    tg.push_message(-100, "@tusk_bot tell me a lot", chat_type="supergroup")
    await tg.wait_for(lambda: any(m["method"] == "editMessageText" and m.get("parse_mode") == "HTML"
                                  for m in tg.sent), timeout=10)
    sends = sent(tg, "sendMessage")
    edits = sent(tg, "editMessageText")
    assert len(sends) == 1 and sends[0]["reply_parameters"]["message_id"] == 1
    assert len(edits) >= 2 and {e["message_id"] for e in edits} == {sends[0]["message_id"]}
    assert all(g >= FAST - 0.02 for g in gaps([m["at"] for m in sends + edits]))
    assert edits[-1]["text"].startswith("<b>Here</b>") and tg.drafts == []
    assert edits[-1]["plain"] == f"Here {WORDS}" and saved_reply(tusk_tg, "-100") == f"**Here** {WORDS}"


async def test_a_tool_step_shows_a_status_in_the_group_message(tusk_tg, tg, fake_llm):
    """While a tool runs, the group message says so; the answer replaces it."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(text=WORDS, token_delay=0.005))
    tg.push_message(-100, "@tusk_bot what time, at length", chat_type="supergroup")
    await tg.wait_for(lambda: any(m.get("parse_mode") == "HTML" for m in tg.sent), timeout=10)
    assert tg.sent[0]["plain"] == "checking the time…"
    assert tg.sent[-1]["plain"] == WORDS and {m.get("message_id") for m in tg.sent[1:]} == {tg.sent[0]["message_id"]}


async def test_tusks_own_sentence_replaces_a_tool_status_as_written(tusk_tg, tg, fake_llm):
    """A failure after a tool step: its sentence takes the group message's place as plain text, backticks kept."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "current_time", {})]), Reply(status=401, delay=0.6))
    tg.push_message(-100, "@tusk_bot what time is it?", chat_type="supergroup")
    await tg.wait_for(lambda: any("refused" in m["plain"] for m in tg.sent), timeout=10)
    assert tg.sent[0]["plain"] == "checking the time…" and [m["method"] for m in tg.sent[1:]] == ["editMessageText"]
    assert tg.sent[-1]["message_id"] == tg.sent[0]["message_id"] and tg.sent[-1].get("parse_mode") is None
    assert tg.sent[-1]["plain"] == "The model provider refused Tusk's API key; the operator can run `tusk doctor`."


async def test_a_long_group_reply_splits_within_the_limit_and_keeps_fences(tusk_tg, tg, fake_llm):
    """Past 4,096 the reply continues in a new message; every message fits, and each code block is closed."""
    code = "```python\n" + "\n".join(f"print('line {i} of a long program')" for i in range(200)) + "\n```"
    fake_llm.script(Reply(text=f"Intro.\n\n{code}\n\nDone."))
    tg.push_message(-100, "@tusk_bot code please", chat_type="supergroup")
    await tg.wait_for(lambda: any(m.get("parse_mode") == "HTML" and "Done." in m["plain"] for m in tg.sent), timeout=15)
    finals = {}
    for m in tg.sent:
        if m["method"] in ("sendMessage", "editMessageText"):
            finals[m["message_id"]] = m
    assert len(finals) >= 2 and all(len(m["plain"].encode("utf-16-le")) // 2 <= MAX_TEXT for m in finals.values())
    assert all(m.get("parse_mode") == "HTML" and m["text"].count("<pre>") == m["text"].count("</pre>")
               for m in finals.values())
    assert FENCE.search(saved_reply(tusk_tg, "-100"))


async def test_a_cut_stream_in_a_group_ends_on_the_text_and_a_note(tusk_tg, tg, fake_llm):
    """The model's connection drops mid-reply: the message ends with what came and the note; the session
    holds exactly that, and the next request is legal."""
    fake_llm.script(Reply(text=WORDS, token_delay=0.005, cut_after=80))
    tg.push_message(-100, "@tusk_bot tell me", chat_type="supergroup")
    await tg.wait_for(lambda: any(m.get("parse_mode") == "HTML" for m in tg.sent), timeout=10)
    reply = saved_reply(tusk_tg, "-100")
    assert reply.endswith(CUT_NOTE) and "word149" not in reply
    assert tg.sent[-1]["plain"].startswith("word0") and "cut off here" in tg.sent[-1]["plain"]
    tg.push_message(-100, "@tusk_bot go on", chat_type="supergroup")
    await fake_llm.wait_for_requests(2)
    assert violations(fake_llm.requests[-1]["messages"]) == []
