"""The nonce each message the bot posts carries, so that the same reply posted again is not doubled.

Discord's Create Message takes a `nonce` (at most 25 characters) and `enforce_nonce`: when another message by the
same author carries the same nonce, from the past few minutes, Discord answers with that message and makes none.
discord.py sends a random nonce with every message, so its own retry of a request whose answer was lost posts
once. Tusk derives the nonce from the message the reply answers (`ReplyRef.message`, its Discord id, set for every
message taken from the gateway), so that the same reply sent again by any process (a worker that took the turn
over after another died) finds the first message instead of posting a second:

    reply   (channel, answered message, piece index, piece text)   `send`: the answer and a notice about the same
                                                                   message differ by their text; the same text
                                                                   sent again is the same message
    draft   (channel, answered message, message index)             the reply being written: a draft begun again
                                                                   continues in the messages the first one made,
                                                                   edited in place to the new text
    voice   (channel, answered message)                            one voice message per reply

The channel is in every nonce: Discord scopes nonces to the author, not the channel. A message that answers no
Discord message (a reminder's turn, a notice outside any turn, a slash command's answer, which goes through the
interaction's webhook and takes no nonce) keeps a random nonce: two such messages with the same text must both
show.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Literal

from bot.events import ChatKey, ReplyRef

Kind = Literal["reply", "draft", "voice"]


def nonce(kind: Kind, key: ChatKey, ref: ReplyRef | None, index: int = 0, text: str = "") -> str | None:
    """The nonce of piece `index` (saying `text`, for a reply) of the reply to `ref`'s message in `key`'s channel,
    24 hexadecimal characters; None where the reply answers no Discord message (then discord.py's random one)."""
    if ref is None or not ref.message:
        return None
    seed = "\0".join(("tusk/1", kind, key.chat_id, ref.message, str(index), text))
    return hashlib.blake2b(seed.encode(), digest_size=12).hexdigest()


def random() -> str:
    """A nonce of its own, for a message sent where discord.py adds none (its low-level `send_message`)."""
    return str(secrets.randbits(64))
