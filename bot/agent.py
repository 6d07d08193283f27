"""One chat turn: command or conversation, then save, reply, and post-turn hooks.

    handle(msg)
      command?  -> bot/commands.py answers; nothing is saved or sent to the LLM
      else      -> prompt (bot/context.py) -> LLM <-> tools (bounded loop)
                -> append the turn to the session (before replying: a reply the user has
                   seen is always on disk) -> send the reply -> hooks in the background
      LLM failed -> one clear sentence to the user; the session is left as it was

The bus guarantees one turn at a time per chat, so a turn owns its session while it runs.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot import commands, logs
from bot.context import ContextBuilder
from bot.errors import LLMError
from bot.events import ChatKey, InboundMessage, OutboundMessage
from bot.llm import LLM
from bot.tools.box import ToolBox, ToolContext
from memory.consolidate import Consolidator, pick_cut
from memory.paths import ChatFiles
from memory.session import Message, Session, SessionStore
from memory.tokens import count_text

logger = logging.getLogger(__name__)

Send = Callable[[OutboundMessage], Awaitable[None]]
PostTurnHook = Callable[[ChatKey], Awaitable[None]]

CRASH_REPLY = "Something went wrong on my side and your message was not processed. Please try again."
STEP_LIMIT_REPLY = "I stopped after {n} tool steps without finishing. Try asking for something smaller."
RUNTIME_BLOCK_TOKENS = 40  # the runtime-context line added to the user message


def user_message(msg: InboundMessage) -> Message:
    """The user message to save for `msg`, with its sender (for an injected turn: who set it up)."""
    return Message(role="user", content=msg.text, ts=msg.ts, sender_id=msg.sender_id or None,
                   sender_name=msg.sender_name or None)


class MessageTooLong(Exception):
    """The new message alone leaves no room in the window; its text is the user's answer."""


OUT_OF_ROOM_REPLY = ("The tool results filled this conversation's token budget before I could finish. "
                     "Ask again with a narrower request.")
NO_TEXT_REPLY = ("I can only read text so far (and the captions of photos and files), and that message had none. "
                 "Stickers, voice messages and attachments without a caption are beyond me.")
EMPTY_REPLY = "The model sent an empty reply. Please try again or rephrase."


@dataclass(frozen=True, slots=True)
class AgentSettings:
    model: str
    max_tool_iterations: int = 20
    tool_result_max_chars: int = 16_000
    max_message_chars: int = 32_000
    log_content: bool = False  # TUSK_LOG_CONTENT: put what people wrote (and the replies) in the log


class ChatAgent:
    def __init__(self, settings: AgentSettings, store: SessionStore, llm: LLM, tools: ToolBox,
                 context: ContextBuilder, send: Send, chat_commands: commands.Commands | None = None,
                 consolidator: Consolidator | None = None) -> None:
        self.settings = settings
        self.store = store
        self.llm = llm
        self.tools = tools
        self.context = context
        self.send = send
        self.commands = chat_commands or commands.Commands()
        self.consolidator = consolidator
        self.hooks: list[PostTurnHook] = [self.consolidate] if consolidator else []
        self._background: set[asyncio.Task[None]] = set()

    async def handle(self, msg: InboundMessage) -> None:
        stats = logs.TurnStats()
        with logs.bound(msg.key, msg.id, stats):
            if self.settings.log_content:
                logger.info("message from %s: %s", msg.sender_id, msg.text)
            runs_before = self._consolidation_runs(msg.key)
            try:
                text = await self._answer(msg)
            except MessageTooLong as exc:
                text = str(exc)
            except LLMError as exc:
                logger.warning("turn abandoned, session unchanged: %s", exc)
                text = exc.user_message
            except Exception:  # turn boundary: the user hears of it, the log gets the traceback
                logger.exception("turn crashed")
                text = CRASH_REPLY
            await self.send(OutboundMessage(msg.key, text, reply_to=msg.id))
            if self.settings.log_content:
                logger.info("reply: %s", text)
            figures = stats.fields()  # time to the reply; hooks run after it
            self._spawn(self._finish(msg.key, figures, runs_before), f"hooks {msg.key}")

    async def _finish(self, key: ChatKey, figures: dict[str, object], runs_before: int) -> None:
        """Run the post-turn hooks, then write the turn's one summary line."""
        await self._run_hooks(key)
        figures["consolidations"] = max(0, self._consolidation_runs(key) - runs_before)  # /forget resets
        if logger.isEnabledFor(logging.INFO):
            logger.info("turn done: %s", " ".join(f"{k}={v}" for k, v in figures.items()), extra=figures)

    def _consolidation_runs(self, key: ChatKey) -> int:
        if self.consolidator is None:
            return 0
        stats = self.consolidator.stats.get(ChatFiles.locate(self.store.home, key.channel, key.chat_id).dir)
        return stats.runs if stats else 0

    async def _answer(self, msg: InboundMessage) -> str:
        session = self.store.get(msg.key.channel, msg.key.chat_id)
        if msg.injected is not None:
            return await self._answer_injected(msg, session)
        if (command := commands.parse(msg.text)) is not None:
            ctx = commands.CommandContext(msg.key, session.files, session, self.store, self.settings.model,
                                          self.consolidator, self.context.fixed_tokens(session.files),
                                          may_erase=not msg.is_group or msg.sender_is_admin,
                                          tool_status=tuple(self.tools.status(msg)))
            return await self.commands.run(*command, ctx)
        limit = self.settings.max_message_chars
        if len(msg.text) > limit:
            return f"That message is {len(msg.text):,} characters long; I can read up to {limit:,}. Send it in parts."
        if not msg.text.strip():
            return NO_TEXT_REPLY
        new, reply = await self._converse(msg, session)
        self.store.append(session, new)
        return reply

    async def _answer_injected(self, msg: InboundMessage, session: Session) -> str:
        """A turn Tusk started itself (a reminder, a task result). If the model cannot be reached, the
        fallback text goes to the chat instead and is saved as the reply: a reminder is never lost to an outage."""
        assert msg.injected is not None
        try:
            new, reply = await self._converse(msg, session)
        except LLMError as exc:
            logger.warning("%s turn answered without the model: %s", msg.injected.source, exc)
            reply = msg.injected.fallback
            new = [user_message(msg), Message(role="assistant", content=reply)]
        self.store.append(session, new)
        return reply

    async def _converse(self, msg: InboundMessage, session: Session) -> tuple[list[Message], str]:
        """Run the LLM/tool loop; returns the messages to save and the text for the user."""
        tools = self.tools.for_chat(msg)  # the built-in tools, plus the MCP servers this chat may use
        history = await self._fitting_history(session, msg)
        prompt = self.context.build(session.files, history, msg)
        room = self._room(session, msg) - sum(m.tokens for m in history)  # what tool steps may still add
        new = [user_message(msg)]

        async def notify(text: str) -> None:  # Tusk's own words in the chat, through the reply path
            await self.send(OutboundMessage(msg.key, text, reply_to=msg.id))

        ctx = ToolContext(msg.key, session.files, notify)
        for _ in range(self.settings.max_tool_iterations):
            reply = await self.llm.complete(prompt, tools.schemas)
            if not reply.tool_calls:
                text = (reply.content or "").strip()
                if text:
                    new.append(Message(role="assistant", content=text))
                return new, text or EMPTY_REPLY
            step = [Message(role="assistant", content=reply.content or None,
                            tool_calls=tuple(c.to_wire() for c in reply.tool_calls)).counted()]
            for call in reply.tool_calls:
                result = await tools.run(call, ctx)
                step.append(Message(role="tool", tool_call_id=call.id, name=call.name,
                                    content=self._truncate(result.for_model())).counted())
            new.extend(step)
            room -= sum(m.tokens for m in step)
            if room < 0:  # the next request would be over budget: stop here rather than send it
                text = OUT_OF_ROOM_REPLY
                break
            prompt.extend(m.to_llm() for m in step)
        else:
            text = STEP_LIMIT_REPLY.format(n=self.settings.max_tool_iterations)
        new.append(Message(role="assistant", content=text))
        return new, text

    def _room(self, session: Session, msg: InboundMessage) -> int:
        """Tokens left in the budget for history and tool steps, once the rest of the prompt is in."""
        if self.consolidator is None:
            return sys.maxsize
        pending = count_text(msg.injected.text if msg.injected else msg.text) + RUNTIME_BLOCK_TOKENS
        return self.consolidator.budget.limit - self.context.fixed_tokens(session.files) - pending

    async def _fitting_history(self, session: Session, msg: InboundMessage) -> list[Message]:
        """The history to send: consolidated first if the prompt would be over budget, and cut to fit
        if it still is (oldest whole turns left out), so an over-budget prompt is never sent."""
        c = self.consolidator
        if c is None:
            return session.unconsolidated

        def fixed() -> int:
            return c.budget.limit - self._room(session, msg)

        if c.over_budget(session, fixed()):
            await c.run(session, fixed)
        history, room = session.unconsolidated, self._room(session, msg)
        if room < 0:
            raise MessageTooLong(f"That message does not fit in the model's window ({c.budget.window:,} tokens). "
                                 "Send it in parts.")
        while (excess := sum(m.tokens for m in history) - room) > 0:
            cut = pick_cut(history, excess)
            history = history[cut:] if cut else []
        return history

    async def consolidate(self, key: ChatKey) -> None:
        """Consolidate this chat if it is over budget (the post-turn hook and the scheduled sweep)."""
        session = self.store.get(key.channel, key.chat_id)
        assert self.consolidator is not None
        await self.consolidator.run(session, lambda: self.context.fixed_tokens(session.files))

    def _truncate(self, text: str) -> str:
        limit = self.settings.tool_result_max_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[... truncated: {len(text) - limit:,} more characters not shown]"

    async def _run_hooks(self, key: ChatKey) -> None:
        for hook in self.hooks:
            try:
                await hook(key)
            except Exception:  # hook boundary: a failed hook is logged; the next turn retries it
                logger.exception("post-turn hook %s failed", getattr(hook, "__name__", hook))

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Wait for background hooks (they are short: consolidation of one chat)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
