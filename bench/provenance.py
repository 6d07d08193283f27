"""Where a fact came from, measured: the links consolidation leaves in provenance.json, and forgetting.

Over generated conversations (bench/recall_data.py: friends telling news among small talk that reuses
the topics' words) the real consolidator runs round after round with an in-process consolidating model
that files each piece of news as a fact in its own words (`- Quinn's news: pair of rabbits`), keeping the
earlier facts and, every few rounds, rewording one of them. For every fact in the final MEMORY.md:

    precision   the share of facts whose linked messages all really state it (the generator's evidence)
    coverage    the share of facts with at least one correct link

against a naive baseline that links each new fact to the latest message of its round sharing a word.

The forgetting check: a fact is forgotten (`/memory forget`), then 50 rounds consolidate old messages
that still say it, with a model that re-adds whatever the excerpt says; it counts the rounds after
which the fact was back in MEMORY.md (goal: 0), then checks that one new statement brings it back.

    python bench/provenance.py [--chats 20] [--sessions 12] [--chunk 24] [--rounds 50]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.recall_data import Chat, generate  # noqa: E402
from bot import remembering  # noqa: E402
from bot.consolidation import Consolidator  # noqa: E402
from memory import provenance  # noqa: E402
from memory.consolidate import Budget  # noqa: E402
from memory.keys import ChatKey  # noqa: E402
from memory.session import Message  # noqa: E402
from store import open_files  # noqa: E402

NEWS = re.compile(r"^- (\w+)'s news: (.+?)(?: \(still so\))?$")


class NewsModel:
    """Files the news of the chunk's evidence turns as facts; every `reword` rounds rewords one kept fact."""

    def __init__(self, news_by_text: dict[str, tuple[str, str]], reword: int = 4) -> None:
        self.news = news_by_text  # message text -> (speaker, answer)
        self.reword, self.rounds = reword, 0

    async def complete(self, messages, tools, max_tokens):  # noqa: ANN001, ANN201 - consolidate.Complete
        self.rounds += 1
        user = messages[-1]["content"]
        memory = user.split("## Current MEMORY.md", 1)[1].split("## Conversation excerpt", 1)[0].strip()
        lines = [line for line in memory.splitlines() if line.startswith("- ")]
        if self.reword and self.rounds % self.reword == 0 and lines and "(still so)" not in lines[0]:
            lines[0] += " (still so)"
        for line in user.split("## Conversation excerpt", 1)[1].splitlines():
            text = line.split(": ", 1)[-1].strip()
            if text in self.news:
                speaker, answer = self.news[text]
                fact = f"- {speaker}'s news: {answer}"
                if not any(l.startswith(fact) for l in lines):
                    lines.append(fact)
        return {"history_entry": "They caught up.", "memory_update": "\n".join(lines) + "\n"}


def naive(fact: str, chunk: list[tuple[int, Message]]) -> int | None:
    """The baseline: the latest message of the round sharing a word with the fact."""
    wanted = set(provenance.words(fact))
    hits = [pos for pos, m in chunk if wanted & set(provenance.words(m.content or ""))]
    return hits[-1] if hits else None


async def measure(chat: Chat, home: Path, chunk_size: int) -> tuple[list[bool], list[bool], list[bool], list[bool]]:
    ids = {t.id: t for t in chat.turns}
    evidence: dict[tuple[str, str], set[int]] = {}
    pos_of = {t.id: i for i, t in enumerate(chat.turns)}
    news = {}
    for ask in chat.questions:
        for e in ask.evidence:
            turn = ids[e]
            news[turn.text] = (turn.speaker, ask.answer)
            evidence.setdefault((turn.speaker, ask.answer), set()).add(pos_of[e])
    model = NewsModel(news)
    chats, key = open_files(home).chats, ChatKey("http", chat.name)
    consolidator = Consolidator(chats, model.complete, lambda: Budget.for_window(200_000), lambda: 20_000)
    baseline: dict[str, int | None] = {}
    for start in range(0, len(chat.turns), chunk_size):
        batch = [Message("user", t.text, ts=t.ts, sender_id=t.speaker.lower(), sender_name=t.speaker)
                 for t in chat.turns[start:start + chunk_size]]
        opened = await chats.open(key)
        await chats.append(opened, batch)
        before = {f.key for f in provenance.facts(opened.memory.text)}
        numbered = list(enumerate(opened.session.unconsolidated, opened.session.last_consolidated))
        await consolidator.run(opened, lambda: 0, force=True)
        for fact in provenance.facts((await chats.open(key)).memory.text):
            if fact.key not in before and (m := NEWS.match(fact.line)) and fact.key not in baseline:
                baseline[fact.key] = naive(fact.text, numbered)
    links = await remembering.links(chats.handle(key))
    memory = (await chats.open(key)).memory.text
    precise, covered, base_precise, base_covered = [], [], [], []
    for fact in provenance.facts(memory):
        m = NEWS.match(fact.line)
        if not m:
            continue
        truth = evidence.get((m[1], m[2]), set())
        linked = {s.pos for s in provenance.sources_of(links.get(fact.key)) if s.kind == "message"}
        precise.append(bool(linked) and linked <= truth)
        covered.append(bool(linked & truth))
        guess = baseline.get(provenance.fact_key(f"- {m[1]}'s news: {m[2]}"))
        base_precise.append(guess in truth)
        base_covered.append(guess in truth)
    return precise, covered, base_precise, base_covered


async def forgetting(home: Path, rounds: int) -> tuple[int, bool]:
    """(rounds after which the forgotten fact was back, whether a new statement brought it back)."""
    said = "We adopted a pair of rabbits on Saturday!"
    model = NewsModel({said: ("Quinn", "pair of rabbits")}, reword=0)
    chats, key = open_files(home).chats, ChatKey("http", "forgetting")
    consolidator = Consolidator(chats, model.complete, lambda: Budget.for_window(200_000), lambda: 20_000)

    async def say(text: str, ts: float | None = None) -> str:
        """One message of Quinn's, then a round over it; MEMORY.md after it."""
        opened = await chats.open(key)
        await chats.append(opened, [Message("user", text, ts=ts or time.time(), sender_id="q", sender_name="Quinn")])
        await consolidator.run(opened, lambda: 0, force=True)
        return (await chats.open(key)).memory.text

    old = time.time() - 86_400
    fact = next(f for f in provenance.facts(await say(said, old)) if "rabbits" in f.line)
    opened = await chats.open(key)
    await chats.append(opened, [Message("user", said, ts=old + 1, sender_id="q", sender_name="Quinn")])  # still said
    await remembering.forget_facts(chats.handle(key), [fact], "q")
    back = 0
    for i in range(rounds):
        back += "rabbits" in await say(said if i % 2 == 0 else "The new cafe by the station is nice.", old + 2 + i)
    return back, "rabbits" in await say(said)  # said again, now


def share(values: list[bool]) -> str:
    return f"{100 * sum(values) / len(values):.1f}%" if values else "n/a"


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--chunk", type=int, default=24, help="messages per consolidation round")
    parser.add_argument("--rounds", type=int, default=50, help="rounds of the forgetting check")
    args = parser.parse_args(argv)
    totals: list[list[bool]] = [[], [], [], []]
    with tempfile.TemporaryDirectory() as tmp:
        for chat in generate(args.chats, args.sessions, history=False):
            for acc, part in zip(totals, await measure(chat, Path(tmp), args.chunk)):
                acc += part
        back, again = await forgetting(Path(tmp), args.rounds)
    print(f"{len(totals[0])} facts over {args.chats} chats, {args.chunk} messages a round")
    print(f"{'':12} {'precision':>10} {'coverage':>10}")
    print(f"{'Tusk':12} {share(totals[0]):>10} {share(totals[1]):>10}")
    print(f"{'naive':12} {share(totals[2]):>10} {share(totals[3]):>10}")
    print(f"forgotten fact back after {back} of {args.rounds} rounds; a new statement brought it back: {again}")


if __name__ == "__main__":
    asyncio.run(main())
