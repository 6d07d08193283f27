"""What a chat command gets and gives, shared by the dispatcher (bot/commands/__init__.py), the member
erasure (bot/commands/erasure.py) and the components that add commands or own things a chat keeps
(bot/schedules/, bot/tools/tasks.py, bot/inbox.py).

    CommandContext   the chat a command runs in: its key, the chat as loaded, the store, sender, rights
    Command          a name, a one-line summary for /help, and the function that answers
    Owned, Holder    one thing /forget lists and deletes; a component that keeps such things for a chat
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.events import ChatKey
from memory.chat_settings import ChatSettings
from memory.session import Session
from store.base import Chat, ChatHandle, ChatStore
from store.errors import StoreError

if TYPE_CHECKING:
    from bot.consolidation import Consolidator


@dataclass(frozen=True, slots=True)
class CommandContext:
    key: ChatKey
    chat: Chat  # as the turn loaded it (store/base.py)
    chats: ChatStore
    model: str
    consolidator: Consolidator | None = None
    fixed_tokens: int = 0  # system prompt and tools, as the next turn would send them
    may_erase: bool = True  # False for non-admins in groups: /forget and /memory undo are refused
    model_notes: tuple[str, ...] = ()  # what the server taught us about the model (bot/llm/learned.py)
    tool_status: tuple[str, ...] = ()  # lines about this chat's MCP servers, for /status
    sender_id: str = ""  # who sent the command (platform user id), for /forget me
    sender_name: str = ""
    is_group: bool = False

    @property
    def session(self) -> Session:
        return self.chat.session

    @property
    def handle(self) -> ChatHandle:
        """Everything the chat keeps, for what the loaded chat does not hold (history, versions, media, ...)."""
        return self.chats.handle(self.key)

    @property
    def prefs(self) -> ChatSettings:
        return self.chat.prefs


CommandFn = Callable[[CommandContext, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str
    fn: CommandFn


def counted(n: int, word: str, words: str | None = None) -> str:
    """`1 history entry`, `2 history entries`: a count with its noun in the number it takes."""
    return f"{n:,} {word if n == 1 else words or word + 's'}"


@dataclass(frozen=True, slots=True)
class Owned:
    """One thing /forget lists (`label`) and deletes (`delete`)."""

    label: str
    delete: Callable[[], None | Awaitable[None]]  # a store's deletions are awaited
    quiet: bool = False  # deleted with the rest, but alone it is not "something kept" (journaled commands)


async def delete_each(items: Iterable[Owned], done: str) -> list[str]:
    """Delete every item, a report line each (`- <done> <label>` or why it failed): one failure stops none."""
    report = []
    for item in items:
        try:
            if inspect.isawaitable(result := item.delete()):
                await result
            report.append(f"- {done} {item.label}")
        except (OSError, LookupError, StoreError) as exc:
            report.append(f"- FAILED to {'delete' if done == 'deleted' else 'remove'} {item.label}: "
                          f"{getattr(exc, 'strerror', None) or exc}")
    return report


class Holder(Protocol):
    """A component that keeps something for a chat outside its folder (reminders, running tasks)."""

    def owned(self, key: ChatKey) -> list[Owned]: ...


ADMINS_ONLY = "In a group, only its administrators can {what}."
