"""The typed events that travel the bus: what a channel hands in, what the agent hands back.

Channels build `InboundMessage`s from platform updates; the agent answers with
`OutboundMessage`s that the bus routes to the channel named in their `ChatKey`. Reminders
and background tasks publish `InboundMessage`s too, carrying their `Injected` context, so
they take their place in the chat's order like any message.
A reply read out goes to a channel that takes voice as an `OutboundVoice` (bot/speech/).
Where on its platform a reply goes (the message it quotes, its thread, a command's interaction) travels
with the message as a `ReplyRef` of plain fields, so a reply can be sent from any process that holds the
event, not only the one that took the update.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Literal

from memory.keys import ChatKey

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Injected:
    """Context Tusk itself hands the model for one turn: a reminder that is due, a schedule's run, a
    check-in, a background task's result. The turn's `InboundMessage.text` is then a short note of the
    event, saved as the turn's user message (so the saved conversation stays legal); `text` here is shown
    to the model in that turn only, and `fallback` goes to the chat as is if the model is unreachable.
    A schedule's run (bot/schedules/) names itself in `run`, and its turn reports its outcome back; with
    `as_written`, `fallback` is the reply and no model is called; `tools=False` offers the model none."""

    source: Literal["reminder", "task", "schedule", "checkin"]
    text: str
    fallback: str
    run: str = ""  # "<schedule id>@<due time>": the run this turn is (bot/schedules/runs.py)
    as_written: bool = False  # a schedule of kind text: `fallback` is sent as it is, no model call
    tools: bool = True


MediaKind = Literal["voice", "audio", "image", "document"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a message, already kept under the chat's `media/` folder (memory/media.py).
    Channels download it before publishing, so a journaled message never depends on a platform URL."""

    kind: MediaKind
    name: str  # the file name as sent (or made up: voice.ogg), for the user's eyes only
    mime: str
    size: int  # bytes on disk
    path: str  # relative to the chat's folder: "media/<file>"
    duration: float | None = None  # seconds, for voice and audio when the platform says


@dataclass(frozen=True, slots=True)
class ClientTurn:
    """What an API client (the OpenAI-compatible endpoint, channels/http/openai_api.py) asks of one turn
    only. `system` goes under the owner's instructions and is never saved; `model` is a litellm model
    string the owner allows (TUSK_MODELS); `max_tokens` bounds the reply within the reply reserve;
    `temperature` is sent as given;
    `regenerate` answers the session's last user message again, without that exchange in the prompt,
    and saves nothing. How the turn went comes back as its `TurnResult`."""

    system: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None  # the client's sampling temperature, sent to the model as given (0-2)
    regenerate: bool = False


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended: what its publish future resolves with once it is done (bot/bus.py), for whoever
    waits on it (the HTTP API, the OpenAI endpoint). `outcome`: ok, stopped, spend_limit, llm_unavailable,
    llm_error, too_long or crash; the tokens its model calls took. The replies went out through the channel."""

    outcome: str = "ok"
    tokens_in: int = 0
    tokens_out: int = 0


@dataclass(frozen=True, slots=True)
class ReplyRef:
    """Where on its platform the replies to a message go, beyond its chat key: plain, serialisable fields set
    by the adapter's `to_inbound`, read by the same platform's `send` (and drafts, voice). Each platform
    uses what it has: `message`, the platform's id of the message to answer (quoted in Telegram and Discord
    groups; Slack: its ts, which carries the "thinking" reaction); `thread`, the Slack thread it belongs in;
    `interaction`, a command's way back (Discord: the interaction's token; Slack: its response_url), with
    `ephemeral` when only the asker sees the answer; `team`, the asker's Slack team (streamed replies);
    `quote=False` where `message` only names the message answered and replies do not quote it (Discord's
    DMs, whose replies' nonces are made from it)."""

    message: str | None = None
    thread: str | None = None
    interaction: str | None = None
    ephemeral: bool = False
    team: str | None = None
    quote: bool = True


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A user's message, already gated by the channel (allow-list, mentions), or a turn Tusk
    starts itself (`injected` set: a reminder, a schedule's run, a check-in, a task result)."""

    key: ChatKey
    text: str
    sender_id: str
    sender_name: str = ""
    is_group: bool = False
    sender_is_admin: bool = False  # may erase this chat's memory in a group (/forget, /memory undo)
    ts: float = field(default_factory=time.time)
    id: int = field(default_factory=lambda: next(_ids))  # process-unique, ties replies to it
    injected: Injected | None = None
    addressed: bool = True  # False: group chatter not for the bot, kept only if the chat listens (/listen)
    attachments: tuple[Attachment, ...] = ()
    client: ClientTurn | None = None  # an API client's wishes for this turn only (the OpenAI endpoint)
    ref: ReplyRef | None = None  # where its replies go on the platform (None: the chat key alone says)
    idempotency_key: str | None = None  # an HTTP request's Idempotency-Key: a repeat gets the first one's answer


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """Text for a chat; `reply_to` is the `InboundMessage.id` it answers, if any, and `ref` where that
    message's replies go on its platform (`answer` sets both).

    `verbatim`: Tusk's own words (a command's answer, a pairing code, a refusal, a limit's sentence), which
    every channel shows exactly as written: line by line, `3.` still 3, `<persona>` still there. Otherwise
    the text is the model's Markdown, which each channel renders in its own way."""

    key: ChatKey
    text: str
    reply_to: int | None = None
    verbatim: bool = False
    ref: ReplyRef | None = None

    @classmethod
    def answer(cls, msg: InboundMessage, text: str, verbatim: bool = False) -> OutboundMessage:
        """`text` in answer to `msg`: its chat, tied to it, where its replies go."""
        return cls(msg.key, text, reply_to=msg.id, verbatim=verbatim, ref=msg.ref)


@dataclass(frozen=True, slots=True)
class SpokenAudio:
    """A reply read out and encoded (bot/speech/encode.py): OGG/Opus bytes, mono 48 kHz, its length in
    seconds, and its waveform (up to 256 loudness bytes, 0-255, evenly over it) for players that draw one."""

    data: bytes
    duration: float
    waveform: bytes
    mime: str = "audio/ogg"


@dataclass(frozen=True, slots=True)
class OutboundVoice:
    """A reply as the platform's voice message. `caption`: the reply's text shown on it (set only where the
    channel said it fits, `voice_caption`); otherwise the text follows as an `OutboundMessage`."""

    key: ChatKey
    audio: SpokenAudio
    caption: str | None = None
    reply_to: int | None = None
    ref: ReplyRef | None = None
