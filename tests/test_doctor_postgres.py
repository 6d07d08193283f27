"""`tusk doctor` (and the commands beside it) on PostgreSQL read what they report on from the database: the
model's learned window, the schedules, a chat's pick of model."""

import json

import pytest

from store import prepared
from store.shared import write
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli


@pytest.mark.parametrize("kept_in", ["database", "nowhere"])
async def test_doctor_shows_the_window_the_database_learned(fake_llm, pg_url, tmp_path, kept_in):
    """A window learned into the database's models.json is the doctor's `learned` window; without it, the
    server's or the default, never a file of the home's."""
    env = env_for(fake_llm, tmp_path, TUSK_DATABASE_URL=pg_url)
    with prepared(tmp_path / "data", pg_url) as store:
        if kept_in == "database":
            write(store.doc("models.json"), json.dumps({"openai/fake-model": {"window": 3000}}))
    code, out, err = await tusk_cli("doctor", env=env)
    window = next(line for line in out.splitlines() if line.split()[1:2] == ["window:"])
    assert ("3,000 tokens (learned)" in window) == (kept_in == "database"), (window, err)


@pytest.mark.parametrize("store_backend", ["postgres"], indirect=True)
def test_doctor_reads_the_schedules_from_the_database_and_names_a_row_it_cannot_read(make_settings, pg_url):
    """No schedule row: no schedules check; a schedule and a row that is none: the one counted, the other named
    by its id, and no reminders.json is looked for or made."""
    from bot.schedules import health
    from bot.schedules.store_pg import PgScheduleStore
    from tests.test_schedule_store import daily

    settings = make_settings()
    assert health.check(settings) is None
    with prepared(settings.home, pg_url) as store:
        PgScheduleStore(store.sync_db).add(daily("s1"))
        with store.sync_db.transaction() as conn:
            conn.execute("INSERT INTO schedules (id, channel, chat_id, due, record) "
                         "VALUES ('broken', 'telegram', '42', NULL, '{\"kind\": \"nonsense\"}')")
    verdict, detail, fix = health.check(settings)
    assert verdict == "warn" and detail.startswith("1 reminder(s) and schedule(s)") and "(broken)" in detail, detail
    assert "schedules" in fix and not (settings.home / "reminders.json").exists()


@pytest.mark.both_stores
async def test_a_chats_own_pick_of_an_unpriced_model_is_read_from_its_store(make_settings):
    """A chat that picked (with /model) a model whose calls have no price, given a USD limit of its own: `tusk
    budget set` and the doctor both say that limit cannot count its calls, having read the chat's settings
    from the store the settings name (on the database too, not a settings.json of the home)."""
    import time

    from bot.events import ChatKey
    from bot.ops import doctor, usage
    from bot.usage.ledger_sql import Call
    from memory.chat_settings import ChatSettings
    from store import opened
    from tests import kept

    settings = make_settings(TUSK_MODELS="fast=openai/fake-model@1/2,cheap=local/llama")
    key = ChatKey("telegram", "-100")
    async with opened(settings.home, settings.store_url()) as store:
        await store.chats.put_settings(await store.chats.open(key), ChatSettings(model="cheap"))
    with kept.ledger(settings) as book:  # the ledger's evidence: local/llama's calls come without a price
        book.record(Call(time.time(), "telegram", "-100", "7", "reply", "local/llama", 10, 5))
    said = usage.budget_set(settings, key, 0.5, None)
    assert "Note: local/llama has no known price, so a dollar limit cannot count its calls" in said, said
    checks = {c.name: c for c in await doctor.run_checks(settings, model=False)}
    assert checks["spend limits"].verdict == "warn"
    assert "local/llama has no known price: telegram:-100's own ($0.5 a day)" in checks["spend limits"].detail
