"""The ledger's part of /forget and /forget me: what identifies the chat or the person is removed from its
records (bot/usage/ledger.py keeps only a salted key, so the day's and month's totals still count toward
the limits), and /forget's report says how many records that was."""

from __future__ import annotations

from collections.abc import Sequence

from bot.commands.base import CommandContext, Owned
from bot.events import ChatKey
from bot.usage.ledger_sql import SqlLedger
from memory.session import Message


class UsageRecords:
    """A `Holder` (/forget) and a `MemberHolder` (/forget me, /forget @name) over the usage ledger."""

    def __init__(self, ledger: SqlLedger) -> None:
        self.ledger = ledger

    def owned(self, key: ChatKey) -> list[Owned]:
        calls = self.ledger.totals(channel=key.channel, chat=key.chat_id).calls
        if not calls:
            return []
        return [Owned(f"{_records(calls)} of this chat (who and where removed; the totals still count toward "
                      "today's limits)", lambda: None if self.ledger.erase_chat(key.channel, key.chat_id) else None)]

    async def owned_by(self, ctx: CommandContext, messages: Sequence[Message], member_id: str) -> list[Owned]:
        key = ctx.key
        calls = self.ledger.totals(channel=key.channel, chat=key.chat_id, person=member_id).calls
        if not calls:
            return []
        return [Owned(f"{_records(calls)} of their messages (their id removed; the totals still count toward "
                      "today's limits)",
                      lambda: None if self.ledger.erase_person(key.channel, key.chat_id, member_id) else None)]


def _records(n: int) -> str:
    return f"{n} usage record{'s' if n != 1 else ''}"
