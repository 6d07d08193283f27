"""`tusk init`'s live checks of each answer: the doctor's own probes, on settings made of the answers.

    model     one tiny request through bot/ops/probe.py (and, for a server on this machine, its models)
    Telegram  getMe     Slack  auth.test     Discord  users/@me     (bot/ops/doctor.py, plain HTTP)

The answers are laid over the environment and the settings file being edited, so base-URL settings
(TELEGRAM_API_BASE, SLACK_API_URL, DISCORD_API_BASE, ...) count as they will at `tusk run`. `show`
prints the checks as the doctor does, every secret answered masked (bot/ops/init_choices.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from bot import logs
from bot.config import Settings, settings_from
from bot.errors import ConfigError
from bot.ops.check import Check
from bot.ops.init_choices import SECRET_FLAGS

AUTH_MARKS = ("AuthenticationError", "invalid_api_key", "Incorrect API key", "401")


def settings_with(answers: Mapping[str, str], env_file: Path) -> Settings:
    """The settings `tusk run` would have once `answers` are written into `env_file`."""
    return settings_from(env_file if env_file.is_file() else None, answers)


async def check_model(answers: Mapping[str, str], env_file: Path) -> list[Check]:
    """The model answers one tiny request (the doctor's probe: reachable, tools, window, local server)."""
    from bot.ops.probe import probe  # imports litellm

    try:
        settings = settings_with(answers, env_file)
    except ConfigError as exc:  # a bad value already in the file or the environment
        return [Check("config", "fail", str(exc), f"fix that value in {env_file} or the environment")]
    try:
        checks = await probe(settings)
    except ConfigError as exc:
        return [Check("LLM", "fail", str(exc), "answer with a litellm model string such as openai/gpt-4o-mini")]
    return [_key_refused(check) if check.name == "LLM" and check.verdict == "fail" else check for check in checks]


def _key_refused(check: Check) -> Check:
    """A refused key gets its own fix (the probe's names every setting that could be wrong)."""
    if any(mark in check.detail for mark in AUTH_MARKS):
        return dataclasses.replace(check, fix="the provider refused the API key (TUSK_API_KEY): copy it again "
                                   "from the provider's key page, or check it belongs to this provider")
    return check


async def check_platform(name: str, answers: Mapping[str, str], env_file: Path) -> Check:
    """One platform's token, as `tusk doctor` checks it: Telegram, Slack or Discord."""
    from bot.ops import doctor

    probes = {"Telegram": doctor._telegram, "Slack": doctor._slack, "Discord": doctor._discord}
    try:
        settings = settings_with(answers, env_file)
    except ConfigError as exc:
        return Check("config", "fail", str(exc), f"fix that value in {env_file} or the environment")
    return await doctor._platform(name, lambda: probes[name](settings))


def failed(checks: list[Check]) -> bool:
    return any(check.verdict == "fail" for check in checks)


def show(checks: list[Check], answers: Mapping[str, str]) -> None:
    """Print checks as the doctor does, every secret answered masked."""
    for check in checks:
        print(logs.mask(check.line(), [answers.get(key, "") for key in SECRET_FLAGS.values()]), flush=True)
