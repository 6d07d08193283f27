"""Background tasks: the `start_task` tool and the sub-agent that carries a task out.

`start_task(instructions)` returns at once. The task runs its own LLM loop with one tool,
`search_history`, scoped to the same chat, within a step limit, a token budget and a
timeout. When it ends (with a report, a failure or a timeout), its result is published on
the bus as a turn of the chat, with the result as one-turn injected context: the agent
tells the user, and the turn is saved like any other (a short note as its user message),
so the saved conversation stays legal whatever the model does next.

Tasks live in memory only (`Underway`): a restart or /forget cancels the running ones, and /stop
(bot/stop.py) the chat's running ones, wherever they wait (a model request, a search): no result comes
back from them.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import Field

from bot import logs
from bot.commands.base import Owned, counted
from bot.errors import BusClosed, LLMError
from bot.events import ChatKey, InboundMessage, Injected, TurnResult
from bot.llm import LLMReply
from bot.tools.box import ToolBox, ToolContext
from bot.usage import meter as usage
from memory.tokens import count_text

logger = logging.getLogger(__name__)

SENDER = "tusk"
Complete = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Awaitable[LLMReply]]
Publish = Callable[[InboundMessage], asyncio.Future[TurnResult | None]]  # the bus's publish
Instructions = Annotated[str, Field(min_length=1, max_length=4000, description=(
    "What to find out or work through, self-contained: the helper does not see this conversation."))]

WORKER_PROMPT = """You are a background helper of {name}, an assistant in one chat. It is {now}.
Carry out the instructions you are given. You cannot see the conversation, only the chat's long-term
memory (below) and, through search_history, its older conversation. You have at most {steps} steps.
End with your report as a plain answer (no tool call): it is handed to {name}, who tells the user.

## Memory of this chat (MEMORY.md)

{memory}"""


@dataclass(frozen=True, slots=True)
class TaskSettings:
    timeout: float = 300.0  # seconds a task may run
    max_steps: int = 8  # LLM requests a task may make
    max_running: int = 3  # per chat
    result_max_chars: int = 8_000  # of each search result and of the final report


@dataclass(slots=True)
class Task:
    id: str
    key: ChatKey
    instructions: str
    runner: asyncio.Task[None] | None = None
    set_by_id: str = ""  # who started it: its result's turn records them
    set_by_name: str = ""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit:,} more characters cut]"


class Underway:
    """The background tasks running now, by id: what /stop, /forget and a shutdown cancel. Made before the
    bus and the tasks' tool, so /stop (bot/stop.py `Stops`, which the bus asks first) can stop them from
    the start."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}

    def of(self, key: ChatKey) -> list[Task]:
        return [t for t in self.tasks.values() if t.key == key]

    def cancel(self, tasks: list[Task]) -> None:
        """Cancel `tasks` where they wait: their results never arrive."""
        for task in tasks:
            self.tasks.pop(task.id, None)
            if task.runner is not None:
                task.runner.cancel()

    def stop(self, key: ChatKey) -> list[str]:
        """/stop: this chat's running tasks cancelled now; a line for each, for the answer."""
        mine = self.of(key)
        self.cancel(mine)
        if mine:
            logger.info("/stop cancelled %d background task(s) in %s", len(mine), key)
        return [f"Stopped the background task {task.id}: its result will not come." for task in mine]


class Tasks:
    def __init__(self, settings: TaskSettings, complete: Complete, tools: ToolBox, publish: Publish,
                 budget: Callable[[], int], bot_name: str = "Tusk", underway: Underway | None = None) -> None:
        """`budget()`: the tokens a task's prompt may grow to, now (the model's budget: bot/llm/profile.py);
        `underway`: where the running tasks are kept (and /stop finds them)."""
        self.settings = settings
        self.budget = budget
        self.complete = complete
        self.tools = tools
        self.publish = publish
        self.bot_name = bot_name
        self.underway = underway or Underway()
        self.running = self.underway.tasks

    def of(self, key: ChatKey) -> list[Task]:
        return self.underway.of(key)

    async def start_task(self, ctx: ToolContext, instructions: Instructions) -> str:
        """Start a background task that works on its own while the conversation goes on.

        A helper follows the instructions (it can search this chat's older history); this returns at
        once and the result comes back to this chat later, as a new turn."""
        if len(self.of(ctx.key)) >= self.settings.max_running:
            raise RuntimeError(f"this chat already has {self.settings.max_running} tasks running; "
                               "wait for one to finish")
        task = Task("t" + secrets.token_hex(3), ctx.key, instructions.strip(), set_by_id=ctx.sender_id,
                    set_by_name=ctx.sender_name)
        self.running[task.id] = task
        task.runner = asyncio.create_task(self._run(task, ToolContext(ctx.key, ctx.chat, ctx.chats)),
                                          name=f"task {task.id}")
        return (f"Background task {task.id} started. Its result will come back to this chat as a new message "
                f"when it is done (at most {self.settings.timeout:g} s). Tell the user it is under way.")

    async def _run(self, task: Task, ctx: ToolContext) -> None:
        with logs.bound(task.key, f"task {task.id}"), usage.scope(task.key, purpose="task"):  # for whoever asked
            try:
                async with asyncio.timeout(self.settings.timeout):
                    outcome, result = "finished", await self._work(task, ctx)
            except TimeoutError:
                outcome, result = "failed", f"it ran out of time ({self.settings.timeout:g} s)"
            except LLMError as exc:
                outcome, result = "failed", f"the model could not be reached ({exc.user_message})"
            except Exception:  # task boundary: the chat hears that it failed, the log gets the traceback
                logger.exception("task crashed")
                outcome, result = "failed", "it crashed (the operator's log has the details)"
            finally:
                self.running.pop(task.id, None)
            logger.info("task %s", outcome)
            self._report(task, outcome, _cut(result, self.settings.result_max_chars))

    def _report(self, task: Task, outcome: str, result: str) -> None:
        text = (f"The background task {task.id} that you started has {outcome}. The user has not seen this yet: "
                f"tell them what it found, briefly and in their language.\n\nInstructions were: {task.instructions}"
                f"\n\n{'Report' if outcome == 'finished' else 'Reason'}:\n{result}")
        fallback = f"Background task {task.id} {outcome}:\n\n{result}"
        try:
            self.publish(InboundMessage(task.key, f"[background task {task.id} {outcome}]",
                                        sender_id=task.set_by_id or SENDER, sender_name=task.set_by_name,
                                        injected=Injected("task", text, fallback)))
        except BusClosed:
            logger.warning("task result not delivered: Tusk is shutting down")

    async def _work(self, task: Task, ctx: ToolContext) -> str:
        """The sub-agent's loop; returns its report."""
        s = self.settings
        prompt = WORKER_PROMPT.format(name=self.bot_name, steps=s.max_steps,
                                      now=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                      memory=(await ctx.handle.memory()).text.strip() or "(empty)")
        messages: list[dict[str, Any]] = [{"role": "system", "content": prompt},
                                          {"role": "user", "content": task.instructions}]
        used = count_text(prompt) + count_text(task.instructions)
        for _ in range(s.max_steps):
            reply = await self.complete(messages, self.tools.schemas)
            if not reply.tool_calls:
                return (reply.content or "").strip() or "(the helper ended without a report)"
            step: list[dict[str, Any]] = [reply.step()]
            for call in reply.tool_calls:
                result = await self.tools.run(call, ctx)
                step.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                             "content": _cut(result.for_model(), s.result_max_chars)})
            used += sum(count_text(str(m["content"] or "")) + count_text(str(m.get("tool_calls", ""))) for m in step)
            if used > (budget := self.budget()):
                return f"(stopped: the search results filled the helper's budget of {budget:,} tokens)"
            messages.extend(step)
        return f"(stopped after {s.max_steps} steps without a final report)"

    def owned(self, key: ChatKey) -> list[Owned]:
        """For /forget: this chat's running tasks, cancelled (their results never arrive)."""
        mine = self.of(key)
        if not mine:
            return []

        return [Owned(f"{counted(len(mine), 'running background task')} (cancelled)",
                      lambda: self.underway.cancel(mine))]

    async def aclose(self) -> None:
        """Cancel the running tasks (their results are lost: tasks do not survive a restart)."""
        runners = [t.runner for t in self.running.values() if t.runner is not None]
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        self.running.clear()
