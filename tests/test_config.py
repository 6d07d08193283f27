"""Settings: .env.example is complete and loads as it ships."""

from pathlib import Path

from bot.config import Settings, load_settings
from bot.places import default_home

EXAMPLE = Path(__file__).resolve().parent.parent / ".env.example"


def test_every_setting_is_documented_in_env_example():
    """Each variable Tusk reads has a line in .env.example."""
    documented = {line.split("=", 1)[0] for line in EXAMPLE.read_text().splitlines()
                  if "=" in line and not line.startswith("#")}
    names = {field.validation_alias for field in Settings.model_fields.values()}
    assert names - documented == set()


def test_env_example_loads_as_it_ships(tmp_path, monkeypatch, make_settings):
    """A copy of .env.example with only TUSK_MODEL filled in is a valid configuration."""
    make_settings()  # clears TUSK_/platform variables from the environment and moves into tmp_path
    (tmp_path / ".env").write_text(EXAMPLE.read_text().replace("\nTUSK_MODEL=\n", "\nTUSK_MODEL=openai/gpt-4o-mini\n"))
    settings = load_settings()
    assert settings.model == "openai/gpt-4o-mini" and settings.telegram_bot_token is None
    assert settings.home == default_home() and settings.open_allow_lists() == []
