"""The web console's JSON API: every chat's memory, read and changed through the same functions
as the chat commands and the admin CLI (memory/*, bot/commands/); mounted into the HTTP
channel by bot/app.py, so it gets the channel's token check and JSON errors.

    GET  /api/chats?q=&channel=                            every chat: counts, memory size, last activity
    GET  /api/chats/{channel}/{chat_id}                    one chat, with token usage against the window
    GET  /api/chats/{channel}/{chat_id}/memory             MEMORY.md: text, etag, tokens against the cap
    PUT  /api/chats/{channel}/{chat_id}/memory             {"text", "etag"?}: atomic, versioned write
    GET  /api/chats/{channel}/{chat_id}/memory/why?fact=   the facts matching `fact`, each with its sources
    POST /api/chats/{channel}/{chat_id}/memory/forget      {"number": n}: forget that fact for good (tombstone)
    GET  /api/chats/{channel}/{chat_id}/versions           earlier MEMORY.md texts, newest first
    GET  /api/chats/{channel}/{chat_id}/versions/{name}    one of them, with the change made when it was replaced
    POST /api/chats/{channel}/{chat_id}/versions/{name}/restore   make it MEMORY.md again
    GET  /api/chats/{channel}/{chat_id}/history?q=         HISTORY.md entries, newest first
    GET  /api/chats/{channel}/{chat_id}/session?before=&limit=   messages and the consolidation pointer
    GET  /api/chats/{channel}/{chat_id}/forget             what /forget would delete
    POST /api/chats/{channel}/{chat_id}/forget             {"confirm": true}: /forget confirm
    GET  /api/usage?days=30                                daily cost and tokens by chat, top chats and people,
                                                           today's spend against each limit, the models a USD
                                                           limit cannot count (bot/ops/usage.py)
    GET|PUT|DELETE /api/budgets/{channel}/{chat_id}        a chat's own daily limits; PUT {"daily_usd": 1.5} and/or
                                                           {"daily_tokens": 20000}; `warning` when a USD limit
                                                           cannot count the chat's model

Chats are named by channel and chat id in the URL and validated as `ChatKey`s, whose folders
never leave their channel's; a chat Tusk keeps nothing for is a 404, and nothing here creates
one. Writes to MEMORY.md hold the chat's memory lock (the one consolidation and the remember
tool hold), and a save whose `etag` no longer matches is refused (409) rather than overwrite
what consolidation wrote meanwhile. Forget runs the running bot's own /forget, so the report
is the chat command's and the chat leaves the session cache.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic
from aiohttp import web

from bot import remembering
from bot.commands import Commands
from bot.commands.base import CommandContext
from bot.commands.memory_why import sources_json
from bot.ops import usage_page as usage_view
from bot.events import ChatKey
from bot.usage.ledger_sql import SqlLedger
from bot.usage.limits import Limits
from bot.usage.unpriced import Unpriced
from channels.http import chat_key, problems
from memory import provenance
from memory.provenance import Source
from memory.session import Message
from memory.tokens import count_text
from store.base import Chat, ChatHandle, ChatInfo, ChatStore, Entry, Version

if TYPE_CHECKING:
    from bot.consolidation import Consolidator

CHAT = "/api/chats/{channel}/{chat_id}"
BUDGET = "/api/budgets/{channel}/{chat_id}"
MAX_PAGE = 1000
B = TypeVar("B", bound=pydantic.BaseModel)
D = TypeVar("D", bound=int | None)  # a query parameter's default: the value when it is absent


class MemoryBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    text: str
    etag: str | None = None  # the MEMORY.md this edit started from, as GET .../memory gave it


class ForgetBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    confirm: bool  # strict: `true` itself, not 1 or "yes"

    @pydantic.field_validator("confirm")
    @classmethod
    def _true(cls, value: bool) -> bool:
        if value is not True:
            raise ValueError("must be true: forgetting deletes the chat's files")
        return value


class ForgetFactBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    number: int = pydantic.Field(ge=1)  # the fact's number in MEMORY.md, as GET .../memory/why gave it


class BudgetBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    daily_usd: float | None = pydantic.Field(None, ge=0, allow_inf_nan=False)  # 0 stops the chat
    daily_tokens: int | None = pydantic.Field(None, ge=0)  # calls of unknown price (no USD limit counts them)

    @pydantic.model_validator(mode="after")
    def _one(self) -> BudgetBody:
        if self.daily_usd is None and self.daily_tokens is None:
            raise ValueError("give daily_usd, daily_tokens or both")
        return self


def etag(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def line_diff(old: str, new: str) -> list[list[str]]:
    """`[[op, line], ...]` with op " " (kept), "-" (removed) or "+" (added)."""
    a, b = old.splitlines(), new.splitlines()
    out: list[list[str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out += [[" ", line] for line in a[i1:i2]]
        else:
            out += [["-", line] for line in a[i1:i2]] + [["+", line] for line in b[j1:j2]]
    return out


def chat_row(c: ChatInfo) -> dict[str, Any]:
    return {"channel": c.key.channel, "chat_id": c.key.chat_id, "messages": c.messages,
            "memory_bytes": c.memory_bytes, "history_entries": c.history_entries, "last_active": c.last_active}


def message_row(index: int, m: Message) -> dict[str, Any]:
    return {"index": index, "role": m.role, "content": m.content, "ts": m.ts, "name": m.name,
            "tool_calls": [c["function"]["name"] for c in m.tool_calls]}


def entry_row(entry: Entry) -> dict[str, str]:
    heading, _, body = entry.heading.partition("\n")
    return {"heading": heading.removeprefix("## ").strip(), "text": body.strip()}


def _int_param(request: web.Request, name: str, default: D, low: int, high: int) -> int | D:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise web.HTTPBadRequest(text=f"{name} must be a whole number from {low} to {high}")
    return int(raw)


async def _body(request: web.Request, model: type[B], shape: str) -> B:
    try:
        return model.model_validate_json(await request.read())
    except pydantic.ValidationError as exc:
        raise web.HTTPBadRequest(text=f"expected JSON {shape}: {problems(exc)}") from exc


class Console:
    def __init__(self, chats: ChatStore, chat_commands: Commands, consolidator: Consolidator | None,
                 fixed_tokens: Callable[[Chat], int], model: str,
                 lock_for: Callable[[ChatKey], asyncio.Lock] | None = None,
                 in_order: Callable[[ChatKey, Callable[[], Awaitable[str]]], Awaitable[str]] | None = None,
                 ledger: SqlLedger | None = None, limits: Limits | None = None,
                 unpriced: Unpriced | None = None) -> None:
        self.chats_store = chats
        self.commands = chat_commands
        self.consolidator = consolidator
        self.fixed_tokens = fixed_tokens
        self.model = model
        self._locks: dict[ChatKey, asyncio.Lock] = {}
        self.lock_for = lock_for or (lambda k: self._locks.setdefault(k, asyncio.Lock()))
        self.in_order = in_order  # the bus's: a forget waits for the chat's running turn instead of racing it
        self.ledger, self.limits = ledger, limits  # the Usage page (without them, no usage routes)
        self.unpriced = unpriced  # what a USD limit cannot count (bot/usage/unpriced.py)

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/api/chats", self.chats), web.get(CHAT, self.chat),
                web.get(CHAT + "/memory", self.memory), web.put(CHAT + "/memory", self.save_memory),
                web.get(CHAT + "/memory/why", self.why), web.post(CHAT + "/memory/forget", self.forget_fact),
                web.get(CHAT + "/versions", self.versions), web.get(CHAT + "/versions/{name}", self.version),
                web.post(CHAT + "/versions/{name}/restore", self.restore),
                web.get(CHAT + "/history", self.history), web.get(CHAT + "/session", self.session),
                web.get(CHAT + "/forget", self.forget_preview), web.post(CHAT + "/forget", self.forget),
                *([web.get("/api/usage", self.usage), web.get(BUDGET, self.budget), web.put(BUDGET, self.set_budget),
                   web.delete(BUDGET, self.clear_budget)] if self.ledger and self.limits else [])]

    async def _chat(self, request: web.Request) -> tuple[ChatKey, ChatHandle]:
        """The chat the URL names; 400 for a bad channel or id, 404 if Tusk keeps nothing for it."""
        key = chat_key(request.match_info["channel"], request.match_info["chat_id"])
        handle = self.chats_store.handle(key)
        if not await handle.exists():
            raise web.HTTPNotFound(text=f"no chat {key.channel}:{key.chat_id} (it has no messages or memory yet)")
        return key, handle

    async def chats(self, request: web.Request) -> web.Response:
        q, channel = request.query.get("q", "").casefold(), request.query.get("channel")
        rows = [chat_row(c) for c in await self.chats_store.chats()
                if (channel is None or c.key.channel == channel) and q in c.key.chat_id.casefold()]
        return web.json_response({"chats": rows})

    async def chat(self, request: web.Request) -> web.Response:
        key, handle = await self._chat(request)
        chat = await self.chats_store.open(key)
        session, memory = chat.session, chat.memory.text
        info = next((c for c in await self.chats_store.chats() if c.key == key), None)
        system = self.fixed_tokens(chat)
        media = await handle.media()
        row = {**(chat_row(info) if info else {}), "total": session.total,
               "last_consolidated": session.last_consolidated, "versions": len(await handle.versions()),
               "model": self.model, "consolidation": None,
               "media": {"files": len(media), "bytes": sum(m.size for m in media)},
               "tokens": {"system": system, "history": session.tokens, "prompt": system + session.tokens,
                          "memory": count_text(memory)}}
        if (c := self.consolidator) is not None:
            row["tokens"].update(limit=c.budget.limit, window=c.budget.window, reserve=c.budget.reserve,
                                 target=c.budget.target, memory_max=c.max_memory_tokens)
            stats = c.stats.get(key)
            row["consolidation"] = stats and {"runs": stats.runs, "tokens_sent": stats.tokens_sent,
                                              "last_run": stats.last_run, "last_error": stats.last_error or None}
        return web.json_response(row)

    async def _memory_row(self, handle: ChatHandle) -> dict[str, Any]:
        text = (await handle.memory()).text
        return {"text": text, "etag": etag(text), "tokens": count_text(text), "versions": len(await handle.versions()),
                "max_tokens": self.consolidator.max_memory_tokens if self.consolidator else None}

    async def memory(self, request: web.Request) -> web.Response:
        _, handle = await self._chat(request)
        return web.json_response(await self._memory_row(handle))

    async def save_memory(self, request: web.Request) -> web.Response:
        key, handle = await self._chat(request)
        body = await _body(request, MemoryBody, '{"text": "...", "etag": "optional, from GET .../memory"}')
        async with self.lock_for(key):
            current = await handle.memory()
            if body.etag is not None and body.etag != etag(current.text):
                raise web.HTTPConflict(text="MEMORY.md changed since you opened it (a consolidation or the remember "
                                            "tool wrote it): reload it, then make your edit again")
            await remembering.edit(handle, body.text, Source("owner", time.time()), current)
        return web.json_response(await self._memory_row(handle))

    async def why(self, request: web.Request) -> web.Response:
        _, handle = await self._chat(request)
        return web.json_response({"facts": await sources_json(handle, request.query.get("fact", ""))})

    async def forget_fact(self, request: web.Request) -> web.Response:
        """The owner's "forget this fact": out of MEMORY.md as a new version, and kept out (memory/tombstones.py)."""
        key, handle = await self._chat(request)
        body = await _body(request, ForgetFactBody, '{"number": 3} (the fact\'s number, from .../memory/why)')
        async with self.lock_for(key):
            chosen = [f for f in provenance.facts((await handle.memory()).text) if f.number == body.number]
            if not chosen:
                raise web.HTTPNotFound(text=f"MEMORY.md has no fact {body.number} now: reload it")
            await remembering.forget_facts(handle, chosen, "owner")
        return web.json_response({**await self._memory_row(handle), "forgotten": chosen[0].text})

    async def _version(self, request: web.Request, handle: ChatHandle) -> tuple[int, list[Version]]:
        kept, name = await handle.versions(), request.match_info["name"]
        index = next((i for i, v in enumerate(kept) if v.name == name), None)  # only names Tusk listed
        if index is None:
            raise web.HTTPNotFound(text=f"no version {name!r} of this chat's MEMORY.md")
        return index, kept

    async def versions(self, request: web.Request) -> web.Response:
        _, handle = await self._chat(request)
        rows = [{"name": v.name, "replaced": v.saved or None, "bytes": len(v.text.encode())}
                for v in reversed(await handle.versions())]
        return web.json_response({"versions": rows})

    async def version(self, request: web.Request) -> web.Response:
        _, handle = await self._chat(request)
        index, kept = await self._version(request, handle)
        text = kept[index].text
        after = kept[index + 1].text if index + 1 < len(kept) else (await handle.memory()).text
        return web.json_response({"name": kept[index].name, "replaced": kept[index].saved or None, "text": text,
                                  "diff": line_diff(text, after)})

    async def restore(self, request: web.Request) -> web.Response:
        """Write the version back as MEMORY.md: the text it replaces becomes a version in turn."""
        key, handle = await self._chat(request)
        async with self.lock_for(key):
            index, kept = await self._version(request, handle)
            await handle.write_memory(kept[index].text)
        return web.json_response(await self._memory_row(handle))

    async def history(self, request: web.Request) -> web.Response:
        _, handle = await self._chat(request)
        entries = await handle.history()
        words = request.query.get("q", "").casefold().split()
        found = [entry_row(e) for e in reversed(entries) if all(w in e.heading.casefold() for w in words)]
        return web.json_response({"total": len(entries), "entries": found})

    async def session(self, request: web.Request) -> web.Response:
        key, handle = await self._chat(request)
        limit = _int_param(request, "limit", 200, 1, MAX_PAGE)
        before = _int_param(request, "before", None, 0, 10**9)
        chat = await self.chats_store.open(key)
        messages = await handle.messages()
        end = len(messages) if before is None else min(before, len(messages))
        start = max(0, end - (limit or MAX_PAGE))
        return web.json_response({"total": len(messages), "last_consolidated": chat.session.last_consolidated,
                                  "start": start, "messages": [message_row(i, messages[i]) for i in range(start, end)]})

    async def _forget(self, key: ChatKey, confirm: bool) -> str:
        """The running bot's /forget for this chat (its own store, consolidator and holders); a confirmed
        one runs in the chat's order, after the turn that may be running."""
        async def run() -> str:
            ctx = CommandContext(key=key, chat=await self.chats_store.open(key), chats=self.chats_store,
                                 model=self.model, consolidator=self.consolidator)
            return await self.commands.run("forget", "confirm" if confirm else "", ctx)

        return await (self.in_order(key, run) if confirm and self.in_order else run())

    async def forget_preview(self, request: web.Request) -> web.Response:
        key, _ = await self._chat(request)
        report = await self._forget(key, confirm=False)
        items = [line[2:] for line in report.splitlines() if line.startswith("- ")]
        return web.json_response({"report": report, "items": items})

    async def forget(self, request: web.Request) -> web.Response:
        key, handle = await self._chat(request)
        await _body(request, ForgetBody, '{"confirm": true}')
        report = await self._forget(key, confirm=True)
        return web.json_response({"report": report, "gone": not await handle.exists()})

    def _spend(self) -> tuple[SqlLedger, Limits]:
        """The ledger and the limits the usage routes read (`routes` has them only when both were given)."""
        assert self.ledger is not None and self.limits is not None
        return self.ledger, self.limits

    async def usage(self, request: web.Request) -> web.Response:
        days = _int_param(request, "days", 30, 1, 366)
        ledger, limits = self._spend()
        return web.json_response(await asyncio.to_thread(usage_view.usage_page, ledger, limits, days, None,
                                                         self.unpriced))

    def _budget_chat(self, request: web.Request) -> ChatKey:
        """Any chat may get a limit before it first speaks: only the key is checked (400 when bad)."""
        return chat_key(request.match_info["channel"], request.match_info["chat_id"])

    async def _budget_of(self, key: ChatKey) -> web.Response:
        _, limits = self._spend()
        return web.json_response(await asyncio.to_thread(usage_view.chat_budget, limits, key, self.unpriced))

    async def budget(self, request: web.Request) -> web.Response:
        return await self._budget_of(self._budget_chat(request))

    async def set_budget(self, request: web.Request) -> web.Response:
        key = self._budget_chat(request)
        body = await _body(request, BudgetBody, '{"daily_usd": 1.5} (US dollars a day, 0 or more) and/or '
                           '{"daily_tokens": 20000} (tokens a day of models without a known price)')
        _, limits = self._spend()
        await asyncio.to_thread(limits.set_override, key, body.daily_usd, body.daily_tokens)  # atomically
        return await self._budget_of(key)

    async def clear_budget(self, request: web.Request) -> web.Response:
        key = self._budget_chat(request)
        _, limits = self._spend()
        await asyncio.to_thread(limits.clear_override, key)
        return await self._budget_of(key)
