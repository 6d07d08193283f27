"""A chat's persona: how the bot should sound and behave in this chat, its `PERSONA.md` document beside
MEMORY.md (store/base.py).

Set with `/persona <text>` (bot/commands/persona.py), or by the owner in any editor (the files backend).
It is capped in tokens and read into the system prompt after the owner's SOUL.md / AGENTS.md, framed as
this chat's instructions under the owner's (bot/context.py). `/forget` deletes it and `tusk export`
carries it like the chat's other files.
"""

from __future__ import annotations

from memory.tokens import count_text

DEFAULT_MAX_TOKENS = 500  # TUSK_PERSONA_MAX_TOKENS


class PersonaTooLong(ValueError):
    """The persona is over the cap; the message names both figures."""


def checked(text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> tuple[str, int]:
    """The persona as kept (stripped, ending in a newline) and its tokens; PersonaTooLong over `max_tokens`."""
    text = text.strip()
    tokens = count_text(text)
    if tokens > max_tokens:
        raise PersonaTooLong(f"That persona is {tokens:,} tokens long; a chat's persona may have up to "
                             f"{max_tokens:,}. Shorten it and send it again.")
    return text + "\n", tokens
