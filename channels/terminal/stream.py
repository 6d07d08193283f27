"""A reply printed as it is written, for any text writer (the terminal chat; bot/stream.py's `Draft`).

    Tusk> The answer grows here, word by word, as the model writes it…

A writer cannot take back what it printed: a tool step's status goes on a line of its own,
and a reply that starts over (or a final text that is not what was printed, such as a
formatted error) is printed afresh under the prompt. Self-contained on purpose: any terminal
front end hands its output stream here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

INTERVAL = 0.05  # seconds between writes: a terminal takes them as fast as they come


class WriterDraft:
    def __init__(self, out: TextIO, prefix: str) -> None:
        self.out = out
        self.prefix = prefix
        self.interval = INTERVAL
        self._printed: str | None = None  # the reply text on the current line, None before it starts

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def show(self, text: str) -> None:
        if self._printed is not None and text.startswith(self._printed):
            self._write(text[len(self._printed):])
        else:
            self._write(("\n" if self._printed is not None else "") + self.prefix + text)
        self._printed = text

    async def status(self, text: str) -> None:
        self._write(("\n" if self._printed is not None else "") + f"({text.strip('_')})\n")
        self._printed = None

    async def finish(self, text: str, verbatim: bool = False) -> None:
        await self.show(text)
        self._write("\n\n")
        self._printed = None


def rows_of(text: str, width: int) -> int:
    """How many terminal rows `text` takes when printed from the start of a row `width` columns wide."""
    return sum(max(1, -(-len(line) // max(1, width))) for line in text.split("\n"))


class RedrawDraft(WriterDraft):
    """At a terminal: the reply is printed as it comes, then erased and drawn once more by `render`
    (rich Markdown), so the finished reply reads the same whether it was streamed or not."""

    def __init__(self, out: TextIO, prefix: str, render: Callable[[str, bool], None],
                 width: Callable[[], int]) -> None:
        super().__init__(out, prefix)
        self.render = render
        self.width = width
        self._shown = ""  # everything this draft printed (statuses too): what the final drawing replaces

    def _write(self, text: str) -> None:
        super()._write(text)
        self._shown += text

    async def finish(self, text: str, verbatim: bool = False) -> None:
        if self._shown:
            up = rows_of(self._shown, self.width()) - 1
            self.out.write("\r" + (f"\x1b[{up}A" if up else "") + "\x1b[J")  # back to the first row, cleared below
        self._shown, self._printed = "", None
        self.render(text, verbatim)
