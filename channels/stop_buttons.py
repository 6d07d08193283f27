"""The Stop buttons showing now under replies being written (/stop: bot/stop.py), for the channels that show them.

A draft adds its button's place when it shows one and removes it when the button goes (the reply is
finished); a press looks its place up to find the chat whose running reply it stops. A press on a place
not here (a reply already finished, a button left by a crash) finds nothing: there is nothing to stop.

    Telegram   (chat id, message id) of a group message with the inline keyboard; (chat id, -draft id) of
               a private draft sent with can_stop (channels/telegram/stream.py)
    Discord    (channel id, message id) of a message with the button component (channels/discord_bot/stream.py)
"""

from __future__ import annotations

from bot.events import ChatKey


class StopButtons:
    def __init__(self) -> None:
        self._shown: dict[tuple[int, int], ChatKey] = {}

    def add(self, place: int, ref: int, key: ChatKey) -> None:
        self._shown[(place, ref)] = key

    def remove(self, place: int, ref: int) -> None:
        self._shown.pop((place, ref), None)

    def find(self, place: int, ref: int) -> ChatKey | None:
        return self._shown.get((place, ref))
