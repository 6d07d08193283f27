"""`tusk init`: the onboarding. Asks for the model and the platforms, checks each answer live, writes the
settings file (0600, in place: other lines and comments kept), then runs `tusk doctor`.

    tusk init                                   questions on the terminal (prompt_toolkit)
    tusk init --yes --provider openai           no questions: flags, and keys from the environment
         [--model M] [--api-base URL] [--api-key K] [--telegram-token T] [--discord-token T]
         [--slack-bot-token T --slack-app-token T] [--file PATH] [--no-check] [--save-anyway]

The file is the one Tusk reads (bot/places.py: TUSK_ENV_FILE, ./.env, else ~/.config/tusk/tusk.env)
unless --file names another. A failed check writes nothing unless --save-anyway (or a yes when asked).
The providers and platforms offered are in bot/ops/init_choices.py, the questions in bot/ops/init_ask.py,
the live checks in bot/ops/init_checks.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from bot.ops.check import Check  # the dataclass alone: the checks themselves load only when `tusk init` runs
from bot.ops.init_choices import BY_KEY, PLATFORMS, SECRET_FLAGS
from bot.places import SettingsFile, settings_file

HEADER = ("# Tusk settings, written by `tusk init` (edit freely). Every variable is described in .env.example at the\n"
          "# root of Tusk's repository and on the Configuration page of its docs (docs/reference/configuration.md).\n")
MODEL_KEYS = ("TUSK_MODEL", "TUSK_API_BASE", "TUSK_API_KEY")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", type=Path, help="the settings file to write (default: the one Tusk reads, "
                        "else ~/.config/tusk/tusk.env)")
    parser.add_argument("--yes", action="store_true", help="ask nothing: take the flags (and keys from the "
                        "environment: TUSK_API_KEY, TELEGRAM_BOT_TOKEN, ...)")
    parser.add_argument("--provider", choices=list(BY_KEY), help="sets the suggested model and URL")
    parser.add_argument("--model", help="litellm model string, e.g. openai/gpt-4o-mini")
    parser.add_argument("--api-base", help="the server's URL (local servers, proxies)")
    parser.add_argument("--api-key", help="the provider's key (better: TUSK_API_KEY in the environment)")
    parser.add_argument("--telegram-token", help="from @BotFather (or TELEGRAM_BOT_TOKEN)")
    parser.add_argument("--discord-token", help="the Bot page's token (or DISCORD_BOT_TOKEN)")
    parser.add_argument("--slack-bot-token", help="xoxb-... (or SLACK_BOT_TOKEN)")
    parser.add_argument("--slack-app-token", help="xapp-..., Socket Mode (or SLACK_APP_TOKEN)")
    parser.add_argument("--no-check", action="store_true", help="write without checking the answers live")
    parser.add_argument("--save-anyway", action="store_true", help="write even if a check fails")


def run(args: argparse.Namespace) -> int:
    """The `tusk init` command; its exit code (the doctor's once the file is written)."""
    from dotenv import dotenv_values

    from bot.ops import envfile
    from bot.ops.init_checks import failed

    found = settings_file()
    target = args.file or found.path
    current = {k: v for k, v in dotenv_values(target).items() if v is not None} if target.is_file() else {}
    if args.yes:
        try:
            answers = from_flags(args, current)
        except ValueError as exc:
            print(f"tusk init: {exc}", file=sys.stderr)
            return 2
        checks = [] if args.no_check else asyncio.run(_check_all(answers, target))
        save = not failed(checks) or args.save_anyway
    else:
        if not sys.stdin.isatty():
            print("tusk init: no terminal to ask on: in a script, pass --yes with --provider/--model and the "
                  "tokens (tusk init --help)", file=sys.stderr)
            return 2
        from bot.ops.init_ask import interview

        try:
            answers, save = interview(current, target, check=not args.no_check)
        except (EOFError, KeyboardInterrupt):
            print("\nNothing written.")
            return 1
    if not save:
        print(f"Nothing written to {target}: fix what failed above, or add --save-anyway to write it as it is.")
        return 1
    try:
        envfile.update(target, answers, HEADER)
    except (OSError, ValueError) as exc:  # a folder not ours (/etc/tusk without sudo), a symlinked folder
        print(f"tusk init: cannot write {target}: {getattr(exc, 'strerror', None) or exc} (run it as the "
              "file's owner, e.g. with sudo, or pass --file PATH)", file=sys.stderr)
        return 1
    print(f"Wrote {target} (only you can read it: mode 600).")
    return _doctor_then_next(target)


def from_flags(args: argparse.Namespace, current: Mapping[str, str]) -> dict[str, str]:
    """The changes the flags ask for, secrets also from the environment; a model must end up set."""
    answers: dict[str, str] = {}
    if args.provider:
        provider = BY_KEY[args.provider]
        answers.update(TUSK_MODEL=provider.model, TUSK_API_BASE=provider.api_base)
    for flag, key in (("model", "TUSK_MODEL"), ("api_base", "TUSK_API_BASE")):
        if getattr(args, flag):
            answers[key] = getattr(args, flag)
    for flag, key in SECRET_FLAGS.items():
        if value := getattr(args, flag) or os.environ.get(key, "").strip():
            answers[key] = value
    model = answers.get("TUSK_MODEL", current.get("TUSK_MODEL", ""))
    if not model or model.endswith("/"):
        raise ValueError("no model: pass --model (a litellm model string such as openai/gpt-4o-mini) or "
                         f"--provider ({', '.join(BY_KEY)}) with --model for local servers")
    return answers


async def _check_all(answers: Mapping[str, str], target: Path) -> list[Check]:
    """The live checks of what changed: the model if a model setting did, each platform whose token did."""
    from bot.ops.init_checks import check_model, check_platform, show

    checks = []
    if any(key in answers for key in MODEL_KEYS):
        checks += await check_model(answers, target)
    for name, keys in PLATFORMS.items():
        if keys[0] in answers:
            checks.append(await check_platform(name, answers, target))
    show(checks, answers)
    return checks


def _doctor_then_next(target: Path) -> int:
    """`tusk doctor` on the written file, then the command to run next."""
    from bot.config import load_settings
    from bot.errors import ConfigError
    from bot.ops.doctor import report

    source = settings_file()
    elsewhere = source.path.absolute() != target.absolute()  # --file: not the file `tusk run` would read
    if elsewhere:  # the doctor reads the file just written, as TUSK_ENV_FILE pointing at it would make it
        source = SettingsFile(target, True, "written by tusk init --file")
    print("\nRunning `tusk doctor`:")
    try:
        code = report(load_settings(source), source)
    except ConfigError as exc:
        print(f"tusk: {exc}", file=sys.stderr)
        code = 2
    prefix = f"TUSK_ENV_FILE={target} " if elsewhere else ""
    print(f"\nNext: {prefix}tusk run    (or {prefix}tusk chat to talk to it in this terminal)")
    return code
