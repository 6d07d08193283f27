"""Wiring: settings in, a running Tusk out. The only module that knows every part.

    async with TuskApp(settings) as app:   # channels started
        ...                                # serve until a signal, or run the terminal chat
                                           # on exit: drain turns, wait hooks, stop channels
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot import parts, running, stores
from bot.agent import ChatAgent
from bot.bus import MessageBus
from bot.chat_move import ChatMoves
from bot.cluster.resend import resend_saved
from bot.cluster.roles import Cluster, Role, refuse_role
from bot.commands import Commands
from bot.commands.erasure import (DocumentMembers, MediaMembers, MemberErasure, ReminderMembers, SearchMembers,
                                  model_rewrite)
from bot.config import Settings
from bot.ops import access
from bot.context import ContextBuilder
from bot.events import ChatKey, InboundMessage, TurnResult
from bot.access.api_keys import ApiKeys
from bot.access.flood import FloodGate
from bot.llm import LLM
from bot.media import MediaReader
from bot.access.pairing import PairingStore
from bot.commands.reminders import reminder_commands
from bot.schedules.checkins import CheckIns
from bot.schedules.service import Schedules
from bot.tools.reminders import ReminderTools
from bot.scheduler import Sweeper, start_scheduler
from bot.skills.views import skills_command
from bot.stop import Stops, stop_command
from bot.tools.tasks import Tasks, Underway
from bot.tools.box import BUILTIN_TOOLS, ToolBox
from bot.llm.slots import Turns
from bot.llm.warmup import ModelWarmup
from bot.llm.choice import ModelChoices
from bot.commands.model import model_command
from bot.usage.limits import Limits
from bot.version import installed as installed_version
from bot.usage.meter import Meter
from bot.usage.erasure import UsageRecords
from bot.usage.unpriced import ModelsInUse, Unpriced
from bot.usage.view import status_lines, usage_command
from bot.commands.base import CommandContext
from bot.speech.command import voice_command
from bot.speech.config import SpeechSettings
from bot.speech.replies import voice_replies
from channels.base import Access, Channel
from memory import chat_settings
from memory.media import MediaStore
from memory.paths import private_dir

if TYPE_CHECKING:
    from channels.http import HttpChannel
    from channels.http.health import Readiness

logger = logging.getLogger(__name__)

LOCAL_CHANNELS = frozenset({"http", "terminal"})

C = TypeVar("C", bound=Channel)


def _durable(msg: InboundMessage) -> bool:
    """Journaled until its turn ends: what a platform (or the reminder store) already let go of.
    An HTTP or terminal user sees a failure and can send again, so theirs are not."""
    if not msg.addressed:  # group chatter: never written to disk before the chat's /listen says to keep it
        return False
    return msg.key.channel not in LOCAL_CHANNELS or msg.injected is not None


class TuskApp:
    def __init__(self, settings: Settings, command: str = "tusk run", role: Role = "all") -> None:
        self.settings = settings
        self.role = role
        self.command = command  # what the home's lock record calls this Tusk (bot/running.py)
        self.http: HttpChannel | None = None
        llm_settings = settings.llm_settings()  # fails here, before anything starts, if the LLM is not configured
        parts.tokenizer_checked()
        self.store = parts.store(settings)  # what Tusk keeps (store/): files, or PostgreSQL, its schema current
        refuse_role(self.store, role)  # ingress and worker need the database
        self.chats = self.store.chats
        self.media = MediaStore(self.chats, settings.media_limits())  # every channel keeps files here (memory/media.py)
        self.inbox = stores.inbox(self.store)  # inbox.jsonl or the database's `inbox` (bot/stores.py)
        self.seen = stores.seen(self.store)  # platform messages taken already: never answered twice (bot/dedupe.py)
        underway = Underway()  # the background tasks running now: /stop cancels them too (bot/tools/tasks.py)
        self.stops = Stops([underway.stop])  # /stop: answered by the bus as it arrives (bot/stop.py)
        # on the database, several processes may serve the bot: messages are queued there (bot/cluster/)
        self.cluster = Cluster(self.store, role, lambda msg: self.bus.run_here(msg),
                               lambda msg: resend_saved(self.chats, self.bus.send, msg), settings.worker_turns,
                               settings.shutdown_grace, self.stops) if self.store.kind == "postgres" else None
        self.bus = MessageBus(self._handle, None if self.cluster else self.inbox, durable=_durable,
                              at_once=self.cluster.at_once if self.cluster else self.stops.answer,
                              remote=self.cluster.submit if self.cluster else None)
        self.ledger = stores.ledger(self.store)  # every model call, its tokens and cost (bot/usage/)
        self.limits = Limits(self.ledger, settings.limit_settings(), doc=stores.budgets(self.store))
        self.models = settings.model_choices()
        self.choices = ModelChoices(llm_settings.model, {c.label: c.model for c in self.models.values()})
        self.profile = parts.model_profile(settings, llm_settings.model, self.models, self.store)
        turns = Turns()  # the chat turns under way: the agent counts them, housekeeping waits for them
        self.llm = LLM(llm_settings, self.profile, Meter(self.ledger, self.limits, self.profile.prices), turns)
        self.unpriced = Unpriced(self.chats.prefs_now, ModelsInUse.of(settings), self.profile.prices, self.ledger,
                                 self.limits)  # USD limits that cannot count a model: said in /status, the console
        self.schedules = Schedules(settings.home, settings.schedule_settings(), self.bus.publish,  # bot/schedules/
                                   self.chats, store=stores.schedules(self.store))
        self.checkins = CheckIns(self.schedules)
        # replies first: background rounds wait for the turns, and on a one-slot server yield to them (bot/llm/slots.py)
        self.consolidator = parts.consolidator(settings, self.chats, self.llm, self.profile, self.checkins.instructions)
        self.memory_tools = parts.memory_tools(settings, self.store.search, self.consolidator.lock,
                                               lambda: self.profile.memory_cap)  # remember, search_history
        self.tasks = Tasks(settings.task_settings(), self.llm.slots.retrying(self.llm.complete),
                           ToolBox([self.memory_tools.search_history]), self.bus.publish,
                           lambda: self.profile.budget.limit, settings.bot_name, underway)
        self.mcp = parts.mcp_hub(settings)
        window = lambda: self.profile.window.tokens  # noqa: E731 (the tokens the model's window holds now)
        self.chat_tools = parts.chat_tools(settings, self.mcp, window)
        self.skills = parts.skills(settings, self.chat_tools, window, lambda: self.profile.tools)
        reminders = ReminderTools(self.schedules)
        self.tools = ToolBox([*BUILTIN_TOOLS, self.memory_tools.search_history, self.memory_tools.remember,
                              reminders.set_reminder, reminders.list_reminders,
                              reminders.cancel_reminder, self.tasks.start_task], extra=self.skills)
        speech = settings.speech_settings()  # a speech engine that cannot work stops Tusk here, saying why
        self.voice = voice_replies(speech, self.ledger, self.limits, settings.home, self.bus.voice, self.bus.send)
        context = ContextBuilder(settings.home, settings.bot_name, self.tools.schemas, settings.timezone,
                                 chat_tools=self.skills, takes_tools=lambda: self.profile.tools)
        media = MediaReader(settings.media_settings(), self.media, llm_settings.model, self.llm.complete,
                            self.llm.meter)
        self.warmup = ModelWarmup(llm_settings, settings.context_window, self.profile, self.llm.slots)
        self.agent = ChatAgent(settings.agent_settings(), self.chats, self.llm, self.tools, context, self.bus.send,
                               self._commands(speech), consolidator=self.consolidator, media=media,
                               drafts=self.bus.draft, streaming=settings.stream_settings(), models=self.choices,
                               stops=self.stops, voice=self.voice, runs=self.schedules.turns, turns=turns)
        self.channels: list[Channel] = []
        self.access = Access(settings.dm_policy, PairingStore(self.store.doc("pairing.json"), settings.pairing_ttl * 60,
                                                              settings.pairing_max_pending))
        self.flood = FloodGate(settings.flood_limits(), self.bus.publish, self.bus.send, self.chats.known)
        self.sweeper = Sweeper(self.chats, self._consolidate)
        self.moves = ChatMoves(self.chats, self.bus.in_order, self.consolidator.lock,
                               [self.schedules, *filter(None, [self.access.pairing])])  # a Telegram group upgraded
        self._scheduler: AsyncIOScheduler | None = None

    async def _backup(self) -> None:
        """The daily backup (TUSK_BACKUP_DIR), in a thread: a failure is logged and kept for `tusk doctor`."""
        from bot.ops import backup

        assert self.settings.backup_dir is not None  # scheduled only when it is set
        await asyncio.to_thread(backup.scheduled, self.settings.home, self.settings.backup_dir,
                                self.settings.backup_keep, installed_version(), self.settings.store_url())

    def _commands(self, speech: SpeechSettings) -> Commands:
        """The chat commands (bot/commands/), with those of reminders, usage, /model, skills, /stop and /voice."""
        s, usage_records = self.settings, UsageRecords(self.ledger)
        erasure = MemberErasure(model_rewrite(self.llm.complete, s.consolidation_model),
                                [ReminderMembers(self.schedules), stores.inbox_members(self.inbox), MediaMembers(),
                                 DocumentMembers(), SearchMembers(self.store.search), usage_records])
        return Commands(s.timezone, holders=[self.schedules, self.tasks, self.inbox, usage_records],
                        extra=[*reminder_commands(self.schedules, self.checkins),
                               usage_command(self.ledger, s.timezone),
                               model_command(self.choices), skills_command(self.skills), stop_command(),
                               voice_command(speech, lambda key: self.bus.voice(key) is not None)],
                        status_extra=[self._spend_lines], erasure=erasure, persona_max_tokens=s.persona_max_tokens)

    def _spend_lines(self, ctx: CommandContext) -> Sequence[str]:
        """/status: today's spend against the limits that apply to this chat (bot/usage/view.py)."""
        zone = chat_settings.zone_of(ctx.prefs, ZoneInfo(self.settings.timezone))
        return status_lines(self.ledger, self.limits, ctx, zone, self.unpriced)

    async def ready(self) -> None:
        """Return once litellm is loaded and the model's window settled (bot/llm/warmup.py)."""
        await self.warmup.ready()
        if self.voice is not None:
            await self.voice.ready()  # the language model of voice replies (bot/speech/language.py)

    async def _handle(self, msg: InboundMessage) -> TurnResult | None:
        await self.warmup.settled()  # the first turns after a start wait for the tokenizer and the window
        return await self.agent.handle(msg)

    async def _consolidate(self, key: ChatKey) -> None:
        await self.warmup.settled()  # the budget is settled first
        await self.agent.consolidate(key)

    def add(self, channel: C) -> C:
        self.bus.register(self.cluster.outlet(channel) if self.cluster is not None else channel)
        self.channels.append(channel)
        return channel

    def add_http(self, readiness: Readiness | None = None) -> HttpChannel:
        """The HTTP channel with the console, the OpenAI endpoint, /metrics and /readyz (`readiness`: its checks,
        made here unless given: the database answers, and the process is not stopping)."""
        from bot.ops.console import Console  # aiohttp's server: imported only by what serves HTTP
        from bot.ops.mcp_status import mcp_routes
        from bot.skills.console import skill_routes
        from channels.http import HttpChannel

        s = self.settings
        self.http_access = access.http_access(s)  # the console token, made at first start
        http = HttpChannel(s.http_settings(self.http_access.token), self.bus.publish, media=self.media)
        http.add_routes(Console(self.chats, self.agent.commands, self.consolidator,
                                self.agent.context.fixed_tokens, s.model or "", self.consolidator.lock,
                                self.bus.in_order, ledger=self.ledger, limits=self.limits,
                                unpriced=self.unpriced).routes())
        if self.access.pairing is not None:
            from bot.ops.pairing import routes as pairing_routes

            http.add_routes(pairing_routes(self.access.pairing))
        http.add_routes(mcp_routes(self.mcp))
        http.add_routes(skill_routes(self.skills))
        from bot.ops.console_schedules import schedule_routes

        http.add_routes(schedule_routes(self.schedules))
        from channels.http.openai_api import OpenAIApi

        http.add_routes(OpenAIApi(http, self.choices.default, self.choices.choices, self._said).routes())
        # `tusk apikey create`: keys for the OpenAI routes, each for a chat prefix
        http.api_keys = ApiKeys(self.store.doc("api-keys.json"))
        from channels.http.terminal import TerminalRelay

        relay = TerminalRelay(self.bus.publish, self.bus.cancel)  # `tusk chat` beside this Tusk talks through it
        http.add_routes(relay.routes())
        from bot.metrics import Metrics, install
        from channels.http.metrics_route import metrics_routes

        self.metrics = Metrics(self.bus.backlog, self.consolidator.rounds, role=self.role)
        install(self.metrics)  # the hooks count into it (bot/metrics.py)
        http.add_routes(metrics_routes(self.metrics.render))
        if s.metrics == "open":
            http.loopback_open.add("/metrics")
        from channels.http.health import Readiness

        self.readiness = readiness or Readiness()  # /readyz
        if self.store.kind == "postgres":
            self.readiness.require(self.store.db.ready, "the database does not answer")
        http.add_routes(self.readiness.routes())
        self.http = self.add(http)
        self.add(relay)  # after the HTTP channel, so stopped before it: its event streams end first
        return http

    async def _said(self, key: ChatKey) -> list[tuple[str, str]]:
        """A chat's unconsolidated user and assistant texts (tool steps left out), for the OpenAI endpoint."""
        return [(m.role, m.content or "") for m in (await self.chats.open(key)).session.unconsolidated
                if m.role in ("user", "assistant") and not m.tool_calls and isinstance(m.content, str)]

    def menu(self) -> list[tuple[str, str]]:
        """(name, summary) of every chat command, for the platforms' command menus."""
        return [(c.name, c.summary) for c in self.agent.commands.table.values()]

    def add_platforms(self) -> list[Channel]:
        """Add every platform channel whose credentials are set; returns them (maybe none). A worker's only send
        (through each platform's API): it takes no platform traffic (bot/cluster/roles.py)."""
        s = self.settings
        wanted = [(s.telegram_bot_token, self._telegram), (s.discord_bot_token, self._discord),
                  (s.slack_bot_token, self._slack)]
        receive = self.cluster is None or self.cluster.takes
        return [self.add(make(receive)) for token, make in wanted if token is not None]

    def _telegram(self, receive: bool) -> Channel:
        with parts.needs("telegram", "TELEGRAM_BOT_TOKEN"):
            from channels.telegram import TelegramChannel

        def made(receive: bool) -> TelegramChannel:
            return TelegramChannel(self.settings.telegram_settings(), self.flood.publish, self.menu(),
                                   access=self.access, media=self.media, move=self.moves if receive else None,
                                   seen=self.seen, receive=receive)
        if receive and self.cluster is not None and self.settings.telegram_webhook_url is None:
            self.cluster.poll(lambda: made(True))  # long polling on one process of the cluster at a time
            return made(False)
        return made(receive)

    def _discord(self, receive: bool) -> Channel:
        with parts.needs("discord", "DISCORD_BOT_TOKEN"):
            from channels.discord_bot import DiscordChannel
        return DiscordChannel(self.settings.discord_settings(), self.flood.publish, self.menu(), access=self.access,
                              media=self.media, seen=self.seen, receive=receive)

    def _slack(self, receive: bool) -> Channel:
        with parts.needs("slack", "SLACK_BOT_TOKEN"):
            from channels.slack import SlackChannel
        return SlackChannel(self.settings.slack_settings(), self.flood.publish, self.menu(), access=self.access,
                            media=self.media, seen=self.seen, receive=receive)

    async def __aenter__(self) -> TuskApp:
        private_dir(self.settings.home, follow=True)
        self._running = running.claim(self.settings.home, self.command)  # one Tusk per home: else HomeBusy
        started: list[Channel] = []
        try:
            await parts.started(self.store)  # the database reached and its schema current, or one line saying why
            if self.mcp is not None:  # MCP servers start with Tusk, before any turn can want them
                await self.mcp.start()
            for channel in self.channels:
                await channel.start()
                started.append(channel)
            if self.cluster is not None:
                await self.cluster.start()  # the queue's results listened for; a worker takes turns
        except BaseException:
            for channel in reversed(started):
                await channel.stop()
            if self.mcp is not None:
                await self.mcp.stop()
            await self.store.close()
            self._running.release()
            raise
        if self.http is not None:  # where `tusk chat` beside it (and `tusk forget`, `tusk doctor`) find it
            self._running.describe(self.http.local_url)
        if self.cluster is not None:  # its row for `tusk status`, beating while it lives
            await self.cluster.register(self.http.local_url if self.http is not None else None)
        cluster = self.cluster
        if cluster is None or cluster.works:
            self._scheduler = start_scheduler(self.sweeper, self.settings.consolidate_every, self.schedules,
                                              self._backup if self.settings.backup_dir else None, self.checkins,
                                              leading=(lambda: cluster.leader.held) if cluster else None,
                                              shared=cluster is not None)
        # a crash's open turns: from the journal (files); in the database's queue a dead worker's turn runs again
        replay = self.inbox.take_pending(self._running, self.bus.channels) if cluster is None else []
        # runs a crash cut short, and not run again below (nor queued in the database), are recorded as failed
        self.schedules.settle(replay, cluster.dispatch.queued_runs() if cluster is not None else ())
        if replay:
            logger.warning("running again %d turn(s) a crash or forced stop cut short", len(replay))
            for msg in replay:
                self.bus.publish(msg)
        self.warmup.start()  # Tusk is up: now litellm, in the background
        if self.voice is not None:
            self.voice.warm()  # and the language model of voice replies
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
            self.schedules.stop()
        await self.tasks.aclose()  # background tasks do not survive a restart
        for channel in self.channels:  # no new updates; what a platform already handed over is published
            try:
                await channel.pause()
            except Exception:  # shutdown boundary: keep draining the turns already taken
                logger.exception("channel %s did not pause cleanly", channel.name)
        if self.cluster is not None:
            await self.cluster.stop()  # no new turn from the queue; this worker's running turns finish
        if not await self.bus.close(self.settings.shutdown_grace):
            logger.warning("shutdown: turns still running after %.0fs were cancelled", self.settings.shutdown_grace)
        await self.agent.aclose()
        await self.warmup.aclose()
        if self.voice is not None:
            await self.voice.aclose()
        await self.llm.aclose()
        self.ledger.close()
        self.seen.close()
        if hasattr(self.inbox, "close"):
            self.inbox.close()  # the database's: this run's lock let go (its open turns: none, all drained)
        for channel in reversed(self.channels):
            try:
                await channel.stop()
            except Exception:  # shutdown boundary: one channel failing to stop must not strand the others
                logger.exception("channel %s did not stop cleanly", channel.name)
        if self.mcp is not None:
            await self.mcp.stop()
        await self.store.close()
        self._running.release()  # a second __aexit__ is a no-op: the claim knows it was released
