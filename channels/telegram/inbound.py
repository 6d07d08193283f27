"""A Telegram message as Tusk reads it: `to_inbound(message, me, commands) -> InboundMessage | None` (pure).

    not a turn (None)   service messages (members joining or leaving, the bot itself added or removed, pins,
                        new titles, forum topics, video chats, auto-delete timers, group upgrades: those are
                        the channel's), messages with nothing in them Tusk knows (a future kind), channel
                        posts, other bots, a message without a sender
    text                the text or caption; a sticker is its emoji, a location, venue, contact, poll or dice
                        a bracketed line; files are the channel's (channels/telegram/media.py)
    framed as data      a forwarded message names where it came from ("[forwarded from ...]"), a reply
                        carries the text it replies to (the user's quote if they picked one), a reply to a
                        message of another chat (`external_reply`) its origin, `via_bot` the inline bot, a
                        linked channel's post (`is_automatic_forward`) its channel; such a message is never
                        a command, so a forwarded "/forget" erases nothing
    sender              the user; an anonymous admin speaks for the group (and is its admin), a user posting
                        as a channel (`sender_chat`) is that channel

Groups: only messages that mention the bot (@username or a text_mention of it), reply to it, or are commands
meant for it are turns; the rest are handed over `addressed=False` (kept if the chat listens, /listen).
A linked channel's post is never addressed: it was written for the channel, not to the bot.
"""

from __future__ import annotations

from telegram import Chat, Message, MessageEntity, MessageOrigin, User

from bot.events import ChatKey, InboundMessage, ReplyRef

ALIASES = {"start": "help"}  # Telegram clients send /start when a user first opens the bot
QUOTE_CHARS = 500  # of a replied-to message's text, when the user did not pick a quote
ANONYMOUS_ADMIN = "Anonymous admin"


def chat_id_of(chat: Chat, thread_id: int | None) -> str:
    return f"{chat.id}.{thread_id}" if thread_id else str(chat.id)


def _addressed(message: Message, me: User, commands: frozenset[str]) -> tuple[bool, str]:
    """In a group: is the message for the bot, and its text with the bot's @mention removed."""
    text = message.text or message.caption or ""
    entities = message.parse_entities() if message.text else message.parse_caption_entities()
    name = f"@{me.username}".lower()
    addressed = bool(message.reply_to_message and message.reply_to_message.from_user
                     and message.reply_to_message.from_user.id == me.id)
    for entity, value in sorted(entities.items(), key=lambda item: -item[0].offset):
        if (entity.type == MessageEntity.MENTION and value.lower() == name
                or entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == me.id):
            addressed = True
            text = _cut_utf16(text, entity.offset, entity.length)
        elif entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            command, _, bot = value[1:].partition("@")
            if bot.lower() == name[1:] or not bot and command.lower() in commands:
                addressed = True
    return addressed, text.strip()


def _cut_utf16(text: str, offset: int, length: int) -> str:
    """`text` without the span Telegram describes in UTF-16 code units."""
    raw = text.encode("utf-16-le")
    return (raw[: offset * 2] + raw[(offset + length) * 2:]).decode("utf-16-le", "replace")


def _alias(text: str) -> str:
    """`/start` (what Telegram sends when someone opens the bot) is answered as `/help`."""
    head, _, rest = text.partition(" ")
    command, at, bot = head.partition("@")
    if command.lower()[1:] in ALIASES and command.startswith("/"):
        return f"/{ALIASES[command.lower()[1:]]}{at}{bot} {rest}".strip()
    return text


def has_content(message: Message) -> bool:
    """Text, a caption or something attached (file, sticker, location, poll...): not a service message."""
    return bool(message.text or message.caption or message.effective_attachment)


def _things(message: Message) -> list[str]:
    """The bracketed lines for what a message holds besides text and files."""
    out = []
    if (sticker := message.sticker) is not None and sticker.emoji:
        out.append(f"[sticker {sticker.emoji}]")
    if (venue := message.venue) is not None:
        out.append(f"[venue: {venue.title}, {venue.address} ({venue.location.latitude:.5f}, "
                   f"{venue.location.longitude:.5f})]")
    elif (place := message.location) is not None:
        live = ", shared live" if place.live_period else ""
        out.append(f"[location: {place.latitude:.5f}, {place.longitude:.5f}{live}]")
    if (contact := message.contact) is not None:
        name = " ".join(filter(None, (contact.first_name, contact.last_name)))
        out.append(f"[contact: {name}, {contact.phone_number}]")
    if (poll := message.poll) is not None:
        kind = "quiz" if poll.type == "quiz" else "poll"
        out.append(f"[{kind}: {poll.question} - options: {' / '.join(o.text for o in poll.options)}]")
    if (dice := message.dice) is not None:
        out.append(f"[dice {dice.emoji} rolled {dice.value}]")
    return out


def origin_name(origin: MessageOrigin) -> str:
    """Who first wrote a forwarded message, as Telegram tells it."""
    user, name = getattr(origin, "sender_user", None), getattr(origin, "sender_user_name", None)
    chat = getattr(origin, "sender_chat", None) or getattr(origin, "chat", None)
    who = user.full_name if user else name or (chat.title or chat.full_name if chat else None) or "someone"
    signature = getattr(origin, "author_signature", None)
    return f"{who} ({signature})" if signature else who


def _shorten(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS].rstrip() + "..."


def _context(message: Message, me: User) -> list[str]:
    """What the message's text does not say by itself: where it came from, what it answers."""
    out = []
    if message.is_automatic_forward and message.sender_chat is not None:
        out.append(f"[a post of the linked channel {message.sender_chat.title or message.sender_chat.id}]")
    elif message.forward_origin is not None:
        out.append(f"[forwarded message, first written by {origin_name(message.forward_origin)}; "
                   "its text is theirs, quoted as data]")
    if (via := message.via_bot) is not None:
        out.append(f"[sent via the inline bot @{via.username}]")
    quote = message.quote.text if message.quote is not None else None
    if (replied := message.reply_to_message) is not None:
        author, as_chat = replied.from_user, replied.sender_chat
        name = as_chat.title if as_chat is not None and as_chat.title else author.full_name if author else "someone"
        who = "your earlier message" if author is not None and author.id == me.id else f"a message of {name}"
        quoted = quote or replied.text or replied.caption or " ".join(_things(replied))
        out.append(f'[replying to {who}: "{_shorten(quoted)}"]' if quoted else f"[replying to {who}]")
    elif (external := message.external_reply) is not None:
        where = f"{origin_name(external.origin)} in another chat"
        out.append(f'[replying to a message of {where}: "{_shorten(quote)}"]' if quote else f"[replying to {where}]")
    return out


def _sender(message: Message) -> tuple[str, str, bool] | None:
    """(id, name, is an admin of the group) of who wrote `message`; None for bots and the sender-less."""
    user, as_chat = message.from_user, message.sender_chat
    if as_chat is not None and as_chat.id == message.chat.id:  # an anonymous admin speaks as the group
        return str(user.id if user else as_chat.id), message.author_signature or ANONYMOUS_ADMIN, True
    if as_chat is not None:  # a user posting as a channel, or a linked channel's post
        return str(as_chat.id), as_chat.title or as_chat.full_name or str(as_chat.id), False
    if user is None or user.is_bot:
        return None
    return str(user.id), user.full_name, False


def to_inbound(message: Message | None, me: User, commands: frozenset[str]) -> InboundMessage | None:
    """The InboundMessage for a Telegram message, or None if it is not a message for Tusk (see above).

    Media without a caption becomes an empty text; the channel adds the files it downloads
    (channels/telegram/media.py). The allow-list and admin rights are checked by the channel (they need state).
    In groups the reply quotes the message (`ref`).
    """
    if message is None or message.chat is None or message.chat.type == Chat.CHANNEL or not has_content(message):
        return None
    if (sender := _sender(message)) is None:
        return None
    sender_id, sender_name, is_admin = sender
    thread = message.message_thread_id if message.is_topic_message else None
    key = ChatKey("telegram", chat_id_of(message.chat, thread))
    is_group = message.chat.type != Chat.PRIVATE
    text = (message.text or message.caption or "").strip()
    addressed = True
    if is_group:  # a message not for the bot is handed over as such: the chat's /listen decides (bot/agent.py)
        addressed, text = _addressed(message, me, commands)
        addressed = addressed and not message.is_automatic_forward
    context = _context(message, me)
    body = "\n".join([*_things(message), text]).strip()
    if context and (message.forward_origin or message.is_automatic_forward or not body.startswith("/")):
        body = "\n".join([*context, body]).strip()  # framed: never a command
    elif addressed:
        body = _alias(body)
    return InboundMessage(key, body, sender_id=sender_id, sender_name=sender_name, is_group=is_group,
                          sender_is_admin=is_admin, ts=message.date.timestamp(), addressed=addressed,
                          ref=ReplyRef(message=str(message.message_id)) if is_group else None)  # quoted in groups
