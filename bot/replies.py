"""What a turn says besides the model's answer, and the user message it saves.

    user_message(msg)   the session's record of what was said (with its sender and kept files)
    shown_text(reply)   the model's text as shown and saved, with a note when it was cut or filtered
    Answer, own(text)   a turn's reply: the model's Markdown, or Tusk's own words, shown as written
    the fixed replies   a crash, too many tool steps, no room left, nothing readable, an empty or broken reply
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.events import InboundMessage
from bot.llm import LLMReply
from bot.media import Attached
from memory.session import Message

CRASH_REPLY = "Something went wrong on my side and your message was not processed. Please try again."
STORAGE_REPLY = "My storage is unavailable right now, so your message was not processed. Please try again in a minute."
STEP_LIMIT_REPLY = "I stopped after {n} tool steps without finishing. Try asking for something smaller."


@dataclass(frozen=True, slots=True)
class Answer:
    """A turn's reply: the model's text (Markdown), or with `verbatim` Tusk's own words (a command's answer,
    a refusal, a failure's sentence) that every channel shows as written (bot/events.py `OutboundMessage`)."""

    text: str
    verbatim: bool = False


def own(text: str) -> Answer:
    """Tusk's own words as a turn's reply."""
    return Answer(text, verbatim=True)


def user_message(msg: InboundMessage, attached: Attached | None = None) -> Message:
    """The user message to save for `msg`, with its sender (for an injected turn: who set it up); with
    files, their placeholders and caption (`Attached.saved`) and the kept files' paths."""
    return Message(role="user", content=attached.saved if attached else msg.text, ts=msg.ts,
                   sender_id=msg.sender_id or None, sender_name=msg.sender_name or None,
                   media=attached.files if attached else ())


def shown_text(reply: LLMReply) -> str:
    """The reply's text as the user sees it and the session keeps it: with a note when it was cut."""
    text = (reply.content or "").strip()
    if text and reply.cut:
        text += CUT_NOTE
    elif text and reply.finish_reason == "content_filter":
        text += FILTER_NOTE
    return text


class MessageTooLong(Exception):
    """The new message alone leaves no room in the window; its text is the user's answer."""


OUT_OF_ROOM_REPLY = ("The tool results filled this conversation's token budget before I could finish. "
                     "Ask again with a narrower request.")
NO_TEXT_REPLY = ("I can only read text, voice messages, photos and documents (text files, PDFs), and that message "
                 "had none of them: stickers and the like are beyond me.")
EMPTY_REPLY = "The model sent an empty reply. Please try again or rephrase."
MALFORMED_REPLY = "The model wrote a tool call it could not complete, twice. Please try again or rephrase."
NO_MEDIA_REPLY = "I can't take files here: only text."
CUT_NOTE = "\n\n_(cut off here: the reply reached its length limit)_"
FILTER_NOTE = "\n\n_(stopped here by the model provider's content filter)_"
