"""The `tusk` command: parses the arguments, reads the settings and calls the command's handler, nothing more.

Each command's parser names its handler, `module:function` in the module that owns the command, imported
only when that command runs (so a command that needs no model never loads litellm): `handler(args, settings)`
returns the exit code. `main` is the one place where an error becomes an exit code and a line on stderr:

    ConfigError                        2    tusk: <what to set>
    another TuskError                  1    tusk: <it> (for run and chat: `tusk doctor` checks every part)
    LookupError, ValueError, OSError   1    tusk: <it>   (no such chat, a damaged file; in run and chat a bug,
                                                          which keeps its traceback)
    KeyboardInterrupt                  130
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from bot import logs
from bot.config import load_settings
from bot.errors import ConfigError, HomeBusy, RemoteTuskError, TuskError
from store.errors import StorageUnavailable, StoreSetupError
from bot.version import installed


def _chat_name(value: str) -> str:
    from bot.events import ChatKey

    try:
        return ChatKey("terminal", value).chat_id
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _chat_key(value: str):
    from bot.ops.admin import parse_chat

    try:
        return parse_chat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc



def _command(sub, name: str, handler: str, help: str, *, quiet: bool = True, starts: bool = False,
             settings: bool = True) -> argparse.ArgumentParser:
    """The parser of `tusk NAME`, which calls `handler`. `quiet`: it logs warnings only (else at TUSK_LOG_LEVEL);
    `starts`: it starts a Tusk; `settings=False`: it runs before the settings are read."""
    parser = sub.add_parser(name, help=help)
    parser.set_defaults(handler=handler, quiet=quiet, starts=starts, settings=settings)
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tusk",
                                     description="Tusk: a chat bot in which every chat keeps its own memory.")
    parser.add_argument("--version", action="version", version=f"tusk {installed()}")
    command = functools.partial(_command, parser.add_subparsers(dest="command", metavar="COMMAND"))
    run = command("run", "bot.ops.serve:run", "start every configured channel plus the local HTTP API", quiet=False,
                  starts=True)
    run.add_argument("--role", default="all", choices=["all", "ingress", "worker"],
                     help="with TUSK_DATABASE_URL, several processes share the work: ingress takes messages, "
                          "worker runs turns, all does both (docs: Scaling out)")
    chat = command("chat", "bot.ops.terminal_chat:command", "chat with Tusk in this terminal", starts=True)
    chat.add_argument("--chat", default="local", type=_chat_name,
                      help="which local chat to talk in (each keeps its own memory)")
    doctor = command("doctor", "bot.ops.doctor:command", "check the configuration, data dir, LLM and platform tokens",
                     quiet=False)
    doctor.add_argument("--no-model", action="store_true",
                        help="skip the model check: no request to the LLM provider, and litellm is not loaded")
    from bot.ops.init import add_arguments as init_arguments

    init_arguments(command("init", "bot.ops.init:run", "set Tusk up: the model, its key, the platforms (checked "
                           "live), written to the settings file", settings=False))
    command("console-url", "bot.ops.access:console_url_command",
            "print the web console's address with its access token")
    command("chats", "bot.ops.admin:chats_command", "list every chat: messages, memory size, last activity")
    memory = command("memory", "bot.ops.admin:memory_command", "show a chat's MEMORY.md or HISTORY.md")
    memory.add_argument("what", choices=["show", "history"])
    memory.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    memory.add_argument("-n", type=int, default=10, help="history entries to show (default 10)")
    forget = command("forget", "bot.ops.beside:forget_command",
                     "delete everything Tusk keeps about a chat (like /forget)")
    forget.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    export = command("export", "bot.ops.admin:export_command", "write a chat's files into a .tar.gz")
    export.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    export.add_argument("-o", "--output", type=Path, help="file to write (default tusk-CHANNEL-ID-TIME.tar.gz)")
    from bot.ops import usage

    report = command("usage", "bot.ops.usage:run", "calls, tokens and cost by day, chat, person, model or purpose")
    report.add_argument("--by", choices=usage.BY, default="day", help="what each row is (default day)")
    report.add_argument("--since", type=usage.since_arg, default=30, metavar="PERIOD_OR_DATE",
                        help="7d, 30d (default), today, or a date such as 2026-11-01 (TUSK_TIMEZONE's midnight)")
    report.add_argument("--json", action="store_true", help="a JSON array for scripts (cost_usd unrounded, "
                        "null where the price is unknown)")
    budget = command("budget", "bot.ops.usage:run", "a chat's own daily spend limit: list (the default), set or clear")
    budget_sub = budget.add_subparsers(dest="action", metavar="ACTION")
    budget_sub.add_parser("list", help="the default limits and every chat's own")
    budget_set = budget_sub.add_parser("set", help="give CHANNEL:ID a daily limit of USD (0 stops it), or of tokens")
    budget_set.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    budget_set.add_argument("usd", nargs="?", type=usage.usd_arg, help="US dollars a day, e.g. 2.50")
    budget_set.add_argument("--tokens", type=usage.tokens_arg, metavar="N",
                            help="tokens a day of the calls whose price is unknown (which no USD limit counts)")
    budget_sub.add_parser("clear", help="back to the default (TUSK_CHAT_LIMIT_DAILY_USD)").add_argument(
        "chat", type=_chat_key, help="CHANNEL:ID")
    pairing = command("pairing", "bot.ops.pairing:command",
                      "let strangers talk to Tusk: list, approve or revoke pairing codes")
    pairing_sub = pairing.add_subparsers(dest="action", metavar="ACTION", required=True)
    pairing_sub.add_parser("list", help="pending codes and who is approved")
    pairing_sub.add_parser("approve", help="approve the user or group holding CODE").add_argument("code")
    pairing_sub.add_parser("revoke", help="remove an approval (CHANNEL:ID) or a pending CODE").add_argument("target")
    db = command("db", "bot.ops.db:command", "the database's schema: its version, or apply the migrations")
    db.add_argument("action", choices=("status", "upgrade"), nargs="?", default="status")
    command("status", "bot.ops.status:command", "which Tusk processes run: role, host, pid, heartbeat, turns in "
            "flight").add_argument("--json", action="store_true", help="one JSON object for scripts")
    apikey = command("apikey", "bot.ops.access:apikey_command",
                     "API keys for the OpenAI-compatible endpoint, each for chats with a prefix")
    apikey_sub = apikey.add_subparsers(dest="action", metavar="ACTION", required=True)
    apikey_sub.add_parser("create", help="a new key for the chats http:PREFIX... (shown once)").add_argument(
        "--prefix", required=True)
    apikey_sub.add_parser("list", help="every key: id, prefix, when made")
    apikey_sub.add_parser("revoke", help="delete the key ID at once").add_argument("id")
    from bot.ops import archive_cli

    archive_cli.add_arguments(command, _chat_key)
    from bot.skills import cli as skills_cli

    skills_cli.add_arguments(command)
    return parser


def _handler(name: str) -> Callable[..., int]:
    """`module:function` -> the function, its module imported now."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _call(args: argparse.Namespace) -> int:
    """The settings read (for `tusk doctor`, a bad one is its first FAIL), logging set up, then the handler."""
    if not args.settings:  # `tusk init`: before the settings, as it is what makes them
        logs.configure("ERROR", [], "text")
        return _handler(args.handler)(args)
    try:
        settings = load_settings()
    except ConfigError as exc:
        if args.command == "doctor":
            print(f"FAIL  config: {exc}\n      fix: see .env.example for every variable and its format")
        raise
    from bot.ops.access import log_secrets

    logs.configure("WARNING" if args.quiet else settings.log_level, settings.secrets() + log_secrets(settings),
                   settings.log_format)
    return _handler(args.handler)(args, settings)


def _failed(message: object, code: int) -> int:
    print(f"tusk: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    os.umask(0o077)  # whatever Tusk (or a library) creates is owner-only, whatever umask it was started with
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return _call(args)
    except (ConfigError, StoreSetupError) as exc:  # what to fix in the settings (or the database's setup)
        return _failed(exc, 2)
    except StorageUnavailable as exc:  # the database does not answer now
        return _failed(exc, 1)
    except (HomeBusy, RemoteTuskError) as exc:  # one line naming the Tusk that has the home
        return _failed(exc, 1)
    except TuskError as exc:  # e.g. a platform unreachable at start: one line, and systemd retries
        return _failed(f"{exc} (`tusk doctor` checks every part)" if args.starts else exc, 1)
    except (LookupError, ValueError, OSError) as exc:  # no such chat, a damaged file, a symlinked chat folder
        if args.starts:
            raise
        return _failed(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc, 1)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
