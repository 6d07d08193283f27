"""A chat's persona: how the bot should sound and behave in this chat, in `PERSONA.md` beside MEMORY.md.

Set with `/persona <text>` (bot/commands/persona.py), or by the owner in any editor. It is capped in
tokens, written atomically (owner-only), and read into the system prompt after the owner's SOUL.md /
AGENTS.md, framed as this chat's instructions under the owner's (bot/context.py). `/forget` deletes it
and `tusk export` carries it like the chat's other files.
"""

from __future__ import annotations

from pathlib import Path

from memory.files import write_atomic
from memory.paths import ChatFiles
from memory.tokens import count_text

DEFAULT_MAX_TOKENS = 500  # TUSK_PERSONA_MAX_TOKENS


class PersonaTooLong(ValueError):
    """The persona is over the cap; the message names both figures."""


def read(files: ChatFiles) -> str:
    """The persona's text ("" when the chat has none or the file cannot be read as text)."""
    try:
        return files.persona.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError, IsADirectoryError):
        return ""


def write(files: ChatFiles, text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> int:
    """Replace the persona with `text` (stripped); its tokens. Raises PersonaTooLong over `max_tokens`."""
    text = text.strip()
    tokens = count_text(text)
    if tokens > max_tokens:
        raise PersonaTooLong(f"That persona is {tokens:,} tokens long; a chat's persona may have up to "
                             f"{max_tokens:,}. Shorten it and send it again.")
    files.ensure()
    write_atomic(files.persona, text + "\n")
    return tokens


def remove(files: ChatFiles) -> bool:
    """Delete the persona; False if there was none."""
    path: Path = files.persona
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
