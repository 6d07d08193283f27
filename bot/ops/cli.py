"""The `tusk` command: parses arguments and calls into bot/app.py, nothing more."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from bot import logs
from bot.config import Settings, load_settings
from bot.errors import ConfigError, TuskError

logger = logging.getLogger("tusk")

ADMIN = frozenset({"chats", "memory", "forget", "export"})


def _chat_name(value: str) -> str:
    from bot.events import ChatKey

    try:
        return ChatKey("terminal", value).chat_id
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _version() -> str:
    """The installed package's version (pyproject.toml), as pip recorded it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tuskbot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed: pip install -e .)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tusk", description="Tusk: a chat bot in which every chat keeps its own memory.")
    parser.add_argument("--version", action="version", version=f"tusk {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="start every configured channel plus the local HTTP API")
    chat = sub.add_parser("chat", help="chat with Tusk in this terminal")
    chat.add_argument("--chat", default="local", type=_chat_name, help="which local chat to talk in (each keeps its own memory)")
    doctor = sub.add_parser("doctor", help="check the configuration, data dir, LLM and platform tokens")
    doctor.add_argument("--no-model", action="store_true",
                        help="skip the model check: no request to the LLM provider, and litellm is not loaded")
    from bot.ops.init import add_arguments as init_arguments

    init_arguments(sub.add_parser("init", help="set Tusk up: the model, its key, the platforms (checked live), "
                                  "written to the settings file"))
    sub.add_parser("console-url", help="print the web console's address with its access token")
    db = sub.add_parser("db", help="the database's schema (TUSK_DATABASE_URL): status or upgrade")
    db.add_argument("action", choices=["status", "upgrade"], help="show the schema's version, or apply migrations")
    sub.add_parser("chats", help="list every chat: messages, memory size, last activity")
    memory = sub.add_parser("memory", help="show a chat's MEMORY.md or HISTORY.md")
    memory.add_argument("what", choices=["show", "history"])
    memory.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    memory.add_argument("-n", type=int, default=10, help="history entries to show (default 10)")
    forget = sub.add_parser("forget", help="delete everything Tusk keeps about a chat (like /forget)")
    forget.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    export = sub.add_parser("export", help="write a chat's files into a .tar.gz")
    export.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    export.add_argument("-o", "--output", type=Path, help="file to write (default tusk-CHANNEL-ID-TIME.tar.gz)")
    from bot.ops import usage

    report = sub.add_parser("usage", help="calls, tokens and cost by day, chat, person, model or purpose")
    report.add_argument("--by", choices=usage.BY, default="day", help="what each row is (default day)")
    report.add_argument("--since", type=usage.since_arg, default=30, metavar="PERIOD_OR_DATE",
                        help="7d, 30d (default), today, or a date such as 2026-11-01 (TUSK_TIMEZONE's midnight)")
    report.add_argument("--json", action="store_true", help="a JSON array for scripts (cost_usd unrounded, "
                        "null where the price is unknown)")
    budget = sub.add_parser("budget", help="a chat's own daily spend limit: list (the default), set or clear")
    budget_sub = budget.add_subparsers(dest="action", metavar="ACTION")
    budget_sub.add_parser("list", help="the default limits and every chat's own")
    budget_set = budget_sub.add_parser("set", help="give CHANNEL:ID a daily limit of USD (0 stops it), or of tokens")
    budget_set.add_argument("chat", type=_chat_key, help="CHANNEL:ID as `tusk chats` lists it")
    budget_set.add_argument("usd", nargs="?", type=usage.usd_arg, help="US dollars a day, e.g. 2.50")
    budget_set.add_argument("--tokens", type=usage.tokens_arg, metavar="N",
                            help="tokens a day of the calls whose price is unknown (which no USD limit counts)")
    budget_sub.add_parser("clear", help="back to the default (TUSK_CHAT_LIMIT_DAILY_USD)").add_argument(
        "chat", type=_chat_key, help="CHANNEL:ID")
    pairing = sub.add_parser("pairing", help="let strangers talk to Tusk: list, approve or revoke pairing codes")
    pairing_sub = pairing.add_subparsers(dest="action", metavar="ACTION", required=True)
    pairing_sub.add_parser("list", help="pending codes and who is approved")
    pairing_sub.add_parser("approve", help="approve the user or group holding CODE").add_argument("code")
    pairing_sub.add_parser("revoke", help="remove an approval (CHANNEL:ID) or a pending CODE").add_argument("target")
    apikey = sub.add_parser("apikey", help="API keys for the OpenAI-compatible endpoint, each for chats with a prefix")
    apikey_sub = apikey.add_subparsers(dest="action", metavar="ACTION", required=True)
    apikey_sub.add_parser("create", help="a new key for the chats http:PREFIX... (shown once)").add_argument(
        "--prefix", required=True)
    apikey_sub.add_parser("list", help="every key: id, prefix, when made")
    apikey_sub.add_parser("revoke", help="delete the key ID at once").add_argument("id")
    from bot.ops import archive_cli

    archive_cli.add_arguments(sub, _chat_key)
    from bot.skills import cli as skills_cli

    skills_cli.add_arguments(sub)
    return parser


def _pairing(args: argparse.Namespace, settings: Settings) -> int:
    from bot.ops import pairing
    from bot.access.pairing import PairingError, PairingStore

    store = PairingStore(settings.home, settings.pairing_ttl * 60, settings.pairing_max_pending)
    try:
        if args.action == "list":
            print(pairing.listing(store))
        elif args.action == "approve":
            print(pairing.approve(store, args.code))
        else:
            print(pairing.revoke(store, args.target))
    except (LookupError, PairingError) as exc:
        print(f"tusk: {exc.args[0]}", file=sys.stderr)
        return 1
    return 0


def _apikey(args: argparse.Namespace, settings: Settings) -> int:
    from bot.access.api_keys import ApiKeys, listing

    keys = ApiKeys(settings.home)
    try:
        if args.action == "create":
            key, secret = keys.create(args.prefix)
            print(f"{secret}\n\nAPI key {key.id} for the chats http:{key.prefix}... (shown once; only its hash is kept)")
        elif args.action == "list":
            print(listing(keys.keys()))
        else:
            print(f"revoked {keys.revoke(args.id).id}")
    except (LookupError, ValueError, OSError) as exc:
        print(f"tusk: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 1
    return 0


def _usage(args: argparse.Namespace, settings: Settings) -> int:
    from bot.ops import usage

    try:
        print(usage.run(args, settings))
    except (LookupError, ValueError, OSError) as exc:  # no such override; a damaged budgets.json or ledger
        print(f"tusk: {exc}", file=sys.stderr)
        return 1
    return 0


def _chat_key(value: str):
    from bot.ops.admin import parse_chat

    try:
        return parse_chat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _admin(args: argparse.Namespace, settings: Settings) -> int:
    """The data-dir commands: they need no model and start nothing."""
    from bot.ops import admin
    from store import open_files

    home = settings.home
    chats = open_files(home).chats
    try:
        if args.command == "chats":
            print(asyncio.run(admin.chats_table(chats, str(home))))
        elif args.command == "memory":
            shown = admin.show_memory(chats, args.chat) if args.what == "show" else \
                admin.show_history(chats, args.chat, args.n)
            print(asyncio.run(shown))
        elif args.command == "export":
            target, names = admin.export_chat(home, args.chat, args.output)
            print(f"Wrote {target} ({len(names)} files)")
        else:
            return _forget(args, settings)
    except (LookupError, ValueError) as exc:  # no such chat; a symlinked chat folder (UnsafePathError)
        print(f"tusk: {exc.args[0]}", file=sys.stderr)
        return 1
    return 0


def _forget(args: argparse.Namespace, settings: Settings) -> int:
    """`tusk forget`: the running Tusk's own /forget when one serves the home, else the files' (bot/ops/beside.py)."""
    from bot.errors import HomeBusy, RemoteTuskError
    from bot.ops.beside import forgetting

    try:
        with forgetting(settings) as forget:
            print(asyncio.run(forget(args.chat, False)))
            if not args.yes and not _confirmed("Delete it all? [y/N] "):
                print("Nothing deleted.")
                return 1
            print(asyncio.run(forget(args.chat, True)))
    except (HomeBusy, RemoteTuskError) as exc:
        print(f"tusk: {exc}", file=sys.stderr)
        return 1
    return 0


def _confirmed(question: str) -> bool:
    """A yes on stdin; no answer at all (no terminal, stdin closed) is an error that names `--yes`."""
    try:
        answer = input(question)
    except EOFError:
        raise ValueError("no answer to the question (stdin is not a terminal or is closed): "
                         "add --yes to delete without asking") from None
    return answer.strip().lower() in ("y", "yes")


async def _run(settings: Settings) -> None:
    from bot import running
    from bot.errors import HomeBusy

    if (there := running.holder(settings.home)) is not None:  # refused before anything is built or written
        raise HomeBusy(there.refusal(), there)
    from bot.app import TuskApp

    app = TuskApp(settings)
    http = app.add_http()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():  # second signal: leave now; appends are fsynced line by line, so files stay loadable
            os._exit(1)
        logger.info("stopping: finishing running turns (a second signal exits at once)")
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    platforms = app.add_platforms()
    for variable in settings.open_allow_lists():
        logger.warning("%s is empty: anyone who finds the bot can talk to it and spend your LLM credits. "
                       "Set it to the user ids allowed to use Tusk.", variable)
    if platforms and settings.dm_policy == "pairing":
        logger.info("strangers who write to the bot get a pairing code: `tusk pairing list` shows them, "
                    "`tusk pairing approve CODE` lets one in")
    async with app:
        from bot.places import settings_file  # said once started: a start that fails is one line, the error

        logger.info("settings file: %s; data dir: %s", settings_file().describe(), settings.home.absolute())
        names = ", ".join(c.name for c in platforms)
        where = _where(app, http)
        if platforms:
            print(f"Tusk is running on {names}; web console and HTTP API on {where}", flush=True)
        else:
            print(f"Tusk is running. No platform credentials are set, so only the HTTP channel is on: "
                  f"{where}  (open it in a browser for the web console: chat, and browse every chat's memory)",
                  flush=True)
        await stop.wait()


def _where(app, http) -> str:
    """The console URL: with its token the first time (when the token file is made), else a hint."""
    from bot.ops import access

    if app.http_access.created:
        return f"{access.console_url(http.settings.host, http.port, app.http_access.token)} (keep this link private)"
    hint = " (`tusk console-url` prints the link with its token)" if app.http_access.token else ""
    return http.url + hint


def _console_url(settings: Settings) -> int:
    from bot.ops import access
    from memory.paths import private_dir

    private_dir(settings.home, follow=True)
    print(access.console_url(settings.http_host, settings.http_port, access.http_access(settings).token))
    return 0


def main(argv: list[str] | None = None) -> int:
    os.umask(0o077)  # whatever Tusk (or a library) creates is owner-only, whatever umask it was started with
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    if args.command == "init":  # before the settings: it is what makes them
        from bot.ops import init

        logs.configure("ERROR", [], "text")
        return init.run(args)
    try:
        settings = load_settings()
    except ConfigError as exc:
        if args.command == "doctor":
            print(f"FAIL  config: {exc}\n      fix: see .env.example for every variable and its format")
        print(f"tusk: {exc}", file=sys.stderr)
        return 2
    quiet = args.command not in ("run", "doctor")
    from bot.ops.access import log_secrets

    logs.configure("WARNING" if quiet else settings.log_level, settings.secrets() + log_secrets(settings),
                   settings.log_format)
    if args.command in ADMIN:
        return _admin(args, settings)
    if args.command == "pairing":
        return _pairing(args, settings)
    if args.command == "db":
        from bot.ops import db

        code, text = db.run(args.action, settings)
        print(text, file=sys.stderr if code else sys.stdout)
        return code
    if args.command == "apikey":
        return _apikey(args, settings)
    from bot.ops import archive_cli

    if args.command in archive_cli.COMMANDS:
        return archive_cli.run(args, settings, _version())
    if args.command in ("usage", "budget"):
        return _usage(args, settings)
    if args.command == "skills":
        from bot.skills import cli as skills_cli

        try:
            return skills_cli.run(args, settings)
        except ConfigError as exc:
            print(f"tusk: {exc}", file=sys.stderr)
            return 2
    if args.command == "doctor":
        from bot.ops import doctor

        return doctor.report(settings, model=not args.no_model)
    if args.command == "console-url":
        try:
            return _console_url(settings)
        except (ConfigError, OSError, ValueError) as exc:
            print(f"tusk: {exc}", file=sys.stderr)
            return 2
    from bot.errors import HomeBusy, RemoteTuskError

    try:
        if args.command == "run":
            settings.llm_settings()  # fail fast, before the slow imports, on a missing model
            asyncio.run(_run(settings))
        else:
            from bot.ops import terminal_chat

            asyncio.run(terminal_chat.chat(settings, args.chat))
    except ConfigError as exc:
        print(f"tusk: {exc}", file=sys.stderr)
        return 2
    except (HomeBusy, RemoteTuskError) as exc:  # one line naming the Tusk that has the home
        print(f"tusk: {exc}", file=sys.stderr)
        return 1
    except TuskError as exc:  # e.g. a platform unreachable at start: one line, and systemd retries
        print(f"tusk: {exc} (`tusk doctor` checks every part)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
