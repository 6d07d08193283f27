"""One chat turn: command or conversation, then save, reply, and post-turn hooks.

    handle(msg)
      command?  -> bot/commands/ answers; nothing is saved or sent to the LLM
      else      -> prompt (bot/context.py) -> LLM <-> tools (bounded loop: bot/conversation.py)
                -> append the turn to the session (before replying: a reply the user has
                   seen is always on disk) -> send the reply -> hooks in the background
      LLM failed -> one clear sentence to the user; the session is left as it was
      streamed (TUSK_STREAM=auto, where a draft watches) -> the reply shows as written (bot/delivery.py,
                   bot/stream.py); the final text replaces it once saved; a stream cut after some of it
                   showed ends the turn there (that text with a note is saved and sent); so does /stop
                   (bot/stop.py: the text so far, marked stopped)
      read out (/voice, TUSK_VOICE_REPLIES: bot/speech/) -> not streamed; once saved, the reply goes as a
                   voice message with its text beside it, or as the text alone if speech fails

The bus guarantees one turn at a time per chat, so a turn owns its session while it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from bot import commands, logs, metrics
from bot.context import ContextBuilder
from bot.conversation import Conversation, regenerating
from bot.delivery import Delivery, Send
from bot.errors import LLMError, LLMUnavailable, MediaRefused
from bot.events import ChatKey, InboundMessage, OutboundMessage, TurnResult
from bot.llm import LLM
from bot.llm.choice import ModelChoices
from bot.fitting import PromptFit
from bot.llm.slots import Turns, housekeeping
from bot.media import Attached, MediaReader
from bot.media import turn as media_turn
from bot.replies import (CRASH_REPLY, STORAGE_REPLY, NO_TEXT_REPLY, Answer, MessageTooLong, own, user_message)
from bot.stop import Stops
from bot.stream import Drafts, Live, StreamSettings
from bot.threads import Spawned
from bot.tools.box import ToolBox
from bot.usage import meter as usage
from memory import chat_settings
from memory.session import Message
from store.base import Chat, ChatStore
from store.errors import RETRIED, StaleWrite, StorageUnavailable

if TYPE_CHECKING:
    from bot.consolidation import Consolidator
    from bot.speech.replies import VoiceReplies

logger = logging.getLogger(__name__)

PostTurnHook = Callable[[ChatKey], Awaitable[None]]


class RunReports(Protocol):
    """Where a schedule's run hears how its turn went (bot/schedules/runs.py)."""

    def failed(self, msg: InboundMessage, exc: LLMError) -> str: ...  # what the chat is told ("" for nothing)

    def finished(self, msg: InboundMessage, delivered: bool, outcome: str) -> None: ...

OWNER_CHANNELS = frozenset({"http", "terminal"})  # the owner's own: an LLM failure is told with its cause and fix


@dataclass(frozen=True, slots=True)
class AgentSettings:
    model: str
    max_tool_iterations: int = 20
    tool_result_max_chars: int = 16_000
    max_message_chars: int = 32_000
    log_content: bool = False  # TUSK_LOG_CONTENT: put what people wrote (and the replies) in the log


class ChatAgent:
    def __init__(self, settings: AgentSettings, chats: ChatStore, llm: LLM, tools: ToolBox,
                 context: ContextBuilder, send: Send, chat_commands: commands.Commands | None = None,
                 consolidator: Consolidator | None = None, media: MediaReader | None = None,
                 drafts: Drafts | None = None, streaming: StreamSettings = StreamSettings("off"),
                 models: ModelChoices | None = None, stops: Stops | None = None, voice: VoiceReplies | None = None,
                 runs: RunReports | None = None, turns: Turns | None = None) -> None:
        """`turns`: where this agent counts its turns (housekeeping waits for them: bot/llm/slots.py)."""
        self.settings = settings
        self.models = models or ModelChoices(settings.model, {})  # a chat's /model pick (bot/llm/choice.py)
        self.profile = llm.profile  # what is known of the model: window, tools, ... (bot/llm/profile.py)
        self.fit = PromptFit(context, self.models, consolidator, self.profile)  # the turn's budget (bot/fitting.py)
        self.chats = chats  # what each chat keeps (store/base.py): loaded, appended to, consolidated
        self.llm = llm
        self.tools = tools
        self.context = context
        self.send = send
        self.commands = chat_commands or commands.Commands()
        self.consolidator = consolidator
        self.media = media  # reads a message's files into its turn (bot/media/)
        self.runs = runs  # schedules hear how their runs' turns went
        self.hooks: list[PostTurnHook] = [self.consolidate] if consolidator else []
        self.delivery = Delivery(send, drafts, streaming)  # the reply shown as written, then finished or sent
        # the LLM <-> tools loop (bot/conversation.py); /stop cuts it short, what it showed kept
        self.conversation = Conversation(llm, tools, context, self.fit, send, chats, stops or Stops(), settings.model,
                                         settings.max_tool_iterations, settings.tool_result_max_chars,
                                         bounded=consolidator is not None)
        self.voice = voice  # replies read out (bot/speech/replies.py)
        self._background = Spawned()  # post-turn hooks
        self.turns = turns or Turns()

    def busy(self) -> bool:
        """Whether a turn is running now, in any chat."""
        return self.turns.busy()

    async def until_idle(self) -> None:
        """Return once no turn is running."""
        await self.turns.until_idle()

    async def handle(self, msg: InboundMessage) -> TurnResult | None:
        """The turn for `msg`, answered; how it ended (None for group chatter, which is no turn)."""
        with self.turns.running():
            return await self._handle(msg)

    async def _handle(self, msg: InboundMessage) -> TurnResult | None:
        if not msg.addressed:  # group chatter: saved if the chat listens, never answered
            await self._overheard(msg)
            return None
        stats = logs.TurnStats()  # the turn's tally while it runs (LLM calls add to it); its result is frozen
        purpose = msg.injected.source if msg.injected is not None else "reply"
        try:
            chat = await self.chats.open(msg.key)
        except StorageUnavailable as exc:  # nothing was taken from the chat: the person can send it again
            if RETRIED.get():
                raise  # the queue runs the turn again once the database is back
            logger.error("turn refused: %s", exc)
            stats.outcome = "storage_unavailable"
            await self.delivery.deliver(OutboundMessage(msg.key, STORAGE_REPLY, reply_to=msg.id, verbatim=True), None)
            metrics.turn_done(msg.key.channel, stats)
            return None
        with logs.bound(msg.key, msg.id, stats), usage.scope(msg.key, msg.sender_id or None, purpose,
                                                              self._zone(chat)):
            if self.settings.log_content:
                logger.info("message from %s: %s", msg.sender_id, msg.text)
            runs_before = self._consolidation_runs(msg.key)
            speaking = self.voice is not None and self.voice.wants_voice(msg, chat.prefs)
            live = None if speaking else self.delivery.live(msg)  # a reply read out is not shown as written
            answer = await self._attempt(msg, chat, live, stats)
            run = msg.injected.run if msg.injected is not None else ""
            reply = OutboundMessage.answer(msg, answer.text, answer.verbatim)
            if run and not answer.text:  # a run's repeated failure says nothing
                delivered = False
            elif speaking and stats.outcome == "ok" and not answer.verbatim:  # Tusk's own words stay text
                assert self.voice is not None
                delivered = await self.voice.deliver(reply)
            else:
                delivered = await self.delivery.deliver(reply, live)
            if run and self.runs is not None:
                self.runs.finished(msg, delivered, stats.outcome)
            if self.settings.log_content:
                logger.info("reply: %s", answer.text)
            figures = stats.fields()  # time to the reply; hooks run after it
            metrics.turn_done(msg.key.channel, stats)
            self._spawn(self._finish(msg.key, figures, runs_before), f"hooks {msg.key}")
            return TurnResult(stats.outcome, stats.tokens_in, stats.tokens_out)

    async def _attempt(self, msg: InboundMessage, chat: Chat, live: Live | None, stats: logs.TurnStats) -> Answer:
        """The turn's answer, or what the person is told of its failure. A cluster worker's turn (RETRIED) lets
        the database's failures through: its queue runs it again once the database is back, or the worker
        that took the chat over does."""
        try:
            return await self._answer(msg, chat, live)
        except MessageTooLong as exc:
            stats.outcome = "too_long"
            return own(str(exc))
        except LLMError as exc:
            logger.warning("turn abandoned, session unchanged: %s", exc)
            stats.outcome = outcome_of(exc)
            return own(exc.owner_message if msg.key.channel in OWNER_CHANNELS else exc.user_message)
        except StorageUnavailable as exc:  # the database went during the turn: nothing of it was saved
            if RETRIED.get():
                raise
            logger.error("turn abandoned, session unchanged: %s", exc)
            stats.outcome = "storage_unavailable"
            return own(STORAGE_REPLY)
        except Exception as exc:  # turn boundary: the user hears of it, the log gets the traceback
            if isinstance(exc, StaleWrite) and RETRIED.get():
                raise
            logger.exception("turn crashed")
            stats.outcome = "crash"
            return own(CRASH_REPLY)

    async def _overheard(self, msg: InboundMessage) -> None:
        """A group message not addressed to the bot: with /listen on, saved with its sender (no reply, no LLM
        call; the post-turn hooks may consolidate); otherwise dropped, its text never logged."""
        with logs.bound(msg.key, msg.id, logs.TurnStats()):
            chat = await self.chats.open(msg.key)
            if msg.attachments and self.media is not None:  # their placeholders, not read: no model call
                msg = replace(msg, text=self.media.placeholders(msg))
            if msg.injected is not None or not msg.text.strip() or not chat.prefs.listen:
                return
            if len(msg.text) > self.settings.max_message_chars:
                logger.info("an overheard message over TUSK_MAX_MESSAGE_CHARS was not kept")
                return
            await self.chats.append(chat, [replace(user_message(msg), media=tuple(a.path for a in msg.attachments))])
            self._spawn(self._run_hooks(msg.key), f"hooks {msg.key}")

    async def _finish(self, key: ChatKey, figures: dict[str, object], runs_before: int) -> None:
        """Run the post-turn hooks, then write the turn's one summary line."""
        await self._run_hooks(key)
        figures["consolidations"] = max(0, self._consolidation_runs(key) - runs_before)  # /forget resets
        if logger.isEnabledFor(logging.INFO):
            logger.info("turn done: %s", " ".join(f"{k}={v}" for k, v in figures.items()), extra=figures)

    def _consolidation_runs(self, key: ChatKey) -> int:
        if self.consolidator is None:
            return 0
        stats = self.consolidator.stats.get(key)
        return stats.runs if stats else 0

    async def _answer(self, msg: InboundMessage, chat: Chat, live: Live | None = None) -> Answer:
        if msg.injected is not None:
            return await self._answer_injected(msg, chat, live)
        if msg.attachments:
            return await self._answer_media(msg, chat, live)
        if (command := commands.parse(msg.text)) is not None:
            ctx = commands.CommandContext(msg.key, chat, self.chats, self.settings.model,
                                          self.consolidator, self.context.fixed_tokens(chat),
                                          may_erase=not msg.is_group or msg.sender_is_admin,
                                          model_notes=self.profile.notes(),
                                          tool_status=tuple(self.tools.status(msg)),
                                          sender_id=msg.sender_id, sender_name=msg.sender_name, is_group=msg.is_group)
            return own(await self.commands.run(*command, ctx))
        limit = self.settings.max_message_chars
        if len(msg.text) > limit:
            return own(f"That message is {len(msg.text):,} characters long; I can read up to {limit:,}. "
                       "Send it in parts.")
        if not msg.text.strip():
            return own(NO_TEXT_REPLY)
        new, reply = await self._kept_if_refused(self.conversation.run(msg, chat, live=live), chat, msg)
        if not regenerating(msg):
            await self.chats.append(chat, new)
        return Answer(reply)

    async def _kept_if_refused(self, conversing: Awaitable[tuple[list[Message], str]], chat: Chat,
                               msg: InboundMessage, attached: Attached | None = None) -> tuple[list[Message], str]:
        """The turn's conversation; when a spend limit stops it, the message is still saved (nothing reached
        the model) and the limit's sentence is the answer."""
        try:
            return await conversing
        except usage.SpendLimitReached:
            if not regenerating(msg):
                await self.chats.append(chat, [user_message(msg, attached)])
            raise

    def _zone(self, chat: Chat) -> str:
        """The chat's time zone (where its spending day ends)."""
        return chat_settings.zone_of(chat.prefs, self.context.default_zone).key

    async def _answer_media(self, msg: InboundMessage, chat: Chat, live: Live | None = None) -> Answer:
        """A message with files: read into this turn (bot/media/turn.py); a file Tusk does not take is answered
        with the reason, and nothing is saved or sent to the model. The caption is never a command."""
        try:
            attached = await media_turn.attach(self.media, msg, self.settings.max_message_chars, self.send)
        except MediaRefused as exc:
            return own(str(exc))
        new, reply = await self._kept_if_refused(
            self.conversation.run(replace(msg, text=attached.prompt), chat, attached, live), chat, msg, attached)
        await self.chats.append(chat, new)
        return Answer(reply)

    async def _answer_injected(self, msg: InboundMessage, chat: Chat, live: Live | None = None) -> Answer:
        """A turn Tusk started itself (a reminder, a schedule's run, a task result). If the model cannot be
        reached, the fallback text goes to the chat instead and is saved as the reply: a reminder is never lost
        to an outage. A schedule's run asks `runs` what to say instead ("": nothing, and nothing is saved);
        one sent `as_written` calls no model."""
        injected = msg.injected
        assert injected is not None
        try:
            if injected.as_written:
                reply = injected.fallback
                new = [user_message(msg), Message(role="assistant", content=reply)]
            else:
                new, reply = await self.conversation.run(msg, chat, live=live)
        except LLMError as exc:
            if injected.run and self.runs is not None:
                said = self.runs.failed(msg, exc)  # the failure said once (Tusk's own words), else nothing
                if not said:
                    return Answer("")
                await self.chats.append(chat, [user_message(msg), Message(role="assistant", content=said)])
                return own(said)
            else:
                logger.warning("%s turn answered without the model: %s", injected.source, exc)
                reply = injected.fallback
            new = [user_message(msg), Message(role="assistant", content=reply)]
        await self.chats.append(chat, new)
        return Answer(reply)  # the fallback too: a reminder's or a task's text, saved as the reply

    async def consolidate(self, key: ChatKey) -> None:
        """Consolidate this chat if it is over budget (the post-turn hook and the scheduled sweep)."""
        chat = await self.chats.open(key)
        assert self.consolidator is not None
        with usage.scope(key, None, "consolidation", self._zone(chat)), housekeeping():  # replies go first
            await self.consolidator.run(chat, lambda: self.context.fixed_tokens(chat), background=True)

    async def _run_hooks(self, key: ChatKey) -> None:
        for hook in self.hooks:
            try:
                await hook(key)
            except Exception:  # hook boundary: a failed hook is logged; the next turn retries it
                logger.exception("post-turn hook %s failed", getattr(hook, "__name__", hook))

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        self._background.start(coro, name)

    async def aclose(self) -> None:
        """Wait for background hooks (they are short: consolidation of one chat)."""
        await self._background.wait()


def outcome_of(exc: LLMError) -> str:
    """How a turn the model could not answer ended, for the API client's status and the metrics."""
    if isinstance(exc, usage.SpendLimitReached):
        return "spend_limit"
    return "llm_unavailable" if isinstance(exc, LLMUnavailable) else "llm_error"
