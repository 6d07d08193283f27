"""`tusk doctor`'s skill checks: the skills found, each one skipped or not offered and why (bot/skills/views.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.errors import ConfigError
from bot.ops.check import Check

if TYPE_CHECKING:
    from bot.config import Settings


def skill_checks(settings: Settings) -> list[Check]:
    from bot.skills.catalog import Catalog
    from bot.skills.views import checks

    try:
        skill_settings = settings.skill_settings()
    except ConfigError as exc:
        return [Check("skills", "fail", str(exc), "fix TUSK_SKILLS_CHATS")]
    return checks(skill_settings, Catalog(skill_settings.roots, log=False))
