"""`tusk doctor` on PostgreSQL reads what a running Tusk learned of the model from the database."""

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
