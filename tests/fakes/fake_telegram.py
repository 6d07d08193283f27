"""A real Telegram Bot API server on 127.0.0.1, for tests through real python-telegram-bot.

    async with FakeTelegram(token="123:ABC", username="tusk_bot") as tg:
        bot = telegram.Bot(tg.token, base_url=tg.base_url + "/bot", base_file_url=tg.base_url + "/file/bot")
        tg.push_message(42, "/start")            # an Update for getUpdates (long polling, offset, allowed_updates)
        await tg.wait_for(lambda: tg.sent)
        tg.sent      # accepted sendMessage/editMessageText params, decoded, plus "method", "message_id", "plain",
                     # and "at" (time.monotonic() when it was taken)
        tg.drafts    # accepted sendMessageDraft params (private chats only, draft_id non-zero), with "plain", "at"
        tg.voices    # accepted sendVoice params: "audio" (the file's bytes), "ogg" (its OggOpus, tests/fakes/
                     # voice_check.py), "caption_plain", "message_id", "at" (checked as Telegram checks them)
        tg.calls     # (method, params) for every call, rejected ones included
        tg.fail_next("sendMessage", status=429, retry_after=1)
        tg.lose_answer_next("sendMessage")   # carried out, then the connection drops before the answer
        tg.push_message(42, None, voice=b"OggS...", caption="listen")   # media: bool for made-up bytes, or the bytes
        tg.downloads  # file paths fetched from /file/bot<token>/<path> (after getFile), in order
        tg.push_update({"message": {...}})   # any update JSON as the Bot API documents it (real shapes, malformed
                                             # ones too); its chats, users and messages are remembered
        tg.migrate(-4001, -1004001)  # the group became a supergroup: both service messages are pushed, and sends
                                     # to the old id fail as Telegram's do (400, parameters.migrate_to_chat_id)
        tg.markup(chat_id, message_id)   # the inline keyboard a bot message carries now (None: none)
        tg.press(chat_id, message_id, "stop", user_id=7)   # a callback_query for one of its buttons
        tg.answers   # accepted answerCallbackQuery params (each query may be answered once)
        tg.stop_draft(chat_id, draft_id)   # the user pressed the stop button of a draft sent with can_stop:
                                           # a stopped_message_generation update

Inline keyboards are checked as Telegram checks them (rows of buttons, each with a text and exactly one
action; callback_data 1-64 bytes). editMessageText without `reply_markup` takes the keyboard away, as
Telegram's does; an edit that changes neither text nor keyboard is "message is not modified".

Files are served as Telegram does: getFile answers a `file_path` (refused with "file is too big" over
20 MB, declared or actual), and `/file/bot<token>/<file_path>` streams the bytes.

Requests arrive as PTB sends them: form-encoded (multipart when uploading), every non-string value
JSON-encoded, so `chat_id` is "42" and `reply_parameters` a JSON string; JSON bodies work too.
HTML text is checked the way Telegram checks it (allowed tags, nesting, entities, 4096 UTF-16 units);
text without a parse mode is shown as sent ("plain" is the text itself: nothing in it is markup); an
unknown parse mode is refused as Telegram refuses it; Markdown and MarkdownV2 are passed through unchecked
(Tusk sends neither). One bot instance polls: a getUpdates that comes while another waits ends the waiting
one with Telegram's 409 "Conflict: terminated by other getUpdates request" (`conflicts` counts them).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import html
import itertools
import json
import re
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.loopback import serve, wait_until
from tests.fakes.voice_check import ogg_opus

MAX_TEXT = 4096
_ASKER: contextvars.ContextVar[web.Request] = contextvars.ContextVar("fake_telegram_asker")  # the request handled
_STRING_PARAMS = {"text", "caption", "parse_mode", "url", "secret_token", "action", "language_code",
                  "inline_message_id", "callback_query_id", "business_connection_id", "message_effect_id"}
_DEFAULT_EXCLUDED = {"chat_member", "message_reaction", "message_reaction_count"}  # unless asked for by name
_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "pre", "a", "tg-spoiler",
         "blockquote", "span", "tg-emoji"}
_TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)((?:\s+[\w-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>\"']+))?)*)\s*>")
_ATTR = re.compile(r"([\w-]+)(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>\"']+))?")
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot)|#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_COMMAND = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![\w/@])")
_MENTION = re.compile(r"(?<![\w@/])@[A-Za-z0-9_]{3,32}")
_ADMIN = {"can_manage_chat": True, "can_delete_messages": True, "can_invite_users": True} | dict.fromkeys((
    "can_be_edited", "is_anonymous", "can_manage_video_chats", "can_restrict_members", "can_promote_members",
    "can_change_info", "can_post_stories", "can_edit_stories", "can_delete_stories"), False)
_MEMBER_FIELDS = {"creator": {"is_anonymous": False}, "administrator": _ADMIN}  # PTB needs these; "member" none
_BUTTON_ACTIONS = {"url", "callback_data", "web_app", "login_url", "switch_inline_query",
                   "switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "copy_text", "callback_game",
                   "pay"}


@dataclass
class ApiError(Exception):
    status: int
    description: str
    retry_after: int | None = None
    migrate_to: int | None = None

    def body(self) -> dict[str, Any]:
        extra = {"parameters": {"retry_after": self.retry_after}} if self.retry_after is not None else {}
        if self.migrate_to is not None:
            extra = {"parameters": {"migrate_to_chat_id": self.migrate_to}}
        return {"ok": False, "error_code": self.status, "description": self.description, **extra}


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse_html(text: str) -> str:
    """The visible text of Telegram HTML; ValueError in Telegram's words if Telegram would refuse it."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        at = f"at byte offset {len(text[:i].encode())}"
        if text[i] == "<":
            m = _TAG.match(text, i)
            if not m:
                raise ValueError(f"Unsupported start tag {at}")
            closing, name = m[1], m[2].lower()
            if closing:
                if not stack:
                    raise ValueError(f"Unexpected end tag {at}")
                if stack[-1] != name:
                    raise ValueError(f'Unmatched end tag {at}, expected "</{stack[-1]}>", found "</{name}>"')
                stack.pop()
            else:
                if name not in _TAGS:
                    raise ValueError(f'Unsupported start tag "{name}" {at}')
                attrs = {k.lower(): html.unescape((v or "").strip("\"'")) for k, v in _ATTR.findall(m[3])}
                if name == "span" and attrs.get("class") != "tg-spoiler":
                    raise ValueError(f'Tag "span" must have class "tg-spoiler" {at}')
                stack.append(name)
            i = m.end()
        elif text[i] == "&":
            m = _ENTITY.match(text, i)
            if not m:
                raise ValueError(f"Unsupported HTML entity {at}")
            code = ord(_NAMED[m[1]]) if m[1] else int(m[2]) if m[2] else int(m[3], 16)
            if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"Invalid character code {at}")
            out.append(chr(code))
            i = m.end()
        else:
            out.append(text[i])
            i += 1
    if stack:
        raise ValueError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def _entities(text: str) -> list[dict[str, Any]]:
    found = [("bot_command", m) for m in _COMMAND.finditer(text)] + [("mention", m) for m in _MENTION.finditer(text)]
    found.sort(key=lambda kind_match: kind_match[1].start())
    return [{"type": kind, "offset": utf16_len(text[:m.start()]), "length": utf16_len(m[0])} for kind, m in found]


NOT_MODIFIED = ("Bad Request: message is not modified: specified new message content and reply markup are exactly "
                "the same as a current content and reply markup of the message")
DOWNLOAD_LIMIT = 20 * 1024 * 1024  # getFile refuses larger files ("file is too big")
VOICE_LIMIT = 50 * 1024 * 1024  # sendVoice takes files up to this
CAPTION_LIMIT = 1024
_FOLDERS = {"photo": ("photos", ".jpg"), "sticker": ("stickers", ".webp"), "voice": ("voice", ".oga"),
            "audio": ("music", ".mp3"), "video_note": ("video_notes", ".mp4"), "document": ("documents", "")}


@dataclass
class FakeFile:
    file_id: str
    unique_id: str
    data: bytes
    size: int  # as declared in the message (may differ from len(data), to test both checks)
    path: str


def _shape(kind: str, file: dict[str, Any], name: str | None, mime: str | None) -> Any:
    """A media object as the Bot API describes it, around `file` (file_id, file_unique_id, file_size)."""
    return {
        "sticker": {**file, "type": "regular", "width": 512, "height": 512, "is_animated": False,
                    "is_video": False, "emoji": "\N{SLIGHTLY SMILING FACE}"},
        "voice": {**file, "duration": 3, "mime_type": mime or "audio/ogg"},
        "audio": {**file, "duration": 95, "mime_type": mime or "audio/mpeg", "file_name": name or "song.mp3",
                  "performer": "Band", "title": "Song"},
        "video_note": {**file, "duration": 7, "length": 240},
        "document": {**file, "file_name": name or "notes.txt", "mime_type": mime or "text/plain"},
    }[kind]


def _decode(key: str, value: Any) -> Any:
    """PTB JSON-encodes every non-string parameter; undo that, leaving free text alone."""
    if not isinstance(value, str) or key in _STRING_PARAMS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _kind(update: dict[str, Any]) -> str | None:
    return next((key for key in update if key != "update_id"), None)


class FakeTelegram:
    def __init__(self, token: str = "123:ABC", username: str = "tusk_bot") -> None:
        self.token, self.username = token, username
        self.bot_id = int(token.split(":")[0])
        self.bot_user = {"id": self.bot_id, "is_bot": True, "first_name": "Tusk", "username": username}
        self.sent: list[dict[str, Any]] = []
        self.drafts: list[dict[str, Any]] = []
        self.voices: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.commands: list[dict[str, Any]] = []
        self.members: dict[tuple[int, int], str] = {}
        self.webhook: dict[str, Any] | None = None
        self.base_url = ""
        self._queue: list[dict[str, Any]] = []
        self._allowed: set[str] = set()
        self._wake = asyncio.Event()
        self._polls = 0  # getUpdates requests so far: only the latest may wait
        self.conflicts = 0  # getUpdates ended by a newer one (two pollers: Telegram's 409)
        self._closing = False
        self._failures: defaultdict[str, deque[ApiError]] = defaultdict(deque)
        self._lost: defaultdict[str, int] = defaultdict(int)  # method -> calls to carry out, then drop unanswered
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._chats: dict[int, dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._raw: dict[tuple[int, int], tuple[str, str | None]] = {}  # bot messages' text as sent
        self.upgraded: dict[int, int] = {}  # group id -> its supergroup's id (migrate)
        self.files: dict[str, FakeFile] = {}  # file_id -> file
        self.downloads: list[str] = []  # file paths fetched, in order
        self.answers: list[dict[str, Any]] = []  # accepted answerCallbackQuery params
        self._markups: dict[tuple[int, int], dict[str, Any]] = {}  # bot messages' inline keyboards
        self._queries: dict[str, bool] = {}  # callback query id -> answered yet
        self._stoppable: set[tuple[int, int]] = set()  # (chat id, draft id) of drafts sent with can_stop
        self._runner: web.AppRunner | None = None
        methods = {"getMe": self._get_me, "getUpdates": self._get_updates, "sendMessage": self._send_message,
                   "editMessageText": self._edit_message_text, "sendChatAction": self._true,
                   "setMyCommands": self._set_my_commands, "deleteMyCommands": self._set_my_commands,  # no list: []
                   "getMyCommands": self._get_my_commands, "setWebhook": self._set_webhook,
                   "deleteWebhook": self._delete_webhook, "getWebhookInfo": self._get_webhook_info,
                   "getChatMember": self._get_chat_member, "getFile": self._get_file,
                   "sendMessageDraft": self._send_message_draft, "deleteMessage": self._delete_message,
                   "editMessageReplyMarkup": self._edit_message_reply_markup,
                   "answerCallbackQuery": self._answer_callback_query,
                   "sendVoice": self._send_voice}
        self._methods = {name.lower(): (name, handler) for name, handler in methods.items()}

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner, self.base_url = await serve(app)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True  # long polls still waiting answer [] now, so cleanup does not wait for them
        self._wake.set()
        assert self._runner is not None
        await self._runner.cleanup()

    def fail_next(self, method: str, status: int = 400, description: str | None = None,
                  retry_after: int | None = None) -> None:
        """The next call of `method` fails with this error (FIFO per method)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        default = {400: "Bad Request", 403: "Forbidden: bot was blocked by the user",
                   429: f"Too Many Requests: retry after {retry_after}"}.get(status, f"Error {status}")
        self._failures[method.lower()].append(ApiError(status, description or default, retry_after))

    def lose_answer_next(self, method: str) -> None:
        """The next call of `method` is carried out, but its connection drops before the answer (a network
        failure after the request arrived): the client cannot know it worked."""
        self._lost[method.lower()] += 1

    def push_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue a raw update for getUpdates (an update_id is added if missing). A well-formed message in it
        is remembered (its chat, sender, and the message for replies to quote), as sent ones are."""
        update.setdefault("update_id", next(self._update_ids))
        for value in update.values():
            self._remember(value)
        if isinstance(query := update.get("callback_query"), dict) and isinstance(query.get("id"), str):
            self._queries.setdefault(query["id"], False)  # Telegram waits for its answer
        self._queue.append(update)
        self._wake.set()
        self._wake = asyncio.Event()
        return update

    def push_message(self, chat_id: int = 42, text: str | None = "hi", *, user_id: int = 7,
                     username: str | None = "alice", chat_type: str = "private", reply_to_bot: bool = False,
                     thread_id: int | None = None, is_bot: bool = False, caption: str | None = None,
                     sticker: bool = False, voice: bool | bytes = False, document: bool | bytes = False,
                     photo: bool | bytes = False, audio: bool | bytes = False, video_note: bool | bytes = False,
                     file_name: str | None = None, mime_type: str | None = None, file_size: int | None = None,
                     unique_id: str | None = None, media_group_id: str | None = None,
                     edited: bool = False) -> dict[str, Any]:
        """Queue an Update with a message as Telegram would build it; media messages carry `caption`, not `text`.
        A media flag may be the file's bytes; `file_size` is the size declared (default: the bytes' length),
        `unique_id` makes two messages carry the same file (as a forward does)."""
        user = {"id": user_id, "is_bot": is_bot, "first_name": (username or "user").capitalize()}
        user |= {"username": username} if username else {}
        self._users[user_id] = user
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat |= {k: v for k, v in user.items() if k in ("first_name", "username")}
        else:
            chat["title"] = f"Chat {chat_id}"
            chat |= {"is_forum": True} if thread_id else {}
        self._chats[chat_id] = chat
        now = int(time.time())
        msg: dict[str, Any] = {"message_id": next(self._message_ids), "date": now, "chat": chat, "from": user}
        if thread_id is not None:
            msg |= {"message_thread_id": thread_id, "is_topic_message": True}
        if reply_to_bot:
            msg["reply_to_message"] = self._last_bot_message(chat_id)
        kinds = {"sticker": sticker, "voice": voice, "document": document, "photo": photo, "audio": audio,
                 "video_note": video_note}
        media = {kind: self._media(msg["message_id"], kind, wanted, file_name, mime_type, file_size, unique_id)
                 for kind, wanted in kinds.items() if wanted is not False}
        if media_group_id is not None:
            msg["media_group_id"] = media_group_id
        if media:
            msg |= media
            if caption is not None:
                msg |= {"caption": caption, **({"caption_entities": ents} if (ents := _entities(caption)) else {})}
        elif text is not None:
            msg |= {"text": text, **({"entities": ents} if (ents := _entities(text)) else {})}
        if edited:
            msg["edit_date"] = now
        self._messages[(chat_id, msg["message_id"])] = msg
        return self.push_update({"edited_message" if edited else "message": msg})

    def _remember(self, msg: Any) -> None:
        if not isinstance(msg, dict) or not isinstance(msg.get("chat"), dict) or "message_id" not in msg:
            return
        chat = msg["chat"]
        if isinstance(chat.get("id"), int):
            self._chats.setdefault(chat["id"], chat)
            if isinstance(msg["message_id"], int):
                self._messages.setdefault((chat["id"], msg["message_id"]), msg)
        if isinstance(user := msg.get("from"), dict) and isinstance(user.get("id"), int):
            self._users.setdefault(user["id"], user)

    def markup(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        """The inline keyboard the bot's message carries now."""
        return self._markups.get((chat_id, message_id))

    def press(self, chat_id: int, message_id: int, data: str, *, user_id: int = 7,
              username: str | None = "alice") -> dict[str, Any]:
        """A user presses the button with `data` under the bot's message: a callback_query update, as Telegram
        sends it (the message as it is now). The button must be there."""
        markup = self._markups.get((chat_id, message_id)) or {}
        if not any(b.get("callback_data") == data for row in markup.get("inline_keyboard", []) for b in row):
            raise AssertionError(f"message {message_id} in {chat_id} has no button {data!r}: {markup}")
        user = self._users.get(user_id) or {"id": user_id, "is_bot": False,
                                            "first_name": (username or "user").capitalize(),
                                            **({"username": username} if username else {})}
        self._users[user_id] = user
        query_id = str(next(self._update_ids) * 7919 + 1_000_000)
        self._queries[query_id] = False
        message = {**self._messages[(chat_id, message_id)], "reply_markup": markup}
        return self.push_update({"callback_query": {"id": query_id, "from": user, "message": message,
                                                    "chat_instance": f"instance{chat_id}", "data": data}})

    def stop_draft(self, chat_id: int, draft_id: int) -> dict[str, Any]:
        """The user pressed the stop button of a draft sent with can_stop: a stopped_message_generation update."""
        if (chat_id, draft_id) not in self._stoppable:
            raise AssertionError(f"draft {draft_id} in {chat_id} was not sent with can_stop")
        return self.push_update({"stopped_message_generation": {"chat": self._chat(chat_id), "draft_id": draft_id}})

    def next_message_id(self) -> int:
        return next(self._message_ids)

    def migrate(self, old: int, new: int, *, user_id: int = 7, title: str = "Chat") -> tuple[dict[str, Any], ...]:
        """Upgrade group `old` to supergroup `new` as Telegram does: a service message in each chat, and from now
        on calls naming `old` fail with 400 "group chat was upgraded to a supergroup chat" (ChatMigrated)."""
        user = self._users.get(user_id, {"id": user_id, "is_bot": False, "first_name": "Alice"})
        self.upgraded[old] = new
        now = int(time.time())
        group = {"id": old, "type": "group", "title": title}
        supergroup = {"id": new, "type": "supergroup", "title": title}
        self._chats[new] = supergroup
        return (self.push_update({"message": {"message_id": next(self._message_ids), "date": now, "chat": group,
                                              "from": user, "migrate_to_chat_id": new}}),
                self.push_update({"message": {"message_id": next(self._message_ids), "date": now, "chat": supergroup,
                                              "from": {"id": 1087968824, "is_bot": True, "first_name": "Group",
                                                       "username": "GroupAnonymousBot"},
                                              "sender_chat": supergroup, "migrate_from_chat_id": old}}))

    def add_file(self, kind: str, data: bytes, *, size: int | None = None, unique_id: str | None = None,
                 file_id: str | None = None) -> dict[str, Any]:
        """Keep a file to serve; returns its (file_id, file_unique_id, file_size) as messages carry them."""
        n = len(self.files)
        folder, ext = _FOLDERS[kind]
        file_id = file_id or f"file-{n}-{kind}"
        kept = FakeFile(file_id, unique_id or f"unique-{n}", data, len(data) if size is None else size,
                        f"{folder}/file_{n}{ext}")
        self.files[file_id] = kept
        return {"file_id": kept.file_id, "file_unique_id": kept.unique_id, "file_size": kept.size}

    def _media(self, message_id: int, kind: str, wanted: bool | bytes, name: str | None, mime: str | None,
               size: int | None, unique_id: str | None) -> Any:
        data = wanted if isinstance(wanted, bytes) else f"{kind} of message {message_id} ".encode() * 40
        if kind != "photo":
            return _shape(kind, self.add_file(kind, data, size=size, unique_id=unique_id), name, mime)
        small = self.add_file(kind, data[: max(1, len(data) // 8)], unique_id=unique_id and unique_id + "-small")
        big = self.add_file(kind, data, size=size, unique_id=unique_id)
        return [{**small, "width": 90, "height": 60}, {**big, "width": 800, "height": 533}]

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 5.0) -> None:
        await wait_until(predicate, timeout, lambda: f"; calls: {[m for m, _ in self.calls]}")

    def _chat(self, chat_id: object) -> dict[str, Any]:
        if not isinstance(chat_id, int):
            raise ApiError(400, "Bad Request: chat not found")
        if chat_id in self.upgraded:
            raise ApiError(400, "Bad Request: group chat was upgraded to a supergroup chat",
                           migrate_to=self.upgraded[chat_id])
        unseen = {"type": "private", "first_name": "User"} if chat_id > 0 else {"type": "supergroup", "title": "Chat"}
        return self._chats.get(chat_id, {"id": chat_id, **unseen})

    def _last_bot_message(self, chat_id: int) -> dict[str, Any]:
        for (chat, _), msg in reversed(self._messages.items()):
            if chat == chat_id and msg.get("from", {}).get("id") == self.bot_id:
                return {k: v for k, v in msg.items() if k != "reply_to_message"}
        return {"message_id": next(self._message_ids), "date": int(time.time()), "chat": self._chat(chat_id),
                "from": self.bot_user, "text": "an earlier reply"}

    def _check_text(self, params: dict[str, Any]) -> str:
        text = params.get("text")
        plain = text if isinstance(text, str) else ""
        mode = str(params.get("parse_mode") or "").lower()
        if mode not in ("", "html", "markdown", "markdownv2"):
            raise ApiError(400, "Bad Request: unsupported parse_mode")
        if plain and mode == "html":
            try:
                plain = parse_html(text)
            except ValueError as exc:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        if not plain.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(plain) > MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        return plain

    @staticmethod
    def _check_markup(params: dict[str, Any]) -> dict[str, Any] | None:
        """The inline keyboard of a call (None without one); Telegram's 400 for one it would refuse."""
        markup = params.get("reply_markup")
        if markup is None:
            return None
        rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object")
        for row in rows:
            for button in row:
                if not isinstance(button, dict) or not isinstance(button.get("text"), str) or not button["text"]:
                    raise ApiError(400, "Bad Request: can't parse inline keyboard button: Text buttons are "
                                        "unallowed in the inline keyboard")
                actions = _BUTTON_ACTIONS & set(button)
                if len(actions) != 1:
                    raise ApiError(400, "Bad Request: can't parse inline keyboard button: exactly one of the "
                                        "optional fields must be used")
                data = button.get("callback_data")
                if "callback_data" in actions and not (isinstance(data, str) and 1 <= len(data.encode()) <= 64):
                    raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
        return markup

    def _deliverable(self) -> list[dict[str, Any]]:
        wanted = self._allowed or {_kind(u) for u in self._queue} - _DEFAULT_EXCLUDED
        return [u for u in self._queue if _kind(u) in wanted]

    async def _api(self, request: web.Request) -> web.Response:
        raw: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json" and request.body_exists:
            raw |= await request.json()
        else:
            raw |= await request.post()
        params = {key: _decode(key, value) for key, value in raw.items()}
        name, handler = self._methods.get(request.match_info["method"].lower(), (request.match_info["method"], None))
        self.calls.append((name, params))
        try:
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            if self._failures[name.lower()]:
                raise self._failures[name.lower()].popleft()
            _ASKER.set(request)  # who asked (getUpdates: whether they still listen)
            result = await handler(params)
        except ApiError as err:
            return web.json_response(err.body(), status=err.status)
        if self._lost[name.lower()]:
            self._lost[name.lower()] -= 1
            assert request.transport is not None
            request.transport.abort()  # done, and no answer ever comes
            raise web.HTTPServiceUnavailable()  # never written: the connection is gone
        return web.json_response({"ok": True, "result": result})

    async def _true(self, params: dict[str, Any]) -> bool:
        return True

    async def _get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**self.bot_user, "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False, "can_connect_to_business": False, "has_main_web_app": False}

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook:
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active; "
                                "use deleteWebhook to delete the webhook first")
        offset = int(params.get("offset") or 0)
        if offset > 0:
            self._queue = [u for u in self._queue if u["update_id"] >= offset]
        elif offset < 0:
            self._queue = self._queue[offset:]
        if "allowed_updates" in params:  # absent: keep the previous setting, as Telegram does
            self._allowed = set(params["allowed_updates"])
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(params.get("timeout") or 0)
        self._polls += 1  # a newer getUpdates ends the one waiting, as Telegram does (one bot instance polls)
        mine = self._polls
        self._wake.set()
        self._wake = asyncio.Event()
        while not (ready := self._deliverable()[:limit]) and not self._closing and (left := deadline - loop.time()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), left)
            if self._polls != mine:
                gone = (transport := _ASKER.get().transport) is None or transport.is_closing()
                if gone:  # a poller that died: nobody hears the answer, and it is no conflict
                    return []
                self.conflicts += 1
                raise ApiError(409, "Conflict: terminated by other getUpdates request; make sure that only one "
                                    "bot instance is running")
        return ready

    async def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params.get("chat_id"))
        plain = self._check_text(params)
        markup = self._check_markup(params)
        msg: dict[str, Any] = {"message_id": next(self._message_ids), "date": int(time.time()), "chat": chat,
                               "from": self.bot_user, "text": plain}
        if params.get("message_thread_id"):
            msg |= {"message_thread_id": params["message_thread_id"], "is_topic_message": True}
        reply_id = (params.get("reply_parameters") or {}).get("message_id") or params.get("reply_to_message_id")
        if (original := self._messages.get((chat["id"], reply_id))) is not None:
            msg["reply_to_message"] = {k: v for k, v in original.items() if k != "reply_to_message"}
        self._messages[(chat["id"], msg["message_id"])] = msg
        self._raw[(chat["id"], msg["message_id"])] = (params["text"], params.get("parse_mode"))
        if markup is not None:
            self._markups[(chat["id"], msg["message_id"])] = markup
        self.sent.append({"method": "sendMessage", **params, "message_id": msg["message_id"], "plain": plain,
                          "at": time.monotonic()})
        return {**msg, **({"reply_markup": markup} if markup else {})}

    async def _send_voice(self, params: dict[str, Any]) -> dict[str, Any]:
        """sendVoice: an uploaded OGG file with one Opus stream (MP3/M4A are taken too by Telegram, not sent by
        Tusk), at most 50 MB; `duration` in whole seconds, as the audio plays; a caption of at most 1,024."""
        chat = self._chat(params.get("chat_id"))
        upload = params.get("voice")
        if not isinstance(upload, web.FileField):
            raise ApiError(400, "Bad Request: there is no voice in the request")
        data = upload.file.read()
        if len(data) > VOICE_LIMIT:
            raise ApiError(400, "Bad Request: file is too big")
        try:
            info = ogg_opus(data)
        except ValueError as exc:
            raise ApiError(400, f"Bad Request: wrong file type of the voice ({exc})") from None
        duration = params.get("duration")
        if duration is not None and (not isinstance(duration, int) or abs(duration - info.duration) > 1):
            raise ApiError(400, f"Bad Request: duration {duration!r} does not match the audio ({info.duration:.2f} s)")
        plain = None
        if params.get("caption"):
            plain = self._check_text({"text": params["caption"], "parse_mode": params.get("parse_mode")})
            if utf16_len(plain) > CAPTION_LIMIT:
                raise ApiError(400, "Bad Request: message caption is too long")
        msg: dict[str, Any] = {"message_id": next(self._message_ids), "date": int(time.time()), "chat": chat,
                               "from": self.bot_user, "voice": {"file_id": f"voice-{len(self.voices)}",
                                                                "file_unique_id": f"uv{len(self.voices)}",
                                                                "duration": round(info.duration),
                                                                "mime_type": "audio/ogg", "file_size": len(data)}}
        if plain is not None:
            msg["caption"] = plain
        self._messages[(chat["id"], msg["message_id"])] = msg
        self.voices.append({**params, "voice": upload.filename, "audio": data, "ogg": info, "caption_plain": plain,
                            "message_id": msg["message_id"], "at": time.monotonic()})
        return msg

    async def _send_message_draft(self, params: dict[str, Any]) -> bool:
        """Bot API 9.3: a partial message streamed to a private chat; `draft_id` non-zero, text 1-4096."""
        chat = self._chat(params.get("chat_id"))
        if chat["type"] != "private":
            raise ApiError(400, "Bad Request: drafts can be sent to private chats only")
        if not isinstance(params.get("draft_id"), int) or not params["draft_id"]:
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        if any(not isinstance(params.get(flag, False), bool) for flag in ("can_stop", "keep_on_stop")):
            raise ApiError(400, "Bad Request: can_stop and keep_on_stop must be Boolean")
        plain = self._check_text(params)
        if params.get("can_stop"):
            self._stoppable.add((chat["id"], params["draft_id"]))
        self.drafts.append({**params, "plain": plain, "at": time.monotonic()})
        return True

    async def _delete_message(self, params: dict[str, Any]) -> bool:
        chat = self._chat(params.get("chat_id"))
        if self._messages.pop((chat["id"], params.get("message_id")), None) is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        self.sent.append({"method": "deleteMessage", **params, "at": time.monotonic()})
        return True

    async def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params.get("chat_id"))
        key = (chat["id"], params.get("message_id"))
        original = self._messages.get(key)
        if original is None or original.get("from", {}).get("id") != self.bot_id:
            raise ApiError(400, "Bad Request: message to edit not found")
        plain = self._check_text(params)
        markup = self._check_markup(params)  # none given: the keyboard goes, as with Telegram
        raw = (params["text"], params.get("parse_mode"))
        if self._raw.get(key) == raw and self._markups.get(key) == markup:
            raise ApiError(400, NOT_MODIFIED)
        original |= {"text": plain, "edit_date": int(time.time())}
        self._raw[key] = raw
        self._set_markup(key, markup)
        self.sent.append({"method": "editMessageText", **params, "plain": plain, "at": time.monotonic()})
        return {**original, **({"reply_markup": markup} if markup else {})}

    def _set_markup(self, key: tuple[int, int], markup: dict[str, Any] | None) -> None:
        if markup is None:
            self._markups.pop(key, None)
        else:
            self._markups[key] = markup

    async def _edit_message_reply_markup(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params.get("chat_id"))
        key = (chat["id"], params.get("message_id"))
        original = self._messages.get(key)
        if original is None or original.get("from", {}).get("id") != self.bot_id:
            raise ApiError(400, "Bad Request: message to edit not found")
        markup = self._check_markup(params)
        if self._markups.get(key) == markup:
            raise ApiError(400, NOT_MODIFIED)
        self._set_markup(key, markup)
        self.sent.append({"method": "editMessageReplyMarkup", **params, "at": time.monotonic()})
        return {**original, **({"reply_markup": markup} if markup else {})}

    async def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = params.get("callback_query_id")
        if self._queries.get(query_id) is not False:  # unknown, or answered already
            raise ApiError(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
        if len(params.get("text") or "") > 200:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        self._queries[query_id] = True
        self.answers.append({**params, "at": time.monotonic()})
        return True

    async def _set_my_commands(self, params: dict[str, Any]) -> bool:
        self.commands = list(params.get("commands") or [])
        return True

    async def _get_my_commands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.commands

    async def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url") or ""  # an empty url removes the webhook
        self.webhook = {"url": url, "secret_token": params.get("secret_token")} if url else None
        return True

    async def _delete_webhook(self, params: dict[str, Any]) -> bool:
        self.webhook = None
        if params.get("drop_pending_updates"):
            self._queue.clear()
        return True

    async def _get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": (self.webhook or {}).get("url", ""), "has_custom_certificate": False,
                "pending_update_count": len(self._queue)}

    async def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file = self.files.get(str(params.get("file_id") or ""))
        if file is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if max(file.size, len(file.data)) > DOWNLOAD_LIMIT:
            raise ApiError(400, "Bad Request: file is too big")
        return {"file_id": file.file_id, "file_unique_id": file.unique_id, "file_size": len(file.data),
                "file_path": file.path}

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """GET /file/bot<token>/<file_path>: the bytes, streamed; 404 for a wrong token or path, as Telegram."""
        file = next((f for f in self.files.values() if f.path == request.match_info["path"]), None)
        if request.match_info["token"] != self.token or file is None:
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        self.downloads.append(file.path)
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream",
                                               "Content-Length": str(len(file.data))})
        await response.prepare(request)
        for start in range(0, len(file.data), 1 << 16):
            await response.write(file.data[start:start + (1 << 16)])
        await response.write_eof()
        return response

    async def _get_chat_member(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, user_id = self._chat(params.get("chat_id"))["id"], params.get("user_id")
        status = self.members.get((chat_id, user_id), "member")
        user = self.bot_user if user_id == self.bot_id else self._users.get(
            user_id, {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"})
        return {"status": status, "user": user, **_MEMBER_FIELDS.get(status, {})}
