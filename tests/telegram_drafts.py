"""Tusk on the fake Telegram (the `tg` fixture) with its drafts paced fast, for the tests of replies shown while
they are written (tests/test_stream_telegram.py) and of stopping them (tests/test_stop_telegram.py).

    @pytest.fixture
    async def start(make_settings, tg, monkeypatch):
        async with drafting_tusks(make_settings, tg, monkeypatch, 0.2) as start:
            yield start

    app = await start(TELEGRAM_ALLOW_FROM="7")      # more env as keywords
    saved(app, "42")[-1].content                    # what the chat keeps, as on disk
    sent(tg, "sendMessage")                         # what the bot sent, by Bot API method
"""

import contextlib

from bot.app import TuskApp
from channels.telegram import stream as telegram_stream
from tests import kept


@contextlib.asynccontextmanager
async def drafting_tusks(make_settings, tg, monkeypatch, interval: float, http: bool = False):
    """A `start(**env)` that starts a Tusk on the fake Telegram `tg` whose drafts and edits go every `interval`
    seconds in private chats and groups alike (Telegram's own pace: 1 s and 3 s), with its HTTP channel when
    `http`; all are stopped at the end."""
    monkeypatch.setattr(telegram_stream, "PRIVATE_INTERVAL", interval)
    monkeypatch.setattr(telegram_stream, "GROUP_INTERVAL", interval)
    async with contextlib.AsyncExitStack() as stack:
        async def start(**env):
            app = TuskApp(make_settings(TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE=tg.base_url, **env))
            if http:
                app.add_http()
            app.add_platforms()
            await stack.enter_async_context(app)
            return app

        yield start


def saved(app, chat: str):
    """The Telegram chat's unconsolidated messages, read back from its files."""
    return kept.on_disk(app, "telegram", chat).unconsolidated


def sent(tg, method: str) -> list[dict]:
    """What the bot sent through the Bot API `method` (sendMessage, editMessageText, ...), in order."""
    return [m for m in tg.sent if m["method"] == method]
