"""`tusk chat`: a Tusk of its own when nothing runs on the home, else the terminal of the one that runs.

    no Tusk on the home        a Tusk starts for this chat (the terminal channel alone) and holds the home
                               (bot/running.py) until the chat ends; it needs the model (TUSK_MODEL)
    `tusk run` on the home     the chat talks to it through its local HTTP API (channels/terminal/remote.py),
                               with the console token; no second Tusk, no model needed here (one still
                               starting is waited for until its API answers)
    anything else holds it     (a `tusk chat` alone, `tusk restore`, ...) refused with one line naming it

Either way it is the chat `terminal:<chat>`, with the same memory and the same screen.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bot import logs, running
from bot.config import Settings
from bot.errors import HomeBusy

STARTING = 30.0  # seconds to wait for a `tusk run` that holds the home but does not serve its API yet


def _terminal_files(settings: Settings, chat: str) -> tuple[Path | None, Path | None]:
    """For a person at a terminal: the chat's input history file, and the log file the log lines now go to
    (the screen is the conversation). Down a pipe: neither, the log stays on stderr."""
    from channels import terminal
    from memory.paths import ChatFiles, private_dir

    if not terminal.interactive():
        return None, None
    private_dir(settings.home, follow=True)
    log_file = settings.home / "tusk-chat.log"
    logs.to_file(log_file)
    files = ChatFiles.locate(settings.home, "terminal", chat)
    files.ensure()
    return files.input_history, log_file


async def _settled(home: Path) -> running.Holder | None:
    """Who holds the home, once a `tusk run` still starting says where its API answers (or has gone)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTING
    there = running.holder(home)
    while there is not None and there.command == "tusk run" and not there.url and loop.time() < deadline:
        await asyncio.sleep(0.1)
        there = running.holder(home)
    return there


def command(args: argparse.Namespace, settings: Settings) -> int:
    """`tusk chat [--chat NAME]` (called by bot/ops/cli.py)."""
    asyncio.run(chat(settings, args.chat))
    return 0


async def chat(settings: Settings, name: str) -> None:
    """Chat in `terminal:<name>` until the person ends it (HomeBusy, RemoteTuskError, ConfigError: one line)."""
    there = await _settled(settings.home)
    if there is None:
        await _alone(settings, name)
    elif there.engine and there.url:
        await _beside(settings, name, there)
    else:
        raise HomeBusy(there.refusal(), there)


async def _alone(settings: Settings, name: str) -> None:
    settings.llm_settings()  # fail fast, before the slow imports, on a missing model
    from bot.app import TuskApp
    from channels.terminal import TerminalChannel

    history, log_file = _terminal_files(settings, name)
    app = TuskApp(settings, command="tusk chat")
    terminal = app.add(TerminalChannel(name, app.bus.publish, bot_name=settings.bot_name, cancel=app.bus.cancel,
                                       history=history, log_file=log_file))
    async with app:
        await terminal.run()


async def _beside(settings: Settings, name: str, there: running.Holder) -> None:
    from bot.ops.access import http_access
    from channels.terminal import TerminalChannel
    from channels.terminal.remote import RemoteTusk

    assert there.url is not None
    remote = RemoteTusk(there.url, http_access(settings, create=False).token, name)
    history, log_file = _terminal_files(settings, name)
    terminal = TerminalChannel(name, remote.publish, bot_name=settings.bot_name, cancel=remote.cancel,
                               history=history, log_file=log_file, via=there.names())
    async with remote.connected(terminal):
        await terminal.start()
        try:
            await terminal.run()
        finally:
            await terminal.stop()
