"""/memory why <words> and /memory forget <words | n ... | all words>: one fact at a time.

    /memory why tea            the facts that match, each with where it came from: the chat's messages
                               quoted (trimmed), dated, grouped by who said them; or the summary it came from
    /memory forget tea         the matching facts, numbered as they stand in MEMORY.md
    /memory forget 3 5         removes facts 3 and 5 (a new version: /memory undo brings them back) and keeps
    /memory forget all tea     tombstones, so consolidation cannot bring them back (memory/tombstones.py)

The links are memory/provenance.py's (`provenance.json`, only ever this chat's own messages). In a group a
member may forget the facts in their own `## <Name>` section; its admins any.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone
from typing import Any

from bot import remembering
from bot.commands.base import CommandContext
from memory import provenance
from memory.provenance import Fact, Source, facts, words
from store.base import ChatHandle

SHOWN_FACTS = 10
SHOWN_QUOTES = 6


def matching(memory: str, query: str) -> list[Fact]:
    """The facts holding most of the query's words, best first."""
    wanted = set(words(query))
    if not wanted:
        return []
    scored = [(len(wanted & set(words(f.text + " " + f.section))) / len(wanted), f) for f in facts(memory)]
    return [f for s, f in sorted(scored, key=lambda sf: (-sf[0], sf[1].number)) if s >= 0.5]


def _date(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if ts else "undated"


def explain(sources: list[Source], group: bool) -> list[str]:
    """Where a fact came from, as lines under it."""
    if not sources:
        return ["  (no record of where this came from: it predates the links, or its sources were erased)"]
    out: list[str] = []
    said = [s for s in sources if s.kind in ("message", "remember") and s.text]
    by: dict[str, list[Source]] = {}
    for s in said:
        by.setdefault(s.sender_name or s.sender_id or "someone", []).append(s)
    for who, quotes in by.items():
        head = "  from what " + (f"{who} said" if group else "was said") + ":"
        if any(s.kind == "remember" for s in quotes):
            head = "  saved with remember, " + (f"asked by {who}" if group else "when asked") + ":"
        out.append(head)
        out += [f"    [{_date(s.ts)}] \u201c{s.text}\u201d" for s in quotes[:SHOWN_QUOTES]]
    for s in sources:
        if s.kind == "history":
            out.append(f"  from the summary of {s.text}")
        elif s.kind == "owner":
            out.append(f"  written by the owner in the console, {_date(s.ts)}")
        elif s.kind == "remember" and not s.text:
            out.append(f"  saved with remember, {_date(s.ts)}")
    return out


async def why_text(handle: ChatHandle, query: str, group: bool) -> str:
    if not query.strip():
        return "Which fact? /memory why <words of it>, e.g. /memory why tea"
    found = matching((await handle.memory()).text, query)
    if not found:
        return f"No fact in my memory here matches \u201c{query.strip()}\u201d (see /memory)."
    links = await remembering.links(handle)
    parts = []
    for fact in found[:SHOWN_FACTS]:
        where = f" (under {fact.section})" if fact.section else ""
        parts.append("\n".join([f"{fact.number}. {fact.text}{where}",
                                *explain(provenance.sources_of(links.get(fact.key)), group)]))
    return "\n\n".join(parts)


def may_forget(ctx: CommandContext, fact: Fact) -> bool:
    """Admins (and anyone in a direct chat) any fact; a group member those of their own section."""
    return ctx.may_erase or bool(ctx.sender_name) and fact.section.casefold() == ctx.sender_name.casefold()


def _chosen(memory: str, args: list[str]) -> tuple[list[Fact], str]:
    """The facts `/memory forget` names: numbers, or `all <words>`, else ([], the words to list)."""
    every = facts(memory)
    if args and all(a.isdigit() for a in args):
        numbers = {int(a) for a in args}
        return [f for f in every if f.number in numbers], ""
    if args[:1] == ["all"] and args[1:]:
        return matching(memory, " ".join(args[1:])), ""
    return [], " ".join(args)


async def forget(ctx: CommandContext, args: list[str]) -> str:
    memory = (await ctx.handle.memory()).text
    chosen, query = _chosen(memory, args)
    if query or not args:
        found = matching(memory, query)
        if not found:
            return ("Which fact? /memory forget <words of it> lists the matching ones, numbered." if not query else
                    f"No fact in my memory here matches \u201c{query}\u201d (see /memory).")
        lines = [f"{f.number}. {f.text}" + (f" (under {f.section})" if f.section else "") for f in found]
        first = found[0].number
        return ("Matching facts:\n" + "\n".join(lines) + f"\n\nSend /memory forget {first} (several: "
                f"/memory forget {first} {found[-1].number}) or /memory forget all {query} to forget them for good.")
    if not chosen:
        return "No fact has that number now (MEMORY.md may have changed): list them again with /memory forget <words>."
    refused = [f for f in chosen if not may_forget(ctx, f)]
    if refused:
        return (f"In a group, you can forget the facts under your own name ({ctx.sender_name or 'you'}); "
                f"only its administrators can forget others'. Not forgotten: {refused[0].text}")
    lock = ctx.consolidator.lock(ctx.key) if ctx.consolidator else contextlib.nullcontext()
    async with lock:  # the fresh read: a round may have rewritten MEMORY.md since the listing
        current = {f.key for f in facts((await ctx.handle.memory()).text)}
        chosen = [f for f in chosen if f.key in current]
        ctx.chat.memory = await remembering.forget_facts(ctx.handle, chosen, ctx.sender_id)
    if not chosen:
        return "Those facts are no longer in my memory."
    return ("Forgotten for good:\n" + "\n".join(f"- {f.text}" for f in chosen)
            + "\n\nLater summaries of the old conversation will not bring them back; /memory undo does.")


async def memory_subcommand(ctx: CommandContext, words_: list[str]) -> str | None:
    """The answer to `/memory why ...` or `/memory forget ...`, or None for another subcommand."""
    if words_[:1] == ["why"]:
        return await why_text(ctx.handle, " ".join(words_[1:]), ctx.is_group)
    if words_[:1] == ["forget"]:
        return await forget(ctx, words_[1:])
    return None


async def sources_json(handle: ChatHandle, query: str) -> list[dict[str, Any]]:
    """The console's `.../memory/why?fact=`: the matching facts with their sources."""
    links = await remembering.links(handle)
    return [{"number": f.number, "fact": f.text, "line": f.line, "section": f.section,
             "sources": links.get(f.key, {}).get("sources", [])}
            for f in matching((await handle.memory()).text, query)[:SHOWN_FACTS]]
