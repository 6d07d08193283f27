"""A turn's conversation with the model: the LLM <-> tools loop, bounded, that bot/agent.py runs for a message.

    run(msg, chat)
      prompt (bot/context.py, history fitted to the budget: bot/fitting.py)
      -> the chat's model, its tools when it takes them (bot/llm/), the reply shown as written (`live`)
      -> tool calls? run them (bot/tools/), append the step, ask again
         (at most TUSK_MAX_TOOL_ITERATIONS requests; a step that would overrun the budget ends it)
      -> the messages to save (the user message, the tool steps, the reply) and the reply's text
      a smaller window or no tools learned -> the prompt refitted and asked again (at most MAX_OVERFLOWS times)
      a stream cut after part of it showed, /stop (bot/stop.py) -> that part, with a note, is the reply

Nothing is saved here: the agent saves what `run` returns.
"""

from __future__ import annotations

import logging

from bot import logs, stream
from bot.context import ContextBuilder
from bot.delivery import Send
from bot.errors import ContextOverflow, ToolsUnsupported
from bot.events import InboundMessage, OutboundMessage
from bot.fitting import PromptFit
from bot.llm import LLM, LLMReply
from bot.llm.streams import StreamCut
from bot.media import Attached
from bot.replies import EMPTY_REPLY, MALFORMED_REPLY, OUT_OF_ROOM_REPLY, STEP_LIMIT_REPLY, shown_text, user_message
from bot.stop import Stopped, Stops, stopped_turn
from bot.stream import Live
from bot.tools.box import ToolBox, ToolContext, Toolset
from memory.session import Message
from store.base import Chat, ChatStore

logger = logging.getLogger(__name__)

NO_TOOLS = ToolBox([])  # a turn Tusk starts without tools (a check-in)
MAX_OVERFLOWS = 3  # times a turn learns a smaller window and tries again before it gives up


def regenerating(msg: InboundMessage) -> bool:
    """An API client asked for the last answer again: nothing of the turn is saved (bot/events.py ClientTurn)."""
    return msg.client is not None and msg.client.regenerate


class Conversation:
    def __init__(self, llm: LLM, tools: ToolBox, context: ContextBuilder, fit: PromptFit, send: Send,
                 chats: ChatStore, stops: Stops, model: str, max_steps: int = 20,
                 tool_result_max_chars: int = 16_000, bounded: bool = True) -> None:
        """`model`: the default model (a chat's /model pick is another: `fit.model`); `max_steps`: the requests
        one turn may make; `bounded`: each reply is bounded by the budget's reserve (consolidation keeps to the
        budget); `send`: how a tool's notice reaches the chat; `stops`: where /stop finds the running turn."""
        self.llm = llm
        self.profile = llm.profile  # what is known of the model: window, tools, ... (bot/llm/profile.py)
        self.tools = tools
        self.context = context
        self.fit = fit
        self.send = send
        self.chats = chats
        self.stops = stops
        self.model = model
        self.max_steps = max_steps
        self.tool_result_max_chars = tool_result_max_chars
        self.bounded = bounded

    async def run(self, msg: InboundMessage, chat: Chat,
                  attached: Attached | None = None, live: Live | None = None) -> tuple[list[Message], str]:
        """Run the LLM/tool loop; returns the messages to save and the text for the user. With `attached`,
        `msg.text` is the text this turn's request carries; the session keeps `attached.saved`. A stream
        cut after the user saw part of it ends the turn there: that part, with a note, is the reply; so does
        /stop (bot/stop.py), wherever the loop waits."""
        new = [user_message(msg, attached)]
        try:
            async with self.stops.stoppable(msg.key):
                return await self._loop(msg, chat, new, attached, live)
        except Stopped as stop:
            if (stats := logs.current_stats()) is not None:
                stats.outcome = "stopped"  # /metrics: tusk_turns_total{outcome="stopped"}
            return stopped_turn(new, live.text if live is not None else "", stop.by)

    async def _loop(self, msg: InboundMessage, chat: Chat, new: list[Message],
                    attached: Attached | None, live: Live | None) -> tuple[list[Message], str]:
        """The loop itself; `new` (the user message) grows with each tool step as it runs."""
        # the built-in tools, plus the MCP servers this chat may use; none for a turn Tusk starts without them
        tools = self.tools.for_chat(msg) if msg.injected is None or msg.injected.tools else NO_TOOLS
        prompt, room, sent = await self._prompt(chat, msg, new, attached)

        async def notify(text: str) -> None:  # Tusk's own words in the chat, through the reply path
            await self.send(OutboundMessage.answer(msg, text, verbatim=True))

        ctx = ToolContext(msg.key, chat, self.chats, notify, sender_id=msg.sender_id, sender_name=msg.sender_name,
                          is_group=msg.is_group, sender_is_admin=msg.sender_is_admin, message_text=msg.text)
        overflows = cut_retries = 0
        model = self.fit.model(chat, msg)
        cap = msg.client.max_tokens if msg.client is not None else None
        temperature = msg.client.temperature if msg.client is not None else None
        for _ in range(self.max_steps):
            try:
                reply = await self._complete(prompt, tools, model, live, cap, temperature, sent)
            except StreamCut as exc:
                assert live is not None
                logger.warning("the reply's stream was cut after part of it was shown: %s", exc)
                text = live.text + stream.CUT_NOTE
                break
            except (ContextOverflow, ToolsUnsupported) as exc:  # the profile learned a smaller window, or no tools
                overflows += isinstance(exc, ContextOverflow)
                if overflows > MAX_OVERFLOWS or not exc.learned:
                    raise
                prompt, room, sent = await self._prompt(chat, msg, new, attached)  # refitted; without tools
                continue
            if reply.cut and any(c.error for c in reply.tool_calls) and not cut_retries:
                cut_retries += 1  # cut inside a call's arguments: a failed step, asked once more
                logger.warning("a tool call was cut off by the length limit; asking again")
                continue
            if not reply.tool_calls:
                text = shown_text(reply)
                if text:
                    new.append(Message(role="assistant", content=text))
                return new, text or (MALFORMED_REPLY if reply.finish_reason == "malformed_call" else EMPTY_REPLY)
            before = len(new)
            await self._run_step(reply, ctx, tools, new, live)
            step = new[before:]
            room -= sum(m.tokens for m in step)
            if room < 0:  # the next request would be over budget: stop here rather than send it
                text = OUT_OF_ROOM_REPLY
                break
            prompt.extend(m.to_llm() for m in step)
        else:
            text = STEP_LIMIT_REPLY.format(n=self.max_steps)
        new.append(Message(role="assistant", content=text))
        return new, text

    async def _complete(self, prompt: list[dict[str, object]], tools: Toolset, model: str, live: Live | None,
                        cap: int | None, temperature: float | None, sent: int) -> LLMReply:
        """One chat request to the chat's model: its tools when the model takes them, the reply bounded by the
        reserve (and by an API client's `cap`, within it); `sent`: the prompt's estimate, for the server's
        count to be compared with (bot/llm/profile.py `prompt_counted`)."""
        takes = self.profile.takes_tools(model)
        reserve = self.fit.budget(model).reserve if self.bounded else None
        if cap is not None:
            reserve = min(cap, reserve) if reserve is not None else cap
        return await self.llm.complete(prompt, tools.schemas if takes else None, live=live, max_tokens=reserve,
                                       model=None if model == self.model else model, temperature=temperature,
                                       estimate=sent)

    async def _prompt(self, chat: Chat, msg: InboundMessage, new: list[Message],
                      attached: Attached | None = None) -> tuple[list[dict[str, object]], int, int]:
        """The request for this turn so far (history fitted to the budget, the message, the tool steps
        already taken), the tokens further steps may still add, and the prompt's estimate without tools."""
        history = await self.fit.history(chat, msg, attached)
        if regenerating(msg):  # asked again: the last exchange is what is being answered anew
            history = history[:max((i for i, m in enumerate(history) if m.role == "user"), default=0)]
        steps = new[1:]
        images = attached.images if attached else ()
        prompt = self.context.build(chat, history, msg, images) + [m.to_llm() for m in steps]
        used = sum(m.tokens for m in history) + sum(m.tokens for m in steps)
        room = self.fit.room(chat, msg, attached) - used
        sent = self.context.fixed_tokens(chat) - self.context.tool_tokens + used
        return prompt, room, sent

    async def _run_step(self, reply: LLMReply, ctx: ToolContext, tools: Toolset, new: list[Message],
                        live: Live | None = None) -> None:
        """Run one reply's tool calls, appending the step to `new` as it goes (the calls with their reasoning,
        then each result): a step /stop cuts short is there up to where it got."""
        new.append(Message(role="assistant", content=reply.content or None, reasoning=reply.reasoning,
                           thinking_blocks=reply.thinking_blocks,
                           tool_calls=tuple(c.to_wire() for c in reply.tool_calls)).counted())
        for call in reply.tool_calls:
            if live is not None:
                live.status(call.name)
            result = await tools.run(call, ctx)
            new.append(Message(role="tool", tool_call_id=call.id, name=call.name,
                               content=self._truncate(result.for_model())).counted())

    def _truncate(self, text: str) -> str:
        limit = self.tool_result_max_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[... truncated: {len(text) - limit:,} more characters not shown]"
