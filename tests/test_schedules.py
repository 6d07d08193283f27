"""Repeating schedules through real litellm and the bus, on a clock the tests drive: set by the model,
run as turns of their chat, through a restart and daylight-saving changes, failures said once, limits,
pause, resume, cancel, the most a chat may have, and reminders.json's schema."""

import functools
import json
from datetime import timedelta, timezone

import pytest

from bot.events import ChatKey
from bot.ops import doctor
from bot.usage.ledger import Ledger
from tests.fakes.fake_llm import Reply
from tests.outbox import say
from tests.schedule_clock import Clock, berlin, clocked, only, outcome, scheduling
from tests import kept
from tests.test_inbox import where  # noqa: F401  (a fixture: files, or a fresh database)

UTC = timezone.utc


def stored(app):
    return json.loads((app.settings.home / "reminders.json").read_text())


def lose_the_journal(app, where):
    """The inbox journal emptied behind Tusk's back: inbox.jsonl deleted, or the database's rows."""
    if not where:
        (app.settings.home / "inbox.jsonl").unlink()
        return
    import psycopg

    with psycopg.connect(where["TUSK_DATABASE_URL"]) as conn:
        assert conn.execute("DELETE FROM inbox").rowcount == 1


def purposes(home):
    ledger = Ledger(home)
    try:
        return [r[0] for r in ledger._rows("SELECT purpose FROM calls ORDER BY id", [])]
    finally:
        ledger.close()


async def test_every_weekday_at_8_tell_me_whats_due(make_settings, fake_llm):
    """The model sets "every weekday at 8" as an instruction: it runs Monday to Friday at 08:00 Berlin (not at the
    weekend) as a model turn with the request, each reply reaches the chat, each run is recorded delivered and
    metered as `schedule`; /reminders shows the rule, the next run and the last one."""
    clock = Clock(berlin(2026, 3, 27, 9, 0))  # a Friday
    fake_llm.script(scheduling("tell me what's due", repeat="every weekday at 8", kind="instruction"), Reply(text="Set."))
    async with clocked(make_settings, clock) as (app, box):
        await say(app, box, "w", "/timezone Europe/Berlin")
        assert await say(app, box, "w", "every weekday at 8 tell me what's due") == ["Set."]
        result = fake_llm.requests[1]["messages"][-1]["content"]
        assert result.startswith("Schedule s") and ("every weekday at 08:00 (Europe/Berlin), first run "
                                                    "Mon 2026-03-30 08:00 Europe/Berlin") in result
        s = only(app, "w")
        for day in (28, 29):  # Saturday, Sunday
            clock.set(berlin(2026, 3, day, 8, 0))
            assert await app.schedules.tick() == 0
        fake_llm.responder = lambda body: Reply(text=f"Due: the tax return ({len(fake_llm.requests)})")
        for day in (30, 31, 1):  # Monday, Tuesday, Wednesday
            due = berlin(2026, 3 if day > 1 else 4, day, 8, 0)
            clock.set(due)
            assert await app.schedules.tick() == 1
            assert (await outcome(app, s.id, due)).status == "delivered"
        runs = [b for b in fake_llm.requests if "The request: tell me what's due" in str(b["messages"][-1])]
        assert len(runs) == 3 and all(b.get("tools") for b in runs)  # a turn like any, tools and all
        assert [t for t in box.to("w") if t.startswith("Due: the tax return")] == [
            f"Due: the tax return ({n})" for n in (3, 4, 5)]
        listing = (await say(app, box, "w", "/reminders"))[0]
        assert (f"{s.id}: every weekday at 08:00, next Thu 2026-04-02 08:00 Europe/Berlin — instruction: tell me "
                "what's due (set by Ann, id u1)") in listing and "last run Wed 2026-04-01 08:00 Europe/Berlin: delivered" in listing
    assert purposes(app.settings.home).count("schedule") == 3


async def test_a_text_schedule_is_sent_as_written_without_the_model(make_settings, fake_llm):
    """kind text: each run sends the text as it is; no model request is made; the session keeps the run's note."""
    clock = Clock(berlin(2026, 5, 4, 12, 0))
    fake_llm.script(scheduling("Time to stretch! 🧘", repeat="every 2 hours"), Reply(text="ok"))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "t", "remind me to stretch every 2 hours")
        s = only(app, "t")
        assert s.due == berlin(2026, 5, 4, 14, 0)
        asked = len(fake_llm.requests)
        for hour in (14, 16):
            clock.set(berlin(2026, 5, 4, hour, 0))
            assert await app.schedules.tick() == 1
            await outcome(app, s.id, berlin(2026, 5, 4, hour, 0))
        assert box.to("t")[-2:] == ["Time to stretch! 🧘", "Time to stretch! 🧘"] and len(fake_llm.requests) == asked
        saved = kept.on_disk(app, "http", "t").unconsolidated[-2:]
        assert saved[0].content.startswith(f"[schedule {s.id}, every 2 hours, due ") and saved[1].content == "Time to stretch! 🧘"


async def test_a_schedule_survives_a_restart_with_one_catch_up_and_no_burst(make_settings, fake_llm, where):
    """Down from Monday to Thursday 09:00: the new Tusk runs the daily 08:00 schedule once, for Thursday, saying
    it is late; the three runs before are recorded as missed (older than the 24 h grace); nothing more fires,
    then or at the next start (kept in reminders.json, or in a database)."""
    make_settings = functools.partial(make_settings, **where)
    clock = Clock(berlin(2026, 3, 23, 7, 0))
    fake_llm.script(scheduling("water the plants", repeat="every day at 08:00"), Reply(text="ok"))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "r", "water the plants daily at 8")
    sid = only(app, "r").id
    clock.set(berlin(2026, 3, 26, 9, 0))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app2, box2):
        run = await outcome(app2, sid, berlin(2026, 3, 26, 8, 0))  # the scheduler's own wake-up ran it
        assert await app2.schedules.tick() == 0  # nothing else is due: no burst
        s = only(app2, "r")
    assert box2.to("r") == ["water the plants\n(This was due Thu 2026-03-26 08:00 Europe/Berlin; Tusk was not "
                            "running then.)"]
    assert run.late and s.due == berlin(2026, 3, 27, 8, 0)
    missed, done = s.runs[-2:]
    assert (missed.status, missed.count, missed.due) == ("missed", 3, berlin(2026, 3, 23, 8, 0))
    assert done.status == "delivered"
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app3, box3):
        assert await app3.schedules.tick() == 0
    assert box3.sent == []


async def test_runs_older_than_the_grace_are_recorded_missed_and_none_fires(make_settings, fake_llm):
    """With TUSK_REMINDER_GRACE=60 minutes, a start two hours after the last run time fires nothing."""
    clock = Clock(berlin(2026, 3, 23, 7, 0))
    fake_llm.script(scheduling("stand up", repeat="every day at 08:00"), Reply(text="ok"))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "g", "daily at 8")
    clock.set(berlin(2026, 3, 24, 10, 0))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin", TUSK_REMINDER_GRACE=60) as (app2, box2):
        assert await app2.schedules.tick() == 0
        s = only(app2, "g")
        assert s.due == berlin(2026, 3, 25, 8, 0)
    assert box2.sent == [] and [(r.status, r.count) for r in s.runs] == [("missed", 2)]


DST_NIGHTS = {  # Europe/Berlin: the nights a daily 02:30 schedule runs, in UTC and on the wall clock
    3: [("2026-03-28T01:30:00+00:00", "28 02:30"), ("2026-03-29T01:30:00+00:00", "29 03:30"),
        ("2026-03-30T00:30:00+00:00", "30 02:30"), ("2026-03-31T00:30:00+00:00", "31 02:30")],
    10: [("2026-10-24T00:30:00+00:00", "24 02:30"), ("2026-10-25T00:30:00+00:00", "25 02:30"),
         ("2026-10-26T01:30:00+00:00", "26 02:30"), ("2026-10-27T01:30:00+00:00", "27 02:30")]}


@pytest.mark.parametrize("month", [3, 10])
async def test_a_daily_0230_schedule_runs_once_a_day_across_a_dst_change(make_settings, fake_llm, month):
    """Europe/Berlin, every day at 02:30: on 2026-03-29 (02:30 does not exist) it runs once, at 03:30; on
    2026-10-25 (02:30 happens twice) it runs once, the first time (the second 02:30 starts nothing); every other
    day at 02:30."""
    clock = Clock(berlin(2026, month, 27 if month == 3 else 23, 12, 0))
    fake_llm.script(scheduling("take the pill", repeat="every day at 02:30"), Reply(text="ok"))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "dst", "every night at 2:30")
        s = only(app, "dst")
        fired = []
        for _ in range(4):
            due = app.schedules.get(s.id).due
            clock.set(due)
            assert await app.schedules.tick() == 1
            await outcome(app, s.id, due)
            fired.append(due)
            if due == berlin(2026, 10, 25, 2, 30):  # the second 02:30 of that night, an hour later
                clock.set(due.astimezone(UTC) + timedelta(hours=1))
                assert await app.schedules.tick() == 0
        assert box.to("dst")[1:] == ["take the pill"] * 4
    assert [(d.astimezone(UTC).isoformat(), d.strftime("%d %H:%M")) for d in fired] == DST_NIGHTS[month]


@pytest.mark.both_stores
async def test_a_failing_model_is_said_once_and_the_next_run_tries_again(make_settings, fake_llm):
    """An instruction run whose model call fails: the chat is told once (why, and when it runs again), a second
    failing run says nothing, the third succeeds and is delivered; every run is recorded with its outcome, and
    `tusk doctor` names the schedule while its last run failed (from the store the settings name)."""
    clock = Clock(berlin(2026, 6, 1, 7, 0))
    fake_llm.script(scheduling("summarise the news", repeat="every day at 09:00", kind="instruction"),
                    Reply(text="ok"), Reply(status=500), Reply(status=500), Reply(text="The news: calm."))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "f", "news every morning")
        s = only(app, "f")
        outcomes = []
        for day in (1, 2):
            clock.set(berlin(2026, 6, day, 9, 0))
            assert await app.schedules.tick() == 1
            outcomes.append(await outcome(app, s.id, berlin(2026, 6, day, 9, 0)))
        assert box.to("f")[1:] == [f"Schedule {s.id} (every day at 09:00: summarise the news) could not run at 09:00: "
                                   "The model is unavailable right now, try again in a minute. It runs again "
                                   "Tue 2026-06-02 09:00 Europe/Berlin."]  # the second failure said nothing
        assert [(r.status, r.why) for r in outcomes] == [("failed", "The model is unavailable right now, try again "
                                                          "in a minute.")] * 2
        details = (await say(app, box, "f", f"/reminders {s.id}"))[0]
        assert details.count("failed (The model is unavailable") == 2
    checks = {c.name: c for c in await doctor.run_checks(make_settings(TUSK_TIMEZONE="Europe/Berlin"), model=False)}
    assert checks["schedules"].verdict == "warn" and f"{s.id} (http:f, every day at 09:00)" in checks["schedules"].detail
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        clock.set(berlin(2026, 6, 3, 9, 0))
        assert await app.schedules.tick() == 1
        assert (await outcome(app, s.id, berlin(2026, 6, 3, 9, 0))).status == "delivered"
        assert box.to("f") == ["The news: calm."]
    checks = {c.name: c for c in await doctor.run_checks(make_settings(), model=False)}
    assert checks["schedules"].verdict == "ok"


async def test_a_spend_limit_stops_a_schedule_with_its_sentence_once(make_settings, fake_llm):
    """A chat at its limit: the schedule's run is refused before any request, the chat gets the limit's sentence
    once, a second refused run says nothing; both are recorded failed with that sentence."""
    clock = Clock(berlin(2026, 6, 1, 7, 0))
    fake_llm.script(scheduling("brief me", repeat="every day at 09:00", kind="instruction"), Reply(text="ok"))
    async with clocked(make_settings, clock, TUSK_MODELS="fake=openai/fake-model@1000/2000",
                       TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "lim", "brief me daily")
        s = only(app, "lim")
        app.limits.set_override(ChatKey("http", "lim"), 0.0)  # `tusk budget`: this chat may spend nothing
        asked = len(fake_llm.requests)
        for day in (1, 2):
            clock.set(berlin(2026, 6, day, 9, 0))
            assert await app.schedules.tick() == 1
            run = await outcome(app, s.id, berlin(2026, 6, day, 9, 0))
            assert run.status == "failed" and run.why.startswith("This chat has reached its daily spending limit ($0.00)")
        assert len(fake_llm.requests) == asked
        told = box.to("lim")[1:]
        assert len(told) == 1 and "This chat has reached its daily spending limit ($0.00)" in told[0]


async def test_pause_resume_and_cancel(make_settings, fake_llm):
    """/reminders pause stops the runs (times passed while paused are not made up), resume runs it again from
    its next time, cancel removes it; another chat can do none of it."""
    clock = Clock(berlin(2026, 3, 2, 7, 0))
    fake_llm.script(scheduling("drink water", repeat="every hour"), Reply(text="ok"))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "p", "hourly water")
        s = only(app, "p")
        assert "no reminder" in (await say(app, box, "other", f"/reminders pause {s.id}"))[0]
        assert (await say(app, box, "p", f"/reminders pause {s.id}"))[0].startswith(f"Paused {s.id} (every hour)")
        assert "every hour, paused — text: drink water" in (await say(app, box, "p", "/reminders"))[0]
        clock.set(berlin(2026, 3, 2, 11, 0))
        assert await app.schedules.tick() == 0
        resumed = (await say(app, box, "p", f"/reminders resume {s.id}"))[0]
        assert resumed == f"Resumed {s.id}: every hour, next Mon 2026-03-02 12:00 Europe/Berlin — drink water"
        clock.set(berlin(2026, 3, 2, 12, 0))
        assert await app.schedules.tick() == 1
        await outcome(app, s.id, berlin(2026, 3, 2, 12, 0))
        assert (await say(app, box, "p", f"/reminders cancel {s.id}"))[0].startswith(f"Cancelled {s.id}")
        assert stored(app)["reminders"] == [] and app.schedules.next_due() is None
    assert box.to("p").count("drink water") == 1


async def test_a_chat_has_at_most_max_reminders_of_both_kinds(make_settings, fake_llm):
    """TUSK_MAX_REMINDERS=2 counts one-time reminders and schedules together: the third of either is refused."""
    clock = Clock(berlin(2026, 3, 2, 7, 0))
    fake_llm.script(scheduling("once", when="in 1 hour"), scheduling("daily", repeat="every day at 09:00", cid="c2"),
                    scheduling("another", repeat="every day at 10:00", cid="c3"), scheduling("later", when="in 2 hours",
                                                                                             cid="c4"),
                    Reply(text="ok"))
    async with clocked(make_settings, clock, TUSK_MAX_REMINDERS=2) as (app, box):
        await say(app, box, "m", "set them")
        results = [b["messages"][-1]["content"] for b in fake_llm.requests[1:]]
        assert results[0].startswith("Reminder r") and results[1].startswith("Schedule s")
        assert all("already has 2 reminders, the most it may have" in r for r in results[2:4])
        assert len(app.schedules.of(ChatKey("http", "m"))) == 2


async def test_bad_rules_are_refused_with_the_forms_that_work(make_settings, fake_llm):
    """A rule Tusk cannot read, one more often than every 5 minutes, or both when and repeat: errors the model can
    act on; nothing is kept."""
    fake_llm.script(scheduling("x", repeat="whenever it rains"), scheduling("x", repeat="every minute", cid="c2"),
                    Reply(text=None, tool_calls=[("c3", "set_reminder", {"text": "x", "when": "in 1 hour",
                                                                         "repeat": "every day at 9"})]),
                    Reply(text="ok"))
    async with clocked(make_settings, Clock(berlin(2026, 3, 2, 7, 0))) as (app, box):
        await say(app, box, "bad", "set them")
        results = [b["messages"][-1]["content"] for b in fake_llm.requests[1:]]
        assert "is not a repeat rule Tusk reads: use every 30 minutes" in results[0]
        assert "would run more often than every 5 minutes" in results[1]
        assert "give either when (once) or repeat (repeating), not both or neither" in results[2]
        assert app.schedules.of(ChatKey("http", "bad")) == []


async def test_reminders_json_is_schema_2_one_schedule_a_line_and_schema_1_is_migrated(make_settings, fake_llm):
    """A schema-1 file (one-time reminders) is read and written back as schema 2, one schedule a line, its reminder
    kept (kind reminder, due and zone as they were); a repeating schedule is saved with its rule and runs."""
    home = make_settings().home
    home.mkdir(parents=True)
    (home / "chats/http/old").mkdir(parents=True)
    (home / "reminders.json").write_text(json.dumps({"schema": 1, "reminders": [
        {"id": "rabc123", "channel": "http", "chat_id": "old", "due": "2030-01-15T09:00:00+01:00",
         "timezone": "Europe/Berlin", "text": "dentist", "created": "2026-03-01T10:00:00+01:00",
         "set_by": {"id": "u1", "name": "Ann"}}]}))
    clock = Clock(berlin(2026, 3, 2, 7, 0))
    fake_llm.script(scheduling("stretch", repeat="every weekday at 10:00"), Reply(text="ok"))
    async with clocked(make_settings, clock) as (app, box):
        data = stored(app)
        assert data["schema"] == 2 and data["reminders"][0] == {
            "id": "rabc123", "channel": "http", "chat_id": "old", "kind": "reminder", "text": "dentist",
            "timezone": "Europe/Berlin", "due": "2030-01-15T09:00:00+01:00", "paused": False,
            "created": "2026-03-01T10:00:00+01:00", "set_by": {"id": "u1", "name": "Ann"}, "runs": []}
        await say(app, box, "new", "stretch on weekdays")
    text = (app.settings.home / "reminders.json").read_text()
    lines = text.splitlines()
    assert lines[0] == '{"schema": 2, "reminders": [' and lines[-1] == "]}" and len(lines) == 4
    rec = json.loads(lines[2])
    assert (rec["kind"], rec["rule"], rec["timezone"], rec["due"]) == ("text", "every weekday at 10:00", "UTC",
                                                                       "2026-03-02T10:00:00+00:00")


async def test_forget_removes_the_chats_schedules(make_settings, fake_llm):
    """/forget lists the chat's schedules with its reminders and confirming removes them from reminders.json."""
    fake_llm.script(scheduling("stretch", repeat="every day at 10:00"), Reply(text="ok"))
    async with clocked(make_settings, Clock(berlin(2026, 3, 2, 7, 0))) as (app, box):
        await say(app, box, "fg", "stretch daily")
        assert "1 reminder or schedule (cancelled" in (await say(app, box, "fg", "/forget"))[0]
        assert "deleted 1 reminder or schedule" in (await say(app, box, "fg", "/forget confirm"))[0]
        assert stored(app)["reminders"] == [] and app.schedules.next_due() is None


async def test_a_run_cut_short_is_run_again_from_the_inbox_or_recorded_as_cut(make_settings, fake_llm, where):
    """A run's turn cut short (as a crash or forced stop leaves it): the next start runs it again from the inbox
    journal and records it delivered; with no journal record left, the run is recorded as failed, not left open
    (on files, and on a database)."""
    clock = Clock(berlin(2026, 6, 1, 7, 0))
    env = {"TUSK_TIMEZONE": "Europe/Berlin", **where}
    fake_llm.script(scheduling("brief me", repeat="every day at 09:00", kind="instruction"), Reply(text="ok"),
                    Reply(text="too late", delay=30))
    async with clocked(make_settings, clock, **env) as (app, box):
        await say(app, box, "cut", "brief me daily")
        s = only(app, "cut")
        clock.set(berlin(2026, 6, 1, 9, 0))
        asked = len(fake_llm.requests)
        assert await app.schedules.tick() == 1
        await fake_llm.wait_for_requests(asked + 1)  # the run's model call is under way
        assert app.bus.cancel(ChatKey("http", "cut"))  # cut short, as a crash would
    assert only(app, "cut").runs[-1].status == "fired"
    fake_llm.script(Reply(text="Here is your brief."))
    async with clocked(make_settings, clock, **env) as (app2, box2):
        assert (await outcome(app2, s.id, berlin(2026, 6, 1, 9, 0))).status == "delivered"
    assert box2.to("cut") == ["Here is your brief."]
    clock.set(berlin(2026, 6, 2, 9, 0))
    fake_llm.script(Reply(text="too late", delay=30))
    async with clocked(make_settings, clock, **env) as (app3, box3):
        asked = len(fake_llm.requests)
        assert await app3.schedules.tick() == 1
        await fake_llm.wait_for_requests(asked + 1)
        assert app3.bus.cancel(ChatKey("http", "cut"))
    lose_the_journal(app3, where)  # the journal's record lost too
    async with clocked(make_settings, clock, **env) as (app4, box4):
        run = only(app4, "cut").run_for(berlin(2026, 6, 2, 9, 0))
    assert (run.status, run.why) == ("failed", "Tusk stopped before it was delivered") and box4.sent == []
