"""`tusk chat`: one local chat in the terminal, with the same commands as any other chat.

Lines typed are published one at a time (the next prompt appears once the reply is
printed). End with Ctrl-D or `/quit`. Standard input is read by a daemon thread, so a
blocked read never keeps the process from exiting.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
import threading
from typing import TextIO

from bot.events import ChatKey, InboundMessage, OutboundMessage
from channels.base import Publish
from channels.terminal_stream import WriterDraft

QUIT = frozenset({"/quit", "/exit"})


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (some containers)
        return os.environ.get("USER") or "you"


class TerminalChannel:
    name = "terminal"

    def __init__(self, chat: str, publish: Publish, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 bot_name: str = "Tusk") -> None:
        self.key = ChatKey(self.name, chat)
        self._publish = publish
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._bot_name = bot_name
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._user = _user_name()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def read() -> None:
            for line in self._stdin:
                loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\n"))
            loop.call_soon_threadsafe(self._lines.put_nowait, None)

        threading.Thread(target=read, name="tusk-stdin", daemon=True).start()

    async def pause(self) -> None:
        """Nothing to pause: the terminal chat ends with its input."""

    async def stop(self) -> None:
        self._lines.put_nowait(None)

    def draft(self, key: ChatKey, reply_to: int) -> WriterDraft:
        """The reply printed as it is written (channels/terminal_stream.py)."""
        return WriterDraft(self._stdout, f"{self._bot_name}> ")

    async def send(self, msg: OutboundMessage) -> None:
        self._stdout.write(f"{self._bot_name}> {msg.text}\n\n")
        self._stdout.flush()

    def _prompt(self) -> None:
        self._stdout.write("you> ")
        self._stdout.flush()

    async def run(self) -> None:
        """Chat until end of input or /quit."""
        self._stdout.write(f"Chatting as {self._user} in chat '{self.key.chat_id}'. /help lists commands; "
                           "Ctrl-D or /quit ends.\n")
        while True:
            self._prompt()
            line = await self._lines.get()
            if line is None or line.strip() in QUIT:
                self._stdout.write("\n")
                return
            if line.strip():
                await self._publish(InboundMessage(self.key, line, sender_id=self._user, sender_name=self._user))
