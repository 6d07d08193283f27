"""What a Tusk keeps for a chat, as tests read it: the files backend's own files (`on_disk`, `files`,
`media_path`, `media_folder`), and through the store seam (store/base.py) for tests that run on either
backend (`session`, `chat`, `append`)."""

import contextlib
from pathlib import Path

from bot.events import ChatKey
from memory.paths import ChatFiles
from memory.session import Session, load


async def session(app, channel: str, chat_id: str) -> Session:
    """The chat's session as the app's store loads it (the messages past the pointer, the pointer, the total)."""
    return (await app.chats.open(ChatKey(channel, chat_id))).session


def files(app, channel: str, chat_id: str) -> ChatFiles:
    """The chat's folder under the app's home (the files backend)."""
    return ChatFiles.locate(app.settings.home, channel, chat_id)


def on_disk(app, channel: str, chat_id: str) -> Session:
    """The chat's session read back from its files, as a restarted Tusk would load it (the files backend)."""
    return load(files(app, channel, chat_id), channel, chat_id)


async def chat(app, channel: str, chat_id: str):
    """The chat as the app's store loads it (store/base.py `Chat`: session, memory, persona, settings)."""
    return await app.chats.open(ChatKey(channel, chat_id))


async def append(app, channel: str, chat_id: str, messages) -> None:
    """Messages appended to the chat through the app's store, as a turn saves them."""
    opened = await app.chats.open(ChatKey(channel, chat_id))
    await app.chats.append(opened, messages)


def media_path(media, key: ChatKey, attachment) -> Path:
    """Where a file a `MediaStore` kept (an Attachment or a KeptFile: its `path` is "media/<name>") is on
    disk, under the chat's folder (the files backend)."""
    return media.chats.files(key).dir / attachment.path


def media_folder(media, key: ChatKey) -> Path:
    """The chat's media/ folder under a `MediaStore`'s home (the files backend)."""
    return media.chats.files(key).dir / "media"


async def put_settings(chats, key: ChatKey, settings) -> None:
    """A chat's settings replaced through a ChatStore (`app.chats`, a MediaStore's `chats`), as /listen does."""
    await chats.put_settings(await chats.open(key), settings)


def cached(app, channel: str, chat_id: str) -> bool:
    """Does the running app still hold the chat's session in its cache (the files backend's loaded sessions)?"""
    return app.chats.sessions.cached(files(app, channel, chat_id)) is not None


@contextlib.contextmanager
def ledger(settings):
    """The usage ledger of the store `settings` name (usage.sqlite, or the database's), closed after."""
    from bot import stores
    from store import prepared

    with prepared(settings.home, settings.store_url()) as store:
        book = stores.ledger(store)
        try:
            yield book
        finally:
            book.close()
