"""Reminders through real litellm and APScheduler: set, fire, list, cancel, restart, late, isolation."""

import json
from datetime import datetime, timedelta, timezone

import pytest

from bot.errors import ConfigError
from bot.events import ChatKey
from tests.fakes.fake_llm import Reply
from tests.legality import violations
from tests.outbox import say, started
from tests import kept
from tests.schedule_clock import Clock, clocked
from tests.settle import drained

BOB = ChatKey("http", "bob")


def setting(when, text, cid="r1"):
    return Reply(text=None, tool_calls=[(cid, "set_reminder", {"when": when, "text": text})])


def stored(app):
    path = app.settings.home / "reminders.json"
    return json.loads(path.read_text())["reminders"] if path.exists() else []


def reminder_requests(fake_llm):
    return [b for b in fake_llm.requests if "A reminder set in this chat is due now" in str(b["messages"][-1])]


async def test_a_reminder_fires_as_a_turn_of_its_chat(make_settings, fake_llm):
    """A reminder due in 0.5 s runs a turn for its chat with the reminder injected; the reply goes to that chat."""
    clock = Clock(datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc))  # stands still until the test moves it
    fake_llm.script(setting("in 0.5 seconds", "call Bob"), Reply(text="I'll remind you."))
    async with clocked(make_settings, clock) as (app, box):
        assert await say(app, box, "bob", "remind me in a second to call Bob") == ["I'll remind you."]
        assert "set for" in fake_llm.requests[1]["messages"][-1]["content"] and len(stored(app)) == 1
        clock.set(datetime(2026, 5, 4, 9, 0, 1, tzinfo=timezone.utc))  # APScheduler's next wake-up finds it due
        texts = await box.wait_for("bob", 2, timeout=4)
    fired = reminder_requests(fake_llm)
    assert len(fired) == 1 and not violations(fired[0]["messages"])
    assert "call Bob" in texts[1] and "late" not in texts[1]  # the fake echoes what the model was given
    saved = kept.on_disk(app, "http", "bob").unconsolidated
    assert saved[-2].role == "user" and saved[-2].content.startswith("[reminder r") and "call Bob" in saved[-2].content
    assert "due now" not in saved[-2].content  # the injected context was for that turn only
    assert (saved[-2].sender_id, saved[-2].sender_name) == ("u1", "Ann") == (saved[0].sender_id, saved[0].sender_name)
    assert stored(app) == []


async def test_reminder_survives_a_restart_and_fires_once_marked_late(make_settings, fake_llm):
    """Set, stop before it is due, start a new Tusk on the same home after: it fires once and says it is late."""
    clock = Clock(datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc))
    fake_llm.script(setting("in 2 hours", "call Bob"), Reply(text="ok"))
    async with clocked(make_settings, clock) as (app, box):
        await say(app, box, "bob", "remind me in two hours to call Bob")
    assert len(stored(app)) == 1
    clock.set(datetime(2026, 5, 4, 11, 30, tzinfo=timezone.utc))
    async with clocked(make_settings, clock) as (app2, box2):
        texts = await box2.wait_for("bob", 1, timeout=4)  # the start's first tick runs it
        assert await app2.schedules.tick() == 0  # a tick after it starts nothing more
        await drained(app2, BOB)  # and every turn the ticks started has ended
        assert len(box2.to("bob")) == 1
    assert "call Bob" in texts[0] and "It comes late" in texts[0] and len(reminder_requests(fake_llm)) == 1
    assert stored(app2) == []
    async with clocked(make_settings, clock) as (app3, box3):
        assert await app3.schedules.tick() == 0
        await drained(app3, BOB)
    assert box3.sent == [] and len(reminder_requests(fake_llm)) == 1


async def test_missed_reminders_fire_late_within_the_grace_period_and_are_dropped_after(make_settings, fake_llm):
    """A reminder due an hour ago fires marked late; one due two days ago (grace 24 h) is dropped."""
    home = make_settings().home
    (home / "chats/http/down").mkdir(parents=True)  # the chat that set them (a forgotten chat's reminders never fire)
    now = datetime.now(timezone.utc)

    def record(rid, ago, text):
        return {"id": rid, "channel": "http", "chat_id": "down", "due": (now - ago).isoformat(), "timezone": "UTC",
                "text": text, "created": (now - timedelta(days=3)).isoformat()}

    (home / "reminders.json").write_text(json.dumps({"schema": 1, "reminders": [
        record("rold", timedelta(days=2), "stale thing"), record("rhour", timedelta(hours=1), "water plants")]}))
    async with started(make_settings) as (app, box):
        await box.wait_for("down", 1)  # the start's first tick took both: one ran, one was dropped
        await drained(app, ChatKey("http", "down"))  # a turn of the stale one would have ended too
        texts = box.to("down")
    assert len(texts) == 1 and "water plants" in texts[0] and "It comes late, 1 h after its time" in texts[0]
    assert "stale thing" not in str(fake_llm.requests) and stored(app) == []


async def test_a_chat_sees_and_cancels_only_its_own_reminders(make_settings, fake_llm):
    """Chat B cannot list or cancel chat A's reminder, by tool or by /reminders; A can."""
    fake_llm.script(setting("in 2 hours", "feed the cat"), Reply(text="ok"))
    async with started(make_settings) as (app, box):
        await say(app, box, "a", "remind me")
        rid = stored(app)[0]["id"]
        fake_llm.script(Reply(text=None, tool_calls=[("l", "list_reminders", {}),
                                                     ("c", "cancel_reminder", {"id": rid})]), Reply(text="no"))
        await say(app, box, "b", "cancel it")
        listed, cancelled = (m["content"] for m in fake_llm.requests[-1]["messages"][-2:])
        assert listed == "No reminders are set in this chat."
        assert cancelled.startswith(f"Error: ValueError: there is no reminder '{rid}' in this chat")
        assert (await say(app, box, "b", "/reminders"))[0] == "No reminders are set in this chat."
        assert "no reminder" in (await say(app, box, "b", f"/reminders cancel {rid}"))[0] and len(stored(app)) == 1
        assert f"{rid}: " in (await say(app, box, "a", "/reminders"))[0] and "feed the cat" in box.to("a")[-1]
        fake_llm.script(Reply(text=None, tool_calls=[("c", "cancel_reminder", {"id": rid})]), Reply(text="done"))
        await say(app, box, "a", "cancel it")
        assert fake_llm.requests[-1]["messages"][-1]["content"].startswith(f"Cancelled reminder {rid}")
        assert stored(app) == []


async def test_times_use_the_chat_time_zone(make_settings, fake_llm):
    """/timezone sets the chat's zone: the context line shows it and naive ISO times are read in it."""
    async with started(make_settings, TUSK_TIMEZONE="America/New_York") as (app, box):
        assert "America/New_York (the default)" in (await say(app, box, "tz", "/timezone"))[0]
        assert "not a time zone I know" in (await say(app, box, "tz", "/timezone Mars/Base"))[0]
        assert "now Europe/Berlin" in (await say(app, box, "tz", "/timezone Europe/Berlin"))[0]
        fake_llm.script(setting("2030-01-15T09:00", "dentist"), Reply(text="ok"))
        await say(app, box, "tz", "remind me on 15 January 2030 at 9 about the dentist")
        assert "Europe/Berlin, " in fake_llm.requests[0]["messages"][-1]["content"].split("]")[0]
        assert stored(app)[0]["due"] == "2030-01-15T09:00:00+01:00" and stored(app)[0]["timezone"] == "Europe/Berlin"
        assert "Tue 2030-01-15 09:00 Europe/Berlin — dentist" in (await say(app, box, "tz", "/reminders"))[0]
        assert "America/New_York" in (await say(app, box, "tz", "/timezone reset"))[0]
        assert "Tue 2030-01-15 03:00 America/New_York" in (await say(app, box, "tz", "/reminders"))[0]


async def test_forget_lists_and_cancels_the_chats_reminders_and_settings(make_settings, fake_llm):
    """/forget lists the chat's reminders and settings.json; confirming cancels and deletes them."""
    fake_llm.script(setting("in 3 hours", "stretch"), Reply(text="ok"))
    async with started(make_settings) as (app, box):
        await say(app, box, "f", "/timezone Asia/Tokyo")
        await say(app, box, "f", "remind me to stretch")
        files = kept.files(app, "http", "f")
        listing = (await say(app, box, "f", "/forget"))[0]
        assert "1 reminder or schedule (cancelled" in listing and "settings.json: time zone Asia/Tokyo" in listing
        report = (await say(app, box, "f", "/forget confirm"))[0]
        assert "deleted 1 reminder or schedule (cancelled" in report and "FAILED" not in report
        assert stored(app) == [] and not files.dir.exists()
        assert (await say(app, box, "f", "/reminders"))[0] == "No reminders are set in this chat."


async def test_a_due_reminder_reaches_the_chat_even_when_the_model_is_down(make_settings, fake_llm):
    """If the model cannot be reached when a reminder fires, Tusk sends the reminder text itself."""
    fake_llm.script(setting("in 0.5 seconds", "take the pills"), Reply(text="ok"), Reply(status=500))
    async with started(make_settings) as (app, box):
        await say(app, box, "down", "remind me")
        texts = await box.wait_for("down", 2, timeout=4)
    assert texts[1] == "Reminder: take the pills"
    assert [m.role for m in kept.on_disk(app, "http", "down").unconsolidated][-2:] == ["user", "assistant"]


async def test_past_times_and_too_many_reminders_are_refused(make_settings, fake_llm):
    """A time in the past, or one reminder over TUSK_MAX_REMINDERS, is an error the model can explain."""
    fake_llm.script(setting("2001-01-01T09:00", "old"), setting("in 1 hour", "one", "c2"),
                    setting("in 2 hours", "two", "c3"), Reply(text="ok"))
    async with started(make_settings, TUSK_MAX_REMINDERS=1) as (app, box):
        await say(app, box, "m", "remind me")
    results = [b["messages"][-1]["content"] for b in fake_llm.requests[1:]]
    assert "is in the past (it is now" in results[0] and results[1].startswith("Reminder r")
    assert "already has 1 reminders" in results[2] and len(stored(app)) == 1


async def test_a_due_reminder_waits_for_the_chats_running_turn(make_settings, fake_llm):
    """A reminder goes through the bus: due during a slow turn of its chat, it runs right after that turn."""
    fake_llm.script(setting("in 0.5 seconds", "stand up"), Reply(text="ok"), Reply(text="slow answer", delay=1.0))
    async with started(make_settings) as (app, box):
        await say(app, box, "order", "remind me")
        assert await say(app, box, "order", "a slow question") == ["slow answer"]
        texts = await box.wait_for("order", 3)
    assert "stand up" in texts[2]
    fired = reminder_requests(fake_llm)[0]["messages"]
    assert [m.get("content") for m in fired if m["role"] == "assistant"][-1] == "slow answer" and not violations(fired)


def test_a_bad_default_time_zone_stops_tusk_at_start(make_settings):
    """TUSK_TIMEZONE must be an IANA zone: a typo is a ConfigError naming the variable and the fix."""
    with pytest.raises(ConfigError, match="TUSK_TIMEZONE: .*'Europe/Berln' is not a time zone I know: use an IANA"):
        make_settings(TUSK_TIMEZONE="Europe/Berln")


async def test_forget_from_the_cli_removes_reminders_and_a_running_bot_drops_them(make_settings, fake_llm):
    """`tusk forget` lists and removes a chat's saved reminders; one still held by a running bot never fires."""
    from bot.ops import admin
    from bot.events import ChatKey
    from store import open_files

    clock = Clock(datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc))
    fake_llm.script(setting("in 2 hours", "call Bob"), Reply(text="ok"))
    async with clocked(make_settings, clock) as (app, box):
        await say(app, box, "eve", "remind me soon to call Bob")
        key = ChatKey("http", "eve")
        chats = open_files(app.settings.home).chats  # the CLI's own store over the same home
        assert "1 reminder or schedule (removed" in await admin.forget(chats, app.settings.home, key, confirm=False)
        report = await admin.forget(chats, app.settings.home, key, confirm=True)
        assert "deleted 1 reminder or schedule (removed from reminders.json)" in report and stored(app) == []
        clock.set(datetime(2026, 5, 4, 12, 0, tzinfo=timezone.utc))  # past its time
        assert await app.schedules.tick() == 0  # the running bot's tick starts nothing
        await drained(app, key)
    assert reminder_requests(fake_llm) == [] and box.to("eve") == ["ok"]
