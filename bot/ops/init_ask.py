"""`tusk init`'s questions on the terminal (prompt_toolkit): provider, model, key, then each platform.

Every answer is checked live as soon as it is given (bot/ops/init_checks.py); a failed check
explains itself and offers to answer again: what was answered stays (offered as the defaults) and only
the answer the check blamed is asked again. A model on a local server is then asked its context window
(the server's own figure offered where it reports one). Enter keeps the value in [brackets]; keys and
tokens are typed hidden and never printed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path

from prompt_toolkit import prompt
from prompt_toolkit.validation import Validator

from bot.ops.init_checks import check_model, check_platform, failed, show
from bot.ops.init_choices import PLATFORMS, PROVIDERS, Provider

MIN_WINDOW = 512  # tokens: less holds no prompt worth sending

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
    model = ModelQuestions(current)
    ok = _until_ok(model, answers, target, check, None)
    if ok and model.local:
        answers.update(_window(model.answers, current))
    for name, keys in PLATFORMS.items():
        has = bool(current.get(keys[0]))
        if _yes(f"Connect {name}?", default=has):
            def ask(only: str, keys: tuple[str, ...] = keys) -> dict[str, str]:
                return _tokens(keys, {**current, **answers})  # the answers as they are when asked

            ok &= _until_ok(ask, answers, target, check, name)
    if not ok:
        return answers, _yes("Some answers failed their check. Save them anyway?", default=False)
    return answers, True


def _until_ok(ask: Callable[[str], dict[str, str]], answers: dict[str, str], target: Path, check: bool,
              platform: str | None) -> bool:
    """Ask (the model or a platform's tokens) until the live check passes or the person moves on. Asked
    again, `ask(setting)` keeps what was answered (offered as defaults) and asks only the setting the
    check blamed ("*": everything, where no one setting is to blame)."""
    only = ""
    while True:
        answers.update(ask(only))
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
        only = next((c.setting for c in checks if c.verdict == "fail" and c.setting), "*")


async def _one(awaitable):
    return [await awaitable]


class ModelQuestions:
    """The model's questions: provider, server URL, model, key. Asked again (`only` names the setting a
    check blamed, "*" all of them), the answers given so far are the defaults and the provider stays
    the one chosen, so nothing typed is lost."""

    def __init__(self, current: Mapping[str, str]) -> None:
        self.current = current
        self.answers: dict[str, str] = {}
        self.provider: Provider | None = None

    @property
    def local(self) -> bool:
        """The model runs on a server of this machine or network (whose window Tusk cannot look up)."""
        from bot.ops.probe import is_local

        known = {**self.current, **self.answers}
        return is_local(known.get("TUSK_API_BASE")) or known.get("TUSK_MODEL", "").startswith(("ollama/",
                                                                                               "ollama_chat/"))

    def __call__(self, only: str = "") -> dict[str, str]:
        known = {**self.current, **self.answers}
        asked = lambda setting: not only or only in ("*", setting)  # noqa: E731
        if self.provider is None or only == "*":
            self.provider = _provider(known.get("TUSK_MODEL", ""), self.provider)
        provider, out = self.provider, {}
        if (provider.api_base or provider.key == "other") and asked("TUSK_API_BASE"):
            default = known.get("TUSK_API_BASE") or provider.api_base
            out["TUSK_API_BASE"] = _ask("Server URL" + (" (Enter for the provider's own)" if provider.key == "other"
                                                        else ""), default)
        elif not (provider.api_base or provider.key == "other") and self.current.get("TUSK_API_BASE"):
            out["TUSK_API_BASE"] = ""  # a cloud provider: its own endpoint, not the old server's
        if asked("TUSK_MODEL"):
            given = self.answers.get("TUSK_MODEL", "")
            mine = self.current.get("TUSK_MODEL", "") if _matches(provider, self.current.get("TUSK_MODEL", "")) else ""
            default = given or mine or _served(provider, out.get("TUSK_API_BASE", known.get("TUSK_API_BASE", ""))) \
                or provider.model
            out["TUSK_MODEL"] = _ask("Model (a litellm model string)", default,
                                     lambda v: bool(v.strip()) and not v.endswith("/"))
        if (provider.key_from or provider.key == "other") and asked("TUSK_API_KEY"):
            where = f" from {provider.key_from}" if provider.key_from else " (Enter for none)"
            key = _secret(f"API key{where}", bool(known.get("TUSK_API_KEY")))
            if key is not None:
                out["TUSK_API_KEY"] = key
        self.answers.update(out)
        return out


def _provider(model: str, chosen: Provider | None = None) -> Provider:
    for number, provider in enumerate(PROVIDERS, 1):
        print(f"  {number}. {provider.name}")
    default = next((n for n, p in enumerate(PROVIDERS, 1) if p is chosen or chosen is None and _matches(p, model)), 1)
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


def _window(answers: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """A local model's context window (TUSK_CONTEXT_WINDOW): what the server reports as the default, where it
    does (llama.cpp's /props, Ollama's /api/show, vLLM's and LM Studio's model lists), else the current one."""
    from bot.llm.window import ask_server

    known = {**current, **answers}
    try:
        reported = asyncio.run(ask_server(known.get("TUSK_MODEL", ""), known.get("TUSK_API_BASE") or None,
                                          known.get("TUSK_API_KEY") or None))
    except OSError:
        reported = None
    if reported is not None:
        print(f"The server runs {known.get('TUSK_MODEL')} with a window of {reported.tokens:,} tokens.")
    else:
        print("The server does not say its window: give the context length it runs the model with "
              "(llama.cpp's -c, Ollama's num_ctx, LM Studio's context length).")
    default = current.get("TUSK_CONTEXT_WINDOW") or (str(reported.tokens) if reported else "")
    value = _ask("Context window (tokens)", default, lambda v: v.strip().isdigit() and int(v) >= MIN_WINDOW)
    return {"TUSK_CONTEXT_WINDOW": value}


def _tokens(keys: tuple[str, ...], current: Mapping[str, str]) -> dict[str, str]:
    """A platform's tokens (Enter keeps one `current` has: the file's, or one just given)."""
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
