"""The `tusk` command: parses arguments and calls into bot/app.py, nothing more."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from bot import logs
from bot.config import Settings, load_settings
from bot.errors import ConfigError

logger = logging.getLogger("tusk")


def _chat_name(value: str) -> str:
    from bot.events import ChatKey

    try:
        return ChatKey("terminal", value).chat_id
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tusk", description="Tusk: a chat bot in which every chat keeps its own memory.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="start every configured channel plus the local HTTP API")
    chat = sub.add_parser("chat", help="chat with Tusk in this terminal")
    chat.add_argument("--chat", default="local", type=_chat_name, help="which local chat to talk in (each keeps its own memory)")
    return parser


async def _run(settings: Settings) -> None:
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
    async with app:
        names = ", ".join(c.name for c in platforms)
        where = f"http://{settings.http_host}:{http.port}"
        if platforms:
            print(f"Tusk is running on {names}; local HTTP API on {where}", flush=True)
        else:
            print(f"Tusk is running. No platform credentials are set, so only the HTTP channel is on: "
                  f"{where}  (POST /v1/chats/<chat>/messages, GET /healthz)", flush=True)
        await stop.wait()


async def _chat(settings: Settings, chat: str) -> None:
    from bot.app import TuskApp
    from channels.terminal import TerminalChannel

    app = TuskApp(settings)
    terminal = app.add(TerminalChannel(chat, app.bus.publish, bot_name=settings.bot_name))
    async with app:
        await terminal.run()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    try:
        settings = load_settings()
        logs.configure("WARNING" if args.command == "chat" else settings.log_level, settings.secrets())
        settings.llm_settings()  # fail fast, before the slow imports, on a missing model
        if args.command == "run":
            asyncio.run(_run(settings))
        else:
            asyncio.run(_chat(settings, args.chat))
    except ConfigError as exc:
        print(f"tusk: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
