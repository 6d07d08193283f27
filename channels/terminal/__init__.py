"""`tusk chat`: one local chat in the terminal, with the same commands as any other chat.

At a terminal the input line is prompt_toolkit's (channels/terminal/prompt.py: editing keys,
the chat's own input history, multi-line messages, bracketed paste as one message), replies
are rendered as Markdown by rich, and whatever is printed while the prompt is shown (a
reminder's message, a library's warning) appears above it. Ctrl-C cancels the running turn
(nothing is saved); at an empty prompt it ends the chat, like Ctrl-D or `/quit`.

With standard input not a terminal (a pipe, a script), lines are read one at a time as
before, each a message, and replies are printed as plain text. Either way the next prompt
appears once the reply is printed, and no message is cut: one over TUSK_MAX_MESSAGE_CHARS
gets the same answer as in any other chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shutil
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from bot.events import ChatKey, InboundMessage, OutboundMessage
from channels.base import Publish
from channels.terminal.stream import RedrawDraft, WriterDraft

if TYPE_CHECKING:
    from bot.speech.replies import VoiceOutlet

QUIT = frozenset({"/quit", "/exit"})
CANCELLED = "(cancelled: that message was not answered and not saved)"


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (some containers)
        return os.environ.get("USER") or "you"


def interactive(stdin: TextIO | None = None, stdout: TextIO | None = None) -> bool:
    """True when a person sits at a terminal (both ends are ttys): the prompt_toolkit line and rich replies."""
    try:
        return (stdin or sys.stdin).isatty() and (stdout or sys.stdout).isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


class TerminalChannel:
    name = "terminal"
    voice: VoiceOutlet | None = None  # replies are text only (the Outlet's attribute, so typed as it)

    def __init__(self, chat: str, publish: Publish, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 bot_name: str = "Tusk", cancel: Callable[[ChatKey], bool] | None = None,
                 history: Path | None = None, log_file: Path | None = None, via: str | None = None) -> None:
        self.key = ChatKey(self.name, chat)
        self._publish = publish
        self._cancel = cancel  # the bus's cancel: stops this chat's running turn (Ctrl-C)
        self._stdin = stdin
        self._stdout = stdout
        self._bot_name = bot_name
        self._history = history  # the input history file (interactive only): in the chat's folder, /forget takes it
        self._log_file = log_file  # where the log lines go meanwhile, shown in the greeting
        self._via = via  # the running Tusk this chat talks through (channels/terminal/remote.py), for the greeting
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._user = _user_name()
        self._rich = interactive(stdin, stdout)

    @property
    def _out(self) -> TextIO:
        return self._stdout or sys.stdout  # looked up when used: at a terminal, prompt_toolkit's proxy

    async def start(self) -> None:
        if self._rich:
            return
        loop = asyncio.get_running_loop()
        stdin = self._stdin or sys.stdin

        def read() -> None:
            for line in stdin:
                loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\n"))
            loop.call_soon_threadsafe(self._lines.put_nowait, None)

        threading.Thread(target=read, name="tusk-stdin", daemon=True).start()

    async def pause(self) -> None:
        """Nothing to pause: the terminal chat ends with its input."""

    async def stop(self) -> None:
        self._lines.put_nowait(None)

    def draft(self, msg: InboundMessage) -> WriterDraft:
        """The reply printed as it is written (channels/terminal/stream.py); at a terminal it is then drawn
        again, rendered, in its place."""
        if not self._rich:
            return WriterDraft(self._out, f"{self._bot_name}> ")
        return RedrawDraft(self._out, f"{self._bot_name}> ", self.show, lambda: shutil.get_terminal_size().columns)

    async def send(self, msg: OutboundMessage) -> None:
        self.show(msg.text, msg.verbatim)

    def show(self, text: str, verbatim: bool = False) -> None:
        """Print one reply: the model's Markdown rendered by rich at a terminal, plain text down a pipe; Tusk's
        own words (`verbatim`: a command's answer) as written everywhere, line by line, nothing read as markup.
        (The one place replies are drawn, so a streamed reply can be drawn here too.)"""
        if not self._rich:
            self._out.write(f"{self._bot_name}> {text}\n\n")
            self._out.flush()
            return
        from rich.console import Console
        from rich.markdown import Markdown
        from rich.text import Text

        console = Console(file=self._out, highlight=False)
        console.print(Text(f"{self._bot_name}>", style="bold cyan"))
        if verbatim:  # Tusk's own words: its line breaks only (the terminal folds a long line, rich does not)
            console.print(Text(text), soft_wrap=True)
        else:
            console.print(Markdown(text, code_theme="ansi_dark"))
        console.print()

    def note(self, text: str) -> None:
        """A line of the terminal's own (not a reply): a cancelled turn, a lost connection."""
        self._out.write(f"{text}\n\n")
        self._out.flush()

    def _greeting(self) -> str:
        keys = ("Enter sends, Esc-Enter starts a new line, Ctrl-C cancels a reply; Ctrl-D or /quit ends."
                if self._rich else "Ctrl-D or /quit ends.")
        log = f" Log: {self._log_file}" if self._log_file else ""
        via = f" Through the Tusk running on this home ({self._via})." if self._via else ""
        return f"Chatting as {self._user} in chat '{self.key.chat_id}'.{via} /help lists commands; {keys}{log}\n"

    async def run(self) -> None:
        """Chat until end of input, /quit, or Ctrl-C at an empty prompt."""
        self._out.write(self._greeting())
        if not self._rich:
            await self._converse(self._lines.get)
            return
        from prompt_toolkit.patch_stdout import patch_stdout

        from channels.terminal.prompt import PromptLine

        line = PromptLine(self._history)
        with patch_stdout(raw=True):
            await self._converse(line.read)

    async def _converse(self, read: Callable[[], Awaitable[str | None]]) -> None:
        while True:
            if not self._rich:
                self._out.write("you> ")
                self._out.flush()
            text = await read()
            if text is None or text.strip() in QUIT:
                self._out.write("\n")
                return
            if text.strip():
                await self._turn(text)

    async def _turn(self, text: str) -> None:
        """Publish one message and wait for its turn; Ctrl-C (SIGINT) meanwhile cancels the turn."""
        done = asyncio.ensure_future(self._publish(
            InboundMessage(self.key, text, sender_id=self._user, sender_name=self._user)))
        with self._interrupt_cancels_turn():
            await asyncio.wait([done])
        if done.cancelled():
            self.note(CANCELLED)

    @contextlib.contextmanager
    def _interrupt_cancels_turn(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        previous = signal.getsignal(signal.SIGINT)
        try:
            loop.add_signal_handler(signal.SIGINT, self._interrupted)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _interrupted(self) -> None:
        if self._cancel is None or not self._cancel(self.key):
            self.note("(nothing to cancel)")
