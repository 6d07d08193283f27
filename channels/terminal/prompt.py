"""The terminal chat's input line, on prompt_toolkit: editing keys, history, multi-line input.

    Enter              send
    Esc Enter / Alt-Enter   a new line in the message (a bracketed paste keeps its lines: one message)
    Up / Down          earlier messages of this chat (kept in the chat's `input-history`, 0600; after
                       `/forget confirm`, in memory only until a message makes the chat's folder again)
    Ctrl-C             clear the line; at an empty prompt, end the chat
    Ctrl-D             end the chat at an empty prompt

`read()` returns the message, or None when the person ends the chat.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from memory.paths import open_private


class PrivateHistory(FileHistory):
    """prompt_toolkit's file history, kept owner-only (0600) and never written through a symlink."""

    def __init__(self, path: Path) -> None:
        os.close(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))  # made 0600; a symlink is refused
        super().__init__(path)

    def store_string(self, string: str) -> None:
        """Append one line to the file; while the chat's folder is gone (`/forget confirm` took it), the line is
        kept in memory only (Up still finds it), so forgetting is not undone by what is typed next. Once a
        message has made the folder again, lines are written to it again."""
        path = Path(os.fsdecode(self.filename))
        if not path.parent.is_dir():
            return
        lines = [f"\n# {datetime.datetime.now()}\n", *(f"+{line}\n" for line in string.split("\n"))]
        try:
            fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        except FileNotFoundError:  # the folder went just now
            return
        with os.fdopen(fd, "ab") as f:
            f.write("".join(lines).encode("utf-8", errors="replace"))


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter")
    def _send(event: KeyPressEvent) -> None:
        event.current_buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(result=None)

    @keys.add("c-d")
    def _end(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.delete()
        else:
            event.app.exit(result=None)

    return keys


class PromptLine:
    def __init__(self, history: Path | None) -> None:
        self._session: PromptSession[str | None] = PromptSession(
            history=PrivateHistory(history) if history is not None else None, multiline=True,
            key_bindings=_bindings(), prompt_continuation=lambda width, line, wrap: "." * (width - 2) + "> ",
            enable_open_in_editor=False)

    async def read(self) -> str | None:
        """The next message typed (or pasted), or None when the person ends the chat."""
        try:
            return await self._session.prompt_async(FormattedText([("bold", "you> ")]))
        except (EOFError, KeyboardInterrupt):  # KeyboardInterrupt: a SIGINT sent from outside
            return None
