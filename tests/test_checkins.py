"""Check-ins through real litellm on a driven clock: off by default, admins only in groups, open items kept by
consolidation in MEMORY.md (shown and forgotten like any fact), asked once the day after at a sensible hour
without tools, at most TUSK_CHECKINS_DAILY a day, never twice (across a restart too)."""

from bot.events import ChatKey, InboundMessage
from bot.usage.ledger import Ledger
from memory import files as memfiles
from memory import open_items
from memory.consolidate import parse_summary
from tests.fakes.fake_llm import Reply
from tests.outbox import say
from tests.schedule_clock import Clock, berlin, clocked, outcome
from tests import kept

ITEMS = "## Open items\n- 2026-03-27: Ann's job interview\n- 2026-03-27: Bob returns the drill\n"


def consolidating(memory: str) -> Reply:
    return Reply(text=None, tool_calls=[("s", "save_memory", {"history_entry": "[2026-03-26] Plans were made.",
                                                              "memory_update": memory})])


def consolidation_prompts(fake_llm):
    return [b["messages"][0]["content"] for b in fake_llm.requests
            if any(t["function"]["name"] == "save_memory" for t in b.get("tools") or [])]


def checkin_requests(fake_llm):
    return [b for b in fake_llm.requests if "Tusk checks in on something" in str(b["messages"][-1])]


async def test_checkins_are_off_by_default_and_only_group_admins_switch_them(make_settings, fake_llm):
    """/checkins says off; in a group a member who is no admin cannot turn it on, an admin can."""
    async with clocked(make_settings, Clock(berlin(2026, 3, 26, 15, 0))) as (app, box):
        assert (await say(app, box, "dm", "/checkins"))[0].startswith("Check-ins: off (/checkins on to start).")

        async def group(text, admin):
            msg = InboundMessage(ChatKey("http", "grp"), text, sender_id="m1", sender_name="Mo", is_group=True,
                                 sender_is_admin=admin)
            await app.bus.publish(msg)
            return [m.text for m in box.sent if m.reply_to == msg.id][0]

        assert await group("/checkins on", admin=False) == "In a group, only its administrators can switch check-ins."
        assert (await group("/checkins on", admin=True)).startswith("Check-ins: on.")
        assert (await group("/checkins", admin=False)).startswith("Check-ins: on.")


async def test_open_items_are_asked_once_the_day_after_without_tools(make_settings, fake_llm):
    """With check-ins on, consolidation is asked for dated open items; the two it keeps show in /memory; the day
    after their date nothing is asked before 10:00, then one check-in a day (TUSK_CHECKINS_DAILY=1) as a model
    turn without tools, metered as `checkin`; the next day the other; after a restart neither is asked again."""
    clock = Clock(berlin(2026, 3, 26, 15, 0))
    env = {"TUSK_TIMEZONE": "Europe/Berlin", "TUSK_CHECKINS_DAILY": 1}
    async with clocked(make_settings, clock, **env) as (app, box):
        await say(app, box, "off", "hello")
        fake_llm.script(consolidating("- Eve likes tea\n"))
        await say(app, box, "off", "/new")
        await say(app, box, "ci", "/checkins on")
        await say(app, box, "ci", "my interview is tomorrow, and Bob brings the drill back")
        fake_llm.script(consolidating("- Ann looks for a job\n\n" + ITEMS))
        await say(app, box, "ci", "/new")
        without, with_items = consolidation_prompts(fake_llm)
        assert "## Open items" not in without and "keep a `## Open items` section" in with_items
        assert ITEMS in (await say(app, box, "ci", "/memory"))[0]
        assert await app.checkins.sweep() == 2
        status = (await say(app, box, "ci", "/checkins"))[0]
        assert "Open items in memory: 2." in status and "Sat 2026-03-28 10:00 Europe/Berlin — 2026-03-27: Ann's job interview" in status
        clock.set(berlin(2026, 3, 28, 9, 59))
        assert await app.schedules.tick() == 0
        clock.set(berlin(2026, 3, 28, 10, 0))
        assert await app.schedules.tick() == 1  # the other waits: one a day
        first = next(s for s in app.schedules.of(ChatKey("http", "ci"), checkins=True) if s.runs)
        assert (await outcome(app, first.id, berlin(2026, 3, 28, 10, 0))).status == "delivered"
        clock.set(berlin(2026, 3, 29, 10, 0))
        assert await app.schedules.tick() == 1
        second = next(s for s in app.schedules.of(ChatKey("http", "ci"), checkins=True) if s.id != first.id)
        assert (await outcome(app, second.id, berlin(2026, 3, 29, 10, 0))).status == "delivered"
    asked = checkin_requests(fake_llm)
    assert len(asked) == 2 and not any(b.get("tools") for b in asked)
    assert sorted(item for b in asked for item in ("Ann's job interview", "Bob returns the drill")
                  if f"2026-03-27: {item}" in b["messages"][-1]["content"]) == ["Ann's job interview", "Bob returns the drill"]
    ledger = Ledger(app.settings.home)
    assert [r[0] for r in ledger._rows("SELECT purpose FROM calls WHERE purpose = 'checkin'", [])] == ["checkin"] * 2
    ledger.close()
    clock.set(berlin(2026, 3, 29, 12, 0))
    async with clocked(make_settings, clock, **env) as (app2, box2):
        assert await app2.checkins.sweep() == 0 and await app2.schedules.tick() == 0
    assert box2.sent == []


async def test_a_forgotten_open_item_is_never_asked(make_settings, fake_llm):
    """/memory forget removes an open item like any fact: its check-in is skipped at its time, nothing is sent;
    /checkins off cancels the check-ins still to come."""
    clock = Clock(berlin(2026, 3, 26, 15, 0))
    async with clocked(make_settings, clock, TUSK_TIMEZONE="Europe/Berlin") as (app, box):
        await say(app, box, "fo", "/checkins on")
        await say(app, box, "fo", "plans")
        fake_llm.script(consolidating(ITEMS))
        await say(app, box, "fo", "/new")
        assert await app.checkins.sweep() == 2
        assert "Forgot" in (await say(app, box, "fo", "/memory forget all interview"))[0]
        assert "interview" not in memfiles.read_memory(kept.files(app, "http", "fo"))
        clock.set(berlin(2026, 3, 28, 10, 0))
        sent = len(box.to("fo"))
        assert await app.schedules.tick() == 1  # the drill; the interview is skipped
        drill, interview = sorted(app.schedules.of(ChatKey("http", "fo"), checkins=True), key=lambda s: "drill" not in s.item)
        await outcome(app, drill.id, berlin(2026, 3, 28, 10, 0))
        assert [(r.status, r.why) for r in interview.runs] == [("skipped", "the item is no longer in memory")]
        assert len(box.to("fo")) == sent + 1 and "interview" not in str(checkin_requests(fake_llm))
        await say(app, box, "fo", "more plans")
        fake_llm.script(consolidating("- Carl has a dentist appointment\n\n## Open items\n- 2026-04-02: Carl's dentist\n"))
        await say(app, box, "fo", "/new")
        assert await app.checkins.sweep() == 1
        assert (await say(app, box, "fo", "/checkins off"))[0] == "Check-ins: off. 1 planned check-in(s) cancelled."
        assert [s for s in app.schedules.of(ChatKey("http", "fo"), checkins=True) if s.due is not None] == []


def test_open_items_are_read_from_memory_and_from_the_text_form():
    """The section is read under any heading level and case, with `:` or a dash; lines without a date, invalid
    dates and other sections are left alone; the model's text-format answer carries it in its MEMORY part."""
    memory = ("## Ann\n- 2026-01-01: not an item (another section)\n### open items:\n- 2026-05-08 — Ann's interview\n"
              "* 2026-05-12: Bob returns the drill\n- someday: no date\n- 2026-02-30: no such day\n## Later\n- x\n")
    assert [i.line for i in open_items.items(memory)] == ["2026-05-08: Ann's interview", "2026-05-12: Bob returns the drill"]
    text = "HISTORY ENTRY:\n[2026-05-01] Plans.\nMEMORY:\n- Ann looks for work\n\n## Open items\n- 2026-05-08: Ann's interview\n"
    summary = parse_summary(text, "", 1000)
    assert [i.line for i in open_items.items(summary.memory_update)] == ["2026-05-08: Ann's interview"]
    assert open_items.same("2026-05-08: Ann's job interview", "2026-05-08: job interview (Ann)")
    assert not open_items.same("2026-05-08: Ann's job interview", "2026-05-09: Ann's job interview")
