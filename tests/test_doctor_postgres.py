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
