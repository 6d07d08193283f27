"""Long replies cut into messages a platform accepts, at boundaries a reader expects.

    split_message(text, limit, measure=len) -> ["piece", ...]
    split_message(text, limit, measure, verbatim=True)   Tusk's own words: no fence is closed or reopened

Pieces are cut from the model's Markdown source: at a blank line if one is in reach, else
at a line break, else at a space, else anywhere. A piece that ends inside a ``` code
block gets the fence closed, and the next one reopens it with the same opening line, so
every piece renders on its own. `measure` is the size the platform counts (Telegram: the
converted HTML in UTF-16 units; Discord: characters, escaped); every piece is at most `limit` by it.
The whitespace at a cut is dropped; nothing else is lost or reordered. A `verbatim` text (Tusk's own,
shown as written: bot/events.py) is not Markdown: it gets no fences, and only the line break or the
space it was cut at is dropped, so the next piece's first line keeps its indentation.
"""

from __future__ import annotations

import re
from collections.abc import Callable

LANGUAGE = re.compile(r"[\w+#.-]+")
FENCE = re.compile(r"^ {0,3}(```+|~~~+)([^`\n]*)$", re.MULTILINE)  # a backtick fence's info has no backticks


def utf16_len(text: str) -> int:
    """Length as Telegram and Slack count it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _open_fence(text: str) -> tuple[str, str]:
    """(opening line, fence marker) of the code block still open at the end of `text`, or ("", "")."""
    opening = marker = ""
    for line in text.split("\n"):
        match = FENCE.match(line)
        if not match:
            continue
        if not marker:
            language = LANGUAGE.match(match[2].strip())
            opening, marker = match[1] + (language[0] if language else ""), match[1]  # reopened as "```lang"
        elif line.strip() == match[1] and match[1][0] == marker[0] and len(match[1]) >= len(marker):
            opening = marker = ""
    return opening, marker


def _cut(text: str, size: int, lo: int) -> int:
    """Where to cut `text` so the head has at most `size` characters (and more than `lo`)."""
    if len(text) <= size:
        return len(text)
    window = text[: size + 1]
    for floor in (max(size // 2, lo), lo):  # a boundary in the second half first, so pieces are not tiny
        for sep in ("\n\n", "\n", " "):
            if (at := window.rfind(sep)) >= floor:
                return at
    return size


def split_message(text: str, limit: int, measure: Callable[[str], int] = len, verbatim: bool = False) -> list[str]:
    """Cut `text` into pieces each within `limit` as `measure` counts; see the module docstring."""
    if limit < 40:
        raise ValueError("limit too small to hold a code fence and some text")
    pieces: list[str] = []
    rest, reopen = text.strip(), ""
    while rest:
        body = reopen + rest
        if measure(body) <= limit:
            pieces.append(body)
            break
        size = min(len(body), limit)
        while True:  # shrink until the piece, its fence closed, fits as measured
            at = _cut(body, size, lo=len(reopen) + 1)
            head = body[:at].rstrip()
            line_end = body.find("\n", at) % (len(body) + 1)  # a line cut in two counts as the whole line
            opening, marker = ("", "") if verbatim else _open_fence(body[:line_end])
            piece = f"{head}\n{marker}" if marker else head
            if measure(piece) <= limit:
                break
            if size <= len(reopen) + 1:
                raise ValueError("limit too small for this text")
            size = max(len(reopen) + 1, min(size - 1, int(size * limit / max(measure(piece), 1))))
        pieces.append(piece)
        if verbatim:  # the separator goes, a next line's indentation stays
            rest = body[at:].lstrip("\n") if body[at:at + 1] == "\n" else body[at:].lstrip(" ")
        else:
            rest = body[at:].lstrip("\n") if opening else body[at:].lstrip()  # code keeps its indentation
        reopen = opening + "\n" if opening and rest else ""
    return pieces
