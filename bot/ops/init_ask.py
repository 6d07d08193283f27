"""`tusk init`'s questions on the terminal (prompt_toolkit): provider, model, key, then each platform.

Every answer is checked live as soon as it is given (bot/ops/init_checks.py); a failed check
explains itself and offers to answer again. Enter keeps the value in [brackets]; keys and
tokens are typed hidden and never printed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from prompt_toolkit import prompt
from prompt_toolkit.validation import Validator

from bot.ops.init_checks import check_model, check_platform, failed, show
from bot.ops.init_choices import PLATFORMS, PROVIDERS, Provider

PLATFORM_HELP = {
    "TELEGRAM_BOT_TOKEN": "Telegram bot token (from @BotFather: /newbot, or /mybots -> API Token)",
    "DISCORD_BOT_TOKEN": "Discord bot token (Developer Portal -> your application -> Bot -> Reset Token)",
    "SLACK_BOT_TOKEN": "Slack Bot User OAuth Token (xoxb-..., your app's OAuth & Permissions page)",
    "SLACK_APP_TOKEN": "Slack app-level token for Socket Mode (xapp-..., Basic Information -> App-Level Tokens)",
}


def interview(current: Mapping[str, str], target: Path, check: bool = True) -> tuple[dict[str, str], bool]:
    """Ask, check, and ask again where a check failed: (the answers, whether to write them)."""
    state = "editing it: Enter keeps the value in [brackets]" if current else "a new file"
    print(f"Tusk settings file: {target} ({state}).\n")
    answers: dict[str, str] = {}
    ok = _until_ok(lambda: _model(current), answers, target, check, None)
    for name, keys in PLATFORMS.items():
        has = bool(current.get(keys[0]))
        if _yes(f"Connect {name}?", default=has):
            ok &= _until_ok(lambda keys=keys: _tokens(keys, current), answers, target, check, name)
    if not ok:
        return answers, _yes("Some answers failed their check. Save them anyway?", default=False)
    return answers, True


def _until_ok(ask, answers: dict[str, str], target: Path, check: bool, platform: str | None) -> bool:
    """Ask (the model or a platform's tokens) until the live check passes or the person moves on."""
    while True:
        given = ask()
        answers.update(given)
        if not check:
            return True
        print("Checking ...", flush=True)
        checks = asyncio.run(check_model(answers, target) if platform is None else
                             _one(check_platform(platform, answers, target)))
        show(checks, answers)
        if not failed(checks):
            return True
        if not _yes("Answer again?", default=True):
            return False


async def _one(awaitable):
    return [await awaitable]


def _model(current: Mapping[str, str]) -> dict[str, str]:
    provider = _provider(current.get("TUSK_MODEL", ""))
    out = {}
    if provider.api_base or provider.key == "other":
        default = current.get("TUSK_API_BASE") or provider.api_base
        out["TUSK_API_BASE"] = _ask("Server URL" + (" (Enter for the provider's own)" if provider.key == "other"
                                                    else ""), default)
    elif current.get("TUSK_API_BASE"):
        out["TUSK_API_BASE"] = ""  # a cloud provider: its own endpoint, not the old server's
    model_default = current.get("TUSK_MODEL", "") if _matches(provider, current.get("TUSK_MODEL", "")) else ""
    model_default = model_default or _served(provider, out.get("TUSK_API_BASE", "")) or provider.model
    out["TUSK_MODEL"] = _ask("Model (a litellm model string)", model_default,
                             lambda v: bool(v.strip()) and not v.endswith("/"))
    if provider.key_from or provider.key == "other":
        where = f" from {provider.key_from}" if provider.key_from else " (Enter for none)"
        key = _secret(f"API key{where}", bool(current.get("TUSK_API_KEY")))
        if key is not None:
            out["TUSK_API_KEY"] = key
    return out


def _provider(model: str) -> Provider:
    for number, provider in enumerate(PROVIDERS, 1):
        print(f"  {number}. {provider.name}")
    default = next((n for n, p in enumerate(PROVIDERS, 1) if _matches(p, model)), 1)
    choice = _ask("Model provider (number)", str(default),
                  lambda v: v.strip().isdigit() and 1 <= int(v) <= len(PROVIDERS))
    return PROVIDERS[int(choice) - 1]


def _matches(provider: Provider, model: str) -> bool:
    return bool(model) and bool(provider.model) and model.startswith(provider.model.split("/")[0] + "/")


def _served(provider: Provider, api_base: str) -> str:
    """The first model a local server lists, with the provider's route (or "" if it lists none)."""
    if not api_base or not provider.api_base:
        return ""
    from bot.llm.server import served_models

    try:
        names = asyncio.run(served_models(api_base))
    except OSError:
        names = []
    if names:
        print(f"The server at {api_base} serves: {', '.join(names)}")
    return provider.model.split("/")[0] + "/" + names[0] if names else ""


def _tokens(keys: tuple[str, ...], current: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key in keys:
        value = _secret(PLATFORM_HELP[key], bool(current.get(key)), required=True)
        if value is not None:
            out[key] = value
    return out


def _ask(question: str, default: str = "", valid=None) -> str:
    """A typed answer (Enter: `default`), asked again until `valid` holds."""
    check = (lambda v: not v.strip() or valid(v.strip())) if default else valid  # Enter takes the default
    validator = Validator.from_callable(check, error_message="not a valid answer") if valid else None
    return prompt(f"{question} [{default}]: " if default else f"{question}: ", validator=validator).strip() or default


def _secret(question: str, has_current: bool, required: bool = False) -> str | None:
    """A hidden answer; None keeps the current value (Enter when one exists)."""
    suffix = " [Enter keeps the current one]" if has_current else ""
    while True:
        value = prompt(f"{question}{suffix}: ", is_password=True).strip()
        if value or has_current or not required:
            return value or (None if has_current else "")
        print("A token is needed to connect it (or Ctrl-C to stop).")


def _yes(question: str, default: bool) -> bool:
    answer = prompt(f"{question} [{'Y/n' if default else 'y/N'}]: ").strip().lower()
    return default if not answer else answer.startswith("y")
